"""``Record``: ``typing.NamedTuple``'s class syntax without importing ``typing`` (about 3 ms of
a one-file run's start-up, where the interpreter itself takes 10): the annotated names become
the fields of a named tuple (a value after a name is its default), and the class body's
docstring, methods and properties stay on the class. Instances are plain tuples, as with
NamedTuple: equal by value, hashable, picklable by class name.

The named tuple is made here, not by ``collections.namedtuple``, which compiles each class's
``__new__`` from source with ``eval`` (~0.4M instructions a class, a dozen classes on every
run's start-up). Here ``__new__`` is a precompiled function of the same arity with its
argument names replaced, so it takes the same positional and keyword arguments and defaults
and is as fast; the rest (``_fields``, ``_field_defaults``, ``_make``, ``_replace``,
``_asdict``, ``__repr__``, ``__getnewargs__``, ``__match_args__``, a read-only property per
field) behaves as namedtuple's (tests/test_units.py compares the two)."""

from __future__ import annotations

try:
    from _collections import _tuplegetter
except ImportError:  # pragma: no cover - another Python
    from operator import itemgetter as _itemgetter

    def _tuplegetter(index, doc):
        return property(_itemgetter(index), doc=doc)

_tuple_new = tuple.__new__

# __new__ for 1..12 fields; the argument names are replaced by the fields'
def _n1(_cls, a): return _tuple_new(_cls, (a,))  # noqa: E704
def _n2(_cls, a, b): return _tuple_new(_cls, (a, b))  # noqa: E704
def _n3(_cls, a, b, c): return _tuple_new(_cls, (a, b, c))  # noqa: E704
def _n4(_cls, a, b, c, d): return _tuple_new(_cls, (a, b, c, d))  # noqa: E704
def _n5(_cls, a, b, c, d, e): return _tuple_new(_cls, (a, b, c, d, e))  # noqa: E704
def _n6(_cls, a, b, c, d, e, f): return _tuple_new(_cls, (a, b, c, d, e, f))  # noqa: E704
def _n7(_cls, a, b, c, d, e, f, g): return _tuple_new(_cls, (a, b, c, d, e, f, g))  # noqa: E704
def _n8(_cls, a, b, c, d, e, f, g, h): return _tuple_new(_cls, (a, b, c, d, e, f, g, h))  # noqa: E704
def _n9(_cls, a, b, c, d, e, f, g, h, i): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i))  # noqa: E704
def _n10(_cls, a, b, c, d, e, f, g, h, i, j): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j))  # noqa: E704
def _n11(_cls, a, b, c, d, e, f, g, h, i, j, k): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k))  # noqa: E704
def _n12(_cls, a, b, c, d, e, f, g, h, i, j, k, m): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, m))  # noqa: E704


_NEW = (None, _n1, _n2, _n3, _n4, _n5, _n6, _n7, _n8, _n9, _n10, _n11, _n12)


def _make(cls, iterable):
    result = _tuple_new(cls, iterable)
    if len(result) != len(cls._fields):
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
    return result


def _replace(self, /, **kwds):
    result = self._make(map(kwds.pop, self._fields, self))
    if kwds:
        raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
    return result


def _repr(self):
    return self.__class__.__name__ + "(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self)) + ")"


def _asdict(self):
    return dict(zip(self._fields, self))


def _getnewargs(self):
    return tuple(self)


def _named_tuple(name: str, fields: list[str], defaults: list, module: str | None) -> type:
    """``collections.namedtuple(name, fields, defaults=defaults, module=module)``, without eval."""
    if not 0 < len(fields) < len(_NEW) or len(set(fields)) != len(fields):
        raise TypeError(f"{name}: a record has 1 to {len(_NEW) - 1} distinct fields")
    for f in fields:
        if not f.isidentifier() or f.startswith("_"):
            raise ValueError(f"{name}: bad field name {f!r}")
    template = _NEW[len(fields)]
    code = template.__code__.replace(co_varnames=("_cls", *fields), co_name="__new__")
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=f"{name}.__new__")
    new = type(template)(code, template.__globals__, "__new__", tuple(defaults) or None)
    arg_list = ", ".join(fields)
    new.__doc__ = f"Create new instance of {name}({arg_list})"
    ns = {
        "__doc__": f"{name}({arg_list})",
        "__slots__": (),
        "_fields": tuple(fields),
        "_field_defaults": dict(zip(fields[len(fields) - len(defaults):], defaults)),
        "__new__": new,
        "_make": classmethod(_make),
        "_replace": _replace,
        "__repr__": _repr,
        "_asdict": _asdict,
        "__getnewargs__": _getnewargs,
        "__match_args__": tuple(fields),
    }
    for index, f in enumerate(fields):
        ns[f] = _tuplegetter(index, f"Alias for field number {index}")
    cls = type(name, (tuple,), ns)
    cls.__module__ = module if module is not None else "__main__"
    return cls


class _RecordMeta(type):
    def __new__(mcls, name, bases, ns):
        if not bases:  # Record itself
            return super().__new__(mcls, name, bases, ns)
        fields = list(ns.get("__annotations__", {}))
        defaults = [ns.pop(f) for f in fields if f in ns]
        base = _named_tuple(name, fields, defaults, ns.get("__module__"))
        ns["__slots__"] = ()
        return type(name, (base,), ns)


class Record(metaclass=_RecordMeta):
    """Base of the record classes (``class Pos(Record): row: int; col: int = 0``)."""
