"""``Record``: ``typing.NamedTuple``'s class syntax without importing ``typing`` (about 3 ms of
a one-file run's start-up, where the interpreter itself takes 10): the annotated names become
the fields of a ``collections.namedtuple`` (a value after a name is its default), and the class
body's docstring, methods and properties stay on the class. Instances are plain tuples, as
with NamedTuple: equal by value, hashable, picklable by class name."""

from __future__ import annotations

from collections import namedtuple


class _RecordMeta(type):
    def __new__(mcls, name, bases, ns):
        if not bases:  # Record itself
            return super().__new__(mcls, name, bases, ns)
        fields = list(ns.get("__annotations__", {}))
        defaults = [ns.pop(f) for f in fields if f in ns]
        base = namedtuple(name, fields, defaults=defaults, module=ns.get("__module__"))
        ns["__slots__"] = ()
        return type(name, (base,), ns)


class Record(metaclass=_RecordMeta):
    """Base of the record classes (``class Pos(Record): row: int; col: int = 0``)."""
