"""probectl.dataclass against the standard library's dataclasses, the oracle: the same class
definitions made by both must behave alike (construction, defaults, repr, equality, hashing,
frozen assignment, __post_init__, the standard helpers), and probectl's modules use probectl's."""
from __future__ import annotations

import ast
import inspect
import dataclasses
import pickle
from typing import ClassVar, Optional

import pytest

import probectl.dataclass as light
from tests.helpers import ROOT


def make(module):
    @module.dataclass(frozen=True)
    class Point:
        """A frozen class with every kind of default."""

        x: int
        name: Optional[str] = None
        items: list = module.field(default_factory=list)
        hidden: int = module.field(default=3, repr=False)
        limit: ClassVar[int] = 9

    @module.dataclass
    class Mutable:
        a: int
        b: tuple = ()

        def __post_init__(self):
            self.double = self.a * 2

    @module.dataclass(eq=False)
    class ByIdentity:
        a: int

    @module.dataclass(frozen=True)
    class OwnMethods:
        a: int

        def __repr__(self):
            return "mine"

        def __eq__(self, other):
            return True

    return Point, Mutable, ByIdentity, OwnMethods


def behaviour(module) -> list:
    Point, Mutable, ByIdentity, OwnMethods = make(module)
    p = Point(1)
    seen = [repr(p), repr(Point(2, "n", [1], 4)), p == Point(1, None, [], 3), p == Point(2), p != Point(1),
            p.items is not Point(1).items, Point.hidden, Point.limit, hasattr(Point, "items"), Point.__match_args__,
            Mutable(1) == Mutable(1), Mutable(1) == Mutable(1, (2,)), Mutable(2).double, repr(Mutable(2, (1,))),
            Mutable.__hash__ is None, ByIdentity(1) == ByIdentity(1), hash(ByIdentity(1)) is not None,
            hash(Point(1, items=())) == hash(Point(1, items=())), repr(OwnMethods(1)), OwnMethods(1) == OwnMethods(2),
            hash(OwnMethods(5)) == hash(OwnMethods(5)), Point(1) == (1, None, [], 3),
            ByIdentity(float("nan")) == ByIdentity(float("nan"))]
    nan = float("nan")
    seen += [Point(nan) == Point(nan), Mutable(nan) == Mutable(nan), Point(nan, "a") == Point(nan, "a")]
    for attempt in (lambda: hash(p), lambda: setattr(p, "x", 2), lambda: delattr(p, "x"),
                    lambda: Mutable(), lambda: Point(1, bogus=2)):
        try:
            attempt()
            seen.append("no error")
        except (AttributeError, TypeError) as error:
            seen.append((type(error).__mro__[1] if type(error).__name__ == "FrozenInstanceError" else type(error),
                         str(error)))
    m = Mutable(1)
    m.a = 5
    seen += [m.a, repr(dataclasses.replace(p, x=7)), repr(module.replace(p, name="r")), dataclasses.is_dataclass(p),
             dataclasses.asdict(Point(1, items=[2])), [f.name for f in dataclasses.fields(Point)],
             [f.name for f in module.fields(p)]]
    return seen


def test_same_behaviour_as_the_standard_library():
    assert behaviour(light) == behaviour(dataclasses)


def test_instances_pickle_and_copy():
    import copy

    Point, Mutable, _, _ = make(light)
    globals().update(Point=Point)  # pickle finds a class by its module and name
    Point.__qualname__ = "Point"
    p = Point(1, "a", [2])
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(p) == p and copy.copy(p) == p


def test_probectl_modules_use_probectl_dataclass():
    """One way to make a data class: the standard one costs ~0.5 ms a class at every start-up. The lark
    parser's generated tables (probe_tables.py) define no class."""
    wrong = []
    for path in sorted((ROOT / "probectl").rglob("*.py")):
        if path.name == "dataclass.py" and path.parent.name == "probectl":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "dataclasses" or \
                    isinstance(node, ast.Import) and any(a.name == "dataclasses" for a in node.names):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not wrong, "import dataclass/field/replace from probectl.dataclass"


@pytest.mark.parametrize("bad", ["x: int = 1\n    y: int", ])
def test_a_field_without_default_after_one_with_is_refused(bad):
    for module in (light, dataclasses):
        with pytest.raises((TypeError, SyntaxError)):
            exec(f"@module.dataclass\nclass C:\n    {bad}\n", {"module": module})


def test_init_is_compiled_at_the_first_instance():
    """A class is made without compiling anything (a third of the classes an `add -D` defines never get
    an instance); its first instance compiles the ``__init__`` of the fields' signature, which then
    replaces the first one in the class, and a wrong first call fails as the standard library's does."""
    from unittest import mock

    for module in (light, dataclasses):
        _, Mutable, _, _ = make(module)
        with pytest.raises(TypeError) as first:
            Mutable(1, (), 3)
        assert "__init__() takes from 2 to 3 positional arguments but 4 were given" in str(first.value)
    Point, Mutable, _, _ = make(light)
    with mock.patch("builtins.exec", side_effect=AssertionError("compiled")) as compiling:
        Point, Mutable, _, _ = make(light)
        assert compiling.call_count == 0
    first_init = Point.__init__
    assert Point(1).x == 1 and Point.__init__ is not first_init
    assert list(inspect.signature(Point).parameters) == ["x", "name", "items", "hidden"]
    kept = object.__new__(Point)
    first_init(kept, 2, "kept")  # (a caller that kept the first __init__ gets the compiled one's work)
    assert kept == Point(2, "kept")
    # a wrapper put in the class before the first instance (as a test's patch may) calls through
    original = Mutable.__init__
    calls = []

    def wrapped(self, *args, **kwargs):
        calls.append(args)
        original(self, *args, **kwargs)

    Mutable.__init__ = wrapped
    assert Mutable(3).double == 6 and Mutable(4, (1,)).b == (1,) and calls == [(3,), (4, (1,))]


def test_classes_of_one_shape_share_one_compiled_init():
    """The ``__init__`` of a shape (fields, which have factories, frozen, __post_init__) is compiled
    once; each class of that shape gets it with its own names, defaults and factories."""
    from unittest import mock

    @light.dataclass(frozen=True)
    class First:
        a: int
        b: str = "b"
        c: list = light.field(default_factory=list)

    @light.dataclass(frozen=True)
    class Second:  # (names that are another position's placeholders in the shared code)
        _1: int
        _0: str = "zero"
        _2: dict = light.field(default_factory=lambda: {"new": 1})

    with mock.patch("builtins.exec", wraps=exec) as compiling:
        first, second = First(1), Second(2, _2={"given": 2})
    assert compiling.call_count <= 1  # (none if another test made this shape first)
    assert Second(3) == Second(3, "zero", {"new": 1}) and Second(3)._2 is not Second(3)._2
    assert First.__init__.__code__.co_code == Second.__init__.__code__.co_code
    assert (first.a, first.b, first.c) == (1, "b", []) and first.c is not First(1).c
    assert (second._1, second._0, second._2) == (2, "zero", {"given": 2})
    assert repr(Second(1, _0="x")) == "test_classes_of_one_shape_share_one_compiled_init.<locals>.Second(_1=1, _0='x', _2={'new': 1})"
    assert list(inspect.signature(Second).parameters) == ["_1", "_0", "_2"]
    with pytest.raises(TypeError, match=r"Second.__init__\(\) missing 1 required positional argument: '_1'"):
        Second()
    with pytest.raises(light.FrozenInstanceError):
        second._1 = 5
