#!/usr/bin/env python3
"""Does ``probectl.dataclass`` still pay? The same `add -D` with it and with the standard ``dataclasses``.

    .venv/bin/python bench/bench_dataclass.py [--runs 15]

The claim (probectl/dataclass.py's docstring, commits ff28b44, 50b0ade, c328af9, 0ee62b7): every
command defines some fifty data classes before it does any work, and ``dataclasses.dataclass``
compiles each one's methods (~0.3 ms a class), a sizeable part of a short command. This script runs
the command those commits measured, ``add -D`` of issue 16's largest fixture definition (``paint``
of dwarf_structs at -O2 with 25 arguments, warm index cache), in a new interpreter per run, with
probectl's decorator and with the standard library's put in its place (``dataclass``, ``field``,
``fields``, ``replace`` and ``FrozenInstanceError`` of ``probectl.dataclass`` replaced before any
other probectl module is imported: every data class is then a standard one). Each run prints:

* ``command``: CPU ms of the whole command in the process, imports included (``probectl.cli.main``);
* ``classes``: CPU ms spent inside the decorator making the classes (and how many);
* ``inits``: CPU ms spent compiling ``__init__`` at first instances (probectl's only: the standard
  library compiles them with the class);
* ``made``: the two together, what the data classes cost the command;
* ``process``: wall ms of the child, interpreter start included.

Runs alternate between the two, and the table shows the median and the fastest of each, and the
ratio standard / probectl. Both must print the same definition (checked). All figures come from
one run on one machine: compare the ratio, not the milliseconds.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

PAINT = ("paint scale w->id w->depth w->name w->label:string w->origin.x w->corner->y w->pts[2].x "
         "w->values[3] w->u.ival w->tag w->hi w->mode w->level w->size w->next->id w->serial w->sc "
         "w->uc w->ok w->fl.tail w->u.bytes[1] w->cv w->next->name:string w->next->label:string")
VARIANTS = ("probectl", "stdlib")


def child(variant: str, binary: str) -> None:
    """(In a new interpreter.) Run ``add -D`` with ``variant``'s data classes; print one JSON line."""
    import io

    import probectl.dataclass as ours

    spent = {"classes": 0.0, "count": 0, "inits": 0.0}
    if variant == "stdlib":
        import dataclasses

        make = dataclasses.dataclass
        ours.field = dataclasses.field  # type: ignore[assignment]
        ours.fields = dataclasses.fields  # type: ignore[assignment]
        ours.replace = dataclasses.replace
        ours.FrozenInstanceError = dataclasses.FrozenInstanceError  # type: ignore[misc]
    else:
        make = ours.dataclass
        compiled_init = ours._compiled_init

        def timed_init(*args, **kwargs):
            start = time.process_time()
            try:
                return compiled_init(*args, **kwargs)
            finally:
                spent["inits"] += time.process_time() - start

        ours._compiled_init = timed_init

    def timed_dataclass(cls=None, /, **options):
        def wrap(cls):
            start = time.process_time()
            try:
                return make(cls, **options)
            finally:
                spent["classes"] += time.process_time() - start
                spent["count"] += 1

        return wrap if cls is None else wrap(cls)

    ours.dataclass = timed_dataclass  # type: ignore[assignment]
    stdout, sys.stdout = sys.stdout, io.StringIO()
    start = time.process_time()
    try:
        import probectl.cli

        try:
            probectl.cli.main(["add", "-D", "-x", binary, PAINT])
        except SystemExit as done:
            if done.code:
                raise
        command = time.process_time() - start
    finally:
        out, sys.stdout = sys.stdout.getvalue(), stdout
    print(json.dumps({"command": command * 1000, "classes": spent["classes"] * 1000, "count": spent["count"],
                      "inits": spent["inits"] * 1000, "output": hashlib.sha256(out.encode()).hexdigest()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    from conftest import build_fixture

    binary = str(build_fixture("dwarf_structs", "-O2"))
    cmd = [sys.executable, __file__, "--child"]
    for variant in VARIANTS:  # (untimed: fills the index cache and the bytecode)
        subprocess.run(cmd + [variant, binary], check=True, capture_output=True)
    results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(args.runs):
        for variant in VARIANTS:
            start = time.perf_counter()
            done = subprocess.run(cmd + [variant, binary], check=True, capture_output=True, text=True)
            got = json.loads(done.stdout)
            got["process"] = (time.perf_counter() - start) * 1000
            got["made"] = got["classes"] + got["inits"]
            results[variant].append(got)
    outputs = {r["output"] for rs in results.values() for r in rs}
    if len(outputs) != 1:
        sys.exit("the two variants printed different definitions")

    print(f"add -D of paint (dwarf_structs -O2), {args.runs} runs each, CPU ms in the process unless said")
    print(f"{'':12}{'probectl median/min':>22}{'stdlib median/min':>22}{'stdlib/probectl':>18}")
    for key in ("classes", "inits", "made", "command", "process"):
        row = []
        for variant in VARIANTS:
            values = [r[key] for r in results[variant]]
            row.append((statistics.median(values), min(values)))
        ratio = f"{row[1][0] / row[0][0]:.2f}x" if row[0][0] and row[1][0] else "-"
        label = "process wall" if key == "process" else key
        print(f"{label:12}{row[0][0]:>13.1f} /{row[0][1]:>6.1f}{row[1][0]:>13.1f} /{row[1][1]:>6.1f}{ratio:>18}")
    counts = {v: results[v][0]["count"] for v in VARIANTS}
    saved = statistics.median(r["command"] for r in results["stdlib"]) - statistics.median(
        r["command"] for r in results["probectl"])
    print(f"classes made: {counts['probectl']}; the command saves {saved:.1f} ms CPU with probectl.dataclass")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
