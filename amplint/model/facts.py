"""The facts the walker records about a file: loops, autocast regions, branch literals,
AMP events, method calls, call sites, references, assignments, classes and functions.
Plain classes (no dataclasses: start-up cost on the check path)."""

from __future__ import annotations

from amplint.record import Record

CERTAIN = "certain"
LIKELY = "likely"
NOT = "not"

Key = tuple  # ("L", func_id, name) | ("G", name) | ("A", class_qualname, attr) | ("X", text)


class Loop:
    def __init__(self, node, targets):
        self.node = node
        self.targets = targets


class Autocast:
    """One ``with`` item that enters a torch autocast region (enabled: yes/maybe/no)."""

    def __init__(self, node, with_node, enabled, call, dtype=None):
        self.node = node
        self.with_node = with_node
        self.enabled = enabled
        self.call = call
        self.dtype = dtype  # "cuda:float16", "cpu:bfloat16"... when a project wrapper says so
        self.ctx = None  # the Ctx the region is entered in
        self.func = None


class Lit(Record):
    """A branch literal: this code runs only in arm ``arm`` of branch point ``group``.
    ``key``/``pol`` normalise the test (``if x``/``if x is not None`` -> ("x", True)) so
    two separate ``if use_amp: ... else: ...`` are recognised as exclusive."""

    group: int
    arm: int
    key: str | None
    pol: bool


class Ctx(Record):
    loops: tuple = ()
    lits: frozenset = frozenset()
    autocasts: tuple = ()
    guarded: bool = False  # inside a version guard (hasattr(torch.amp...), except ImportError)
    in_finally: bool = False


class Event:
    def __init__(self, kind, node, stmt, seq, func, ctx, scaler=None, optimizer=None, scaled=False, receiver=None, extra=None):
        self.kind = kind
        self.node = node
        self.stmt = stmt
        self.seq = seq
        self.func = func
        self.ctx = ctx
        self.scaler = scaler
        self.optimizer = optimizer
        self.scaled = scaled
        self.receiver = receiver
        self.extra = dict() if extra is None else extra

    @property
    def loops(self) -> tuple:
        return self.ctx.loops

    def co_occurs(self, other: "Event") -> bool:
        return not exclusive(self.ctx.lits, other.ctx.lits)

    def __repr__(self) -> str:
        return f"Event({self.kind!r}, line={getattr(self.node, 'lineno', None)}, scaler={self.scaler!r}, optimizer={self.optimizer!r}, scaled={self.scaled})"


def exclusive(a: frozenset[Lit], b: frozenset[Lit]) -> bool:
    for x in a:
        for y in b:
            if x.group == y.group and x.arm != y.arm:
                return True
            if x.key is not None and x.key == y.key and x.pol != y.pol:
                return True
    return False


class MethodCall:
    """``<receiver>.<method>(...)`` or an attribute read ``<receiver>.<attr>``."""

    def __init__(self, receiver, receiver_node, attr, node, attr_node, called, stmt, seq, func, ctx):
        self.receiver = receiver
        self.receiver_node = receiver_node
        self.attr = attr
        self.node = node
        self.attr_node = attr_node
        self.called = called
        self.stmt = stmt
        self.seq = seq
        self.func = func
        self.ctx = ctx


class CallSite:
    """A call; ``arg_keys`` lists (position or keyword, key) for arguments that are names."""

    def __init__(self, node, callee, qualname, stmt, seq, func, ctx, arg_keys):
        self.node = node
        self.callee = callee
        self.qualname = qualname
        self.stmt = stmt
        self.seq = seq
        self.func = func
        self.ctx = ctx
        self.arg_keys = arg_keys


class Ref:
    """A reference to a torch AMP object (for the API rules): ``torch.cuda.amp.autocast``; role is call/decorator/load."""

    def __init__(self, node, qualname, stmt, func, ctx, role):
        self.node = node
        self.qualname = qualname
        self.stmt = stmt
        self.func = func
        self.ctx = ctx
        self.role = role


class ImportInfo:
    def __init__(self, node, func, ctx):
        self.node = node
        self.func = func
        self.ctx = ctx


class Assign:
    """kind: ctor | none | key | scaled | veto | unknown | autocast; ref: the key for key/scaled."""

    def __init__(self, key, value, kind, ref, node, stmt, seq, func, ctx):
        self.key = key
        self.value = value
        self.kind = kind
        self.ref = ref
        self.node = node
        self.stmt = stmt
        self.seq = seq
        self.func = func
        self.ctx = ctx


class ClassInfo:
    def __init__(self, node, qualname, methods=None, has_unknown_bases=False):
        self.node = node
        self.qualname = qualname
        self.methods = dict() if methods is None else methods
        self.has_unknown_bases = has_unknown_bases


class Func:
    """A function, a class body or the module body (node: FunctionDef | AsyncFunctionDef | ClassDef | Module)."""

    def __init__(self, node, name, qualname, cls, parent, scope, params=None, param_nodes=None, self_name=None, locals=None, nested=None, events=None, calls=None, methods=None, bare_uses=None, walked=False):
        self.node = node
        self.name = name
        self.qualname = qualname
        self.cls = cls
        self.parent = parent
        self.scope = scope
        self.params = list() if params is None else params
        self.param_nodes = dict() if param_nodes is None else param_nodes
        self.self_name = self_name
        self.locals = set() if locals is None else locals
        self.nested = dict() if nested is None else nested
        self.events = list() if events is None else events
        self.calls = list() if calls is None else calls
        self.methods = list() if methods is None else methods
        self.bare_uses = list() if bare_uses is None else bare_uses
        self.walked = walked

    @property
    def fid(self) -> int:
        return id(self.node)

    def scopes(self) -> list:
        out = []
        f = self
        while f is not None:
            out.append(f.scope)
            f = f.parent
        return out
