"""probectl's ``@dataclass``: the standard library's meaning, for the part of it probectl uses, made
without compiling anything until a class is used.

Every command defines some fifty data classes before it does any work (``add -D`` of a small
definition: ~55), and ``dataclasses.dataclass`` of Python 3.11 compiles each generated method on
its own (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``:
~6 ``exec`` a class) and works out a signature for each class without a docstring: a measurable part
of a short command. Here a class gets its ``__init__`` when its first
instance is made (a third of the classes an ``add -D`` defines never get one), compiled once for
all the classes of its shape (``_INIT_CODE``); ``__eq__`` and ``__hash__`` are compiled when first
used, and ``__repr__`` and the frozen ``__setattr__`` and ``__delattr__`` are shared by all classes;
instances are as fast to make, compare and hash as the standard library's. ``bench/bench_dataclass.py``
measures the gain: the same ``add -D`` with these classes and with the standard library's.

What is kept, as ``dataclasses`` does it: fields from the class's own annotations in order (no
``ClassVar``, no ``InitVar``, no inheritance of fields: no probectl data class derives from
another); defaults and ``field(default=, default_factory=, repr=)``; ``__post_init__``;
``frozen=True`` (assignment raises ``FrozenInstanceError``, a hash over the fields); ``eq=False``
(identity, as an ``object``); a method the class defines itself is not replaced. This module's
``replace`` and ``fields`` work on these classes; so do the standard library's ``replace``,
``fields``, ``asdict`` and ``is_dataclass``, through ``__dataclass_fields__`` made on first use.
A type checker reads these classes as the standard library's (``typing.dataclass_transform``).
"""
from __future__ import annotations

import sys
from types import CodeType, FunctionType
from typing import Any, Callable, Optional, TypeVar, overload

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # (the marker is for type checkers only: on an older Python the classes are made the same)
    def dataclass_transform(**kwargs: Any) -> Callable[[Callable], Callable]:
        return lambda decorator: decorator

__all__ = ["FrozenInstanceError", "dataclass", "field", "fields", "replace"]


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen data class."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """One field: its name, default or default factory, and whether ``repr`` shows it."""

    __slots__ = ("name", "default", "default_factory", "repr")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr

    def __repr__(self) -> str:
        return (f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r}, "
                f"repr={self.repr!r})")


def field(*, default: Any = MISSING, default_factory: Optional[Callable[[], Any]] = None, repr: bool = True) -> Any:
    """A field with a default, a default factory (called for each instance) or hidden from ``repr``."""
    return Field(default, MISSING if default_factory is None else default_factory, repr)


_FIELDS = "__probectl_fields__"


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a data class or of an instance, in order."""
    try:
        return getattr(obj, _FIELDS)
    except AttributeError:
        raise TypeError("fields() takes a probectl data class or an instance of one") from None


def replace(obj: Any, **changes: Any) -> Any:
    """A new instance of ``obj``'s class with the fields of ``obj`` except ``changes`` (via ``__init__``)."""
    for f in fields(obj):
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


class _StandardFields:
    """``__dataclass_fields__`` as the ``dataclasses`` module reads it (its Field objects, by name), made
    when first asked for: only code that uses the standard library's helpers on these classes pays."""

    def __get__(self, obj: Any, cls: type) -> dict:
        import dataclasses

        made = {}
        for f in getattr(cls, _FIELDS):
            standard: dataclasses.Field[Any] = dataclasses.field(
                default=dataclasses.MISSING if f.default is MISSING else f.default,
                default_factory=dataclasses.MISSING if f.default_factory is MISSING else f.default_factory,
                repr=f.repr)
            standard.name = f.name
            standard._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # what a plain field is
            made[f.name] = standard
        cls.__dataclass_fields__ = made  # type: ignore[attr-defined]
        return made


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in getattr(self, _FIELDS) if f.repr)
    return f"{self.__class__.__qualname__}({shown})"


# __eq__ and __hash__ are compiled for a class when one of its instances is first compared or hashed
# (most classes never are in a run; those that are may be in hot loops, and then read their fields
# inline, as the standard library's do).
def _compiled(cls: type, name: str) -> Callable:
    values = "(" + "".join(f"self.{f.name}, " for f in getattr(cls, _FIELDS)) + ")"
    if name == "__eq__":
        source = (f"def __eq__(self, other):\n    if other.__class__ is self.__class__:\n"
                  f"        return {values} == {values.replace('self.', 'other.')}\n    return NotImplemented")
    else:
        source = f"def __hash__(self):\n    return hash({values})"
    namespace: dict[str, Any] = {}
    exec(source, {}, namespace)
    method = namespace[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, method)
    return method


def _first_eq(self: Any, other: Any) -> Any:
    return _compiled(self.__class__, "__eq__")(self, other)


def _first_hash(self: Any) -> int:
    return _compiled(self.__class__, "__hash__")(self)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar"))


def _first_init(cls: type, field_list: tuple[Field, ...], frozen: bool, post_init: bool) -> Callable:
    """The ``__init__`` a class has until its first instance: it compiles the class's own (see
    :func:`_compiled_init`), puts it in the class in its place and calls it (and only it from then
    on, should a caller have kept this one)."""
    compiled: Optional[Callable] = None

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal compiled
        if compiled is None:
            compiled = _compiled_init(cls, field_list, frozen, post_init)
            if cls.__dict__.get("__init__") is __init__:
                cls.__init__ = compiled  # type: ignore[misc]
        compiled(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


# The code of each shape of __init__ (how many fields, which have a default factory, frozen or not,
# with __post_init__ or not), compiled once with the fields named _0, _1...: a class of that shape
# gets a copy of it with its own fields' names (``CodeType.replace``), and defaults are the
# function's. Compiling is what costs (an exec each); the classes an `add -D` makes instances of
# have fewer shapes than classes (35 and 14 when this was written).
_INIT_CODE: dict[tuple, CodeType] = {}


def _init_code(shape: tuple) -> CodeType:
    factories, frozen, post_init = shape
    params, body = [], []
    for i, has_factory in enumerate(factories):
        params.append(f"_{i}")
        value = f"_factories[{i}]() if _{i} is MISSING else _{i}" if has_factory else f"_{i}"
        body.append(f"object_setattr(self, '_{i}', {value})" if frozen else f"self._{i} = {value}")
    if post_init:
        body.append("self.__post_init__()")
    namespace: dict[str, Any] = {}
    exec(f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass"), {}, namespace)
    return namespace["__init__"].__code__


def _compiled_init(cls: type, field_list: tuple[Field, ...], frozen: bool, post_init: bool) -> Callable:
    """``cls``'s ``__init__``: its signature is the fields' (a field with a default factory defaults
    to MISSING, and gets the factory's value)."""
    shape = (tuple(f.default_factory is not MISSING for f in field_list), frozen, post_init)
    template = _INIT_CODE.get(shape)
    if template is None:
        template = _INIT_CODE[shape] = _init_code(shape)
    names = {f"_{i}": f.name for i, f in enumerate(field_list)}
    qualname = f"{cls.__qualname__}.__init__"
    renamed: dict[str, Any] = {
        "co_varnames": tuple(names.get(n, n) for n in template.co_varnames),
        "co_names": tuple(names.get(n, n) for n in template.co_names),
        "co_consts": tuple(names.get(c, c) if type(c) is str else c for c in template.co_consts)}
    if hasattr(template, "co_qualname"):  # (Python 3.11)
        renamed["co_qualname"] = qualname
    code = template.replace(**renamed)
    defaults = tuple(f.default if f.default_factory is MISSING else MISSING
                     for f in field_list if f.default is not MISSING or f.default_factory is not MISSING)
    # The generated __init__ refers to factories and helpers by these names only.
    env = {"MISSING": MISSING, "object_setattr": object.__setattr__,
           "_factories": tuple(f.default_factory for f in field_list)}
    init = FunctionType(code, env, "__init__", defaults or None)
    init.__qualname__ = qualname
    return init


_Class = TypeVar("_Class", bound=type)


@overload
def dataclass(cls: _Class, /) -> _Class: ...
@overload
def dataclass(*, frozen: bool = False, eq: bool = True) -> Callable[[_Class], _Class]: ...


# A type checker reads the classes this makes as standard data classes: fields from the annotations,
# ``__init__`` from the fields, ``field()`` as their default or default factory.
@dataclass_transform(field_specifiers=(field, Field))
def dataclass(cls: Optional[type] = None, *, frozen: bool = False, eq: bool = True) -> Any:
    """``@dataclass``, ``@dataclass(frozen=True)``, ``@dataclass(eq=False)``: as ``dataclasses.dataclass``."""

    def wrap(cls: type) -> type:
        return _make(cls, frozen, eq)

    return wrap if cls is None else wrap(cls)


def _make(cls: type, frozen: bool, eq: bool) -> type:
    own = cls.__dict__
    field_list: list[Field] = []
    for name, annotation in own.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = own.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if isinstance(value, Field):
            # As dataclasses does: the class attribute is the default, or absent.
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        if f.default is MISSING and f.default_factory is MISSING and field_list and (
                field_list[-1].default is not MISSING or field_list[-1].default_factory is not MISSING):
            # (what compiling the __init__ would say, said when the class is made)
            raise TypeError(f"non-default argument {name!r} follows default argument")
        field_list.append(f)

    made = tuple(field_list)
    init = _first_init(cls, made, frozen, "__post_init__" in own)
    methods: dict[str, Any] = {"__init__": init, "__repr__": _repr}
    if eq:
        methods["__eq__"] = _first_eq
        if frozen:
            methods["__hash__"] = _first_hash
    if frozen:
        methods["__setattr__"] = _frozen_setattr
        methods["__delattr__"] = _frozen_delattr
    # A class that defines __eq__ gets __hash__ = None from Python: that one is not the class's own.
    defined = {name for name in own if not (name == "__hash__" and own[name] is None and "__eq__" in own)}
    for name, method in methods.items():
        if name not in defined:
            setattr(cls, name, method)
    if eq and not frozen and "__hash__" not in defined:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable
    setattr(cls, _FIELDS, made)
    cls.__dataclass_fields__ = _StandardFields()  # type: ignore[attr-defined]
    setattr(cls, "__match_args__", tuple(f.name for f in made))
    return cls
