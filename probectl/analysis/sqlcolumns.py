"""Which columns of the recordings' tables a query reads, so that ``query`` decodes those only: the
column memory (written once per event and faulted in page by page) is most of what decoding costs,
and a query usually names two or three columns of the tables' dozen.

Two steps, both conservative (in doubt, every column):

1. before decoding, from the text (DuckDB is still being imported meanwhile): every word of the
   query, and the inside of every double-quoted name, in lower case; every column when the text has
   a ``*`` other than ``count(*)``, or a word that takes columns without naming them (``COLUMNS``,
   ``NATURAL``, ``PIVOT``, ``SUMMARIZE``...);
2. before running it, from DuckDB's own parse (``json_serialize_sql``): every column reference must
   end in a column of the tables or be one of the query's own aliases (``ORDER BY n``); a table or
   subquery used as a value (``SELECT t FROM x t``, a row as a struct), a ``*``, a natural join, a
   statement that is not a SELECT or does not parse: every column, decoded again.

The columns not decoded are still in the tables, as typed NULLs (:mod:`.sql`): DuckDB binds, suggests
(``did you mean``) and describes as over the whole tables.
"""
from __future__ import annotations

import json
import re
from typing import Any, Collection, Optional

_NAME = re.compile(r'"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_$]*)')
_COUNT_STAR = re.compile(r"\(\s*\*\s*\)")
# Words of statements and clauses that read columns they do not name.
_WHOLE_ROWS = frozenset({"columns", "natural", "pivot", "unpivot", "pivot_wider", "pivot_longer", "summarize",
                         "describe", "show", "copy", "export", "attach", "create", "insert", "pragma", "call"})
_WHOLE_ROW_NODES = frozenset({"STAR", "PIVOT", "SHOW_REF", "COLUMNS"})
_NO_PLACE = (1 << 64) - 1  # (the query_location of a node DuckDB's parser made up)


def columns_named(sql: str) -> Optional[frozenset[str]]:
    """The names ``sql`` may read columns by (lower case), from its text; None: every column."""
    if "*" in _COUNT_STAR.sub("", sql):
        return None
    names = {(m[1].replace('""', '"') if m[1] is not None else m[2]).lower() for m in _NAME.finditer(sql)}
    if names & _WHOLE_ROWS:
        return None
    return frozenset(names)


def _orders_the_select_list(order: Any) -> bool:
    """An ORDER BY ALL term: DuckDB's parse of ``ALL`` there is a bare ``*`` of the select list at no
    place in the text (``ORDER BY *`` or ``COLUMNS(*)``, written, have one)."""
    e = order.get("expression") if isinstance(order, dict) else None
    return (isinstance(e, dict) and e.get("class") == "STAR" and e.get("query_location") == _NO_PLACE
            and not e.get("relation_name") and not e.get("expr")
            and not e.get("exclude_list") and not e.get("replace_list") and not e.get("rename_list")
            and not e.get("qualified_exclude_list"))


def reads_only_columns(con: Any, sql: str, columns: Collection[str]) -> bool:
    """Whether DuckDB (connection ``con``) parses ``sql`` into SELECTs whose column references all
    end in one of ``columns`` (the tables' column names, lower case) or name an alias of the query,
    with no ``*`` and no natural join: then the columns its text names are all it reads."""
    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    except Exception:  # (DuckDB's errors are reported when the query runs)
        return False
    if tree.get("error", True):
        return False
    refs: list[list[str]] = []
    aliases: set[str] = set()
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        if node.get("type") == "ORDER_MODIFIER" and all(_orders_the_select_list(o) for o in node.get("orders", [])):
            continue  # (ORDER BY ALL: a star of the select list, not of a table)
        if (node.get("class") in _WHOLE_ROW_NODES or node.get("type") in _WHOLE_ROW_NODES
                or node.get("ref_type") == "NATURAL"):
            return False
        if node.get("class") == "COLUMN_REF":
            refs.append([str(n).lower() for n in node.get("column_names", [])])
        elif node.get("class") and node.get("alias"):  # (an expression's alias; a table's has no class)
            aliases.add(str(node["alias"]).lower())
        stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
    known = {c.lower() for c in columns}
    return all(ref and (ref[-1] in known or (len(ref) == 1 and ref[0] in aliases)) for ref in refs)
