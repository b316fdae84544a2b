"""The AMP loop model: one pass over a file's syntax tree, queried by every rule.

``build_model(source, tree)`` walks each function (and the module body) that can hold AMP
code once, in evaluation order, and records:

* imports and aliases, so ``GS()``, ``amp.autocast`` or ``torch.GradScaler`` resolve to the
  torch object they denote (function-local imports included);
* which names hold a torch ``GradScaler`` (locals, ``self.x`` attributes set in any method,
  module globals, parameters that receive one from a call in the same file or whose
  annotation or name says so), with a certainty: ``CERTAIN`` or ``LIKELY``;
* the ordered AMP events (scale, backward, unscale_, clip, step, update, zero_grad, plain
  ``optimizer.step()``...) with their context: enclosing loops, branch literals (which
  ``if``/``else``/``except`` arm, including arms that ``return``/``continue`` early),
  autocast regions, version guards;
* call sites, so an update in a helper or another method counts.

The model is built from Python's ``ast`` (the C parser, ~12x faster than LibCST on this
workload); every fix is applied with LibCST (see ``amplint.fixer``).
"""

from __future__ import annotations

import ast
import bisect
import re
from functools import cached_property
from typing import Iterable, Iterator, NamedTuple

from amplint.source import split_lines
from amplint.names import (
    GRAD_SCALER_API,
    add_import,
    canonical,
    dotted,
    qualify,
)

# A function whose text matches none of these cannot produce an AMP event or reference.
RELEVANT = re.compile(r"[sS]caler|autocast|\bamp\b|apex|custom_fwd|custom_bwd")
# In a file that has a scaler, half-precision models and checkpoints matter too.
RELEVANT_WITH_SCALER = re.compile(
    r"[sS]caler|autocast|\bamp\b|apex|custom_fwd|custom_bwd|half\(|float16|state_dict"
)

SCALER_NAME = re.compile(r"^_?(?:grad_?|amp_?)?scaler$", re.IGNORECASE)
OPTIMIZER_NAME = re.compile(r"(?:^|_)(?:opt|optim|optimizer|optimiser)s?(?:_?\w{0,12})?$|optimizer|optimiser", re.IGNORECASE)
NOT_OPTIMIZER = re.compile(r"sched|lr_|warmup|ema|swa|scaler|engine|model|trainer|accelerator", re.IGNORECASE)
AMP_TOKENS = frozenset(
    {
        "amp", "scaler", "fp16", "half", "mixed", "precision", "autocast", "bf16", "bfloat16",
        "fp32", "float16", "float32", "apex", "deepspeed", "fsdp", "accelerator", "scaling",
        "float", "dtype", "fp8", "grad_scaler", "gradscaler", "use_amp", "enable_amp",
    }
)
GUARD_TEXT = re.compile(r"hasattr|version|TORCH_|is_torch|_torch_|getattr")

CERTAIN = "certain"
LIKELY = "likely"
NOT = "not"

Key = tuple  # ("L", func_id, name) | ("G", name) | ("A", class_qualname, attr) | ("X", text)


def amp_ish(text: str) -> bool:
    toks = {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}
    return bool(toks & AMP_TOKENS) or "scaler" in text.lower()


class Loop:
    def __init__(self, node, targets):
        self.node = node
        self.targets = targets


class Autocast:
    """One ``with`` item that enters a torch autocast region (enabled: yes/maybe/no)."""

    def __init__(self, node, with_node, enabled, call):
        self.node = node
        self.with_node = with_node
        self.enabled = enabled
        self.call = call


class Lit(NamedTuple):
    """A branch literal: this code runs only in arm ``arm`` of branch point ``group``.
    ``key``/``pol`` normalise the test (``if x``/``if x is not None`` -> ("x", True)) so
    two separate ``if use_amp: ... else: ...`` are recognised as exclusive."""

    group: int
    arm: int
    key: str | None
    pol: bool


class Ctx(NamedTuple):
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


class FileModel:
    """Everything the rules may ask about one file."""

    def __init__(self, source: str, tree: ast.Module):
        self.source = source
        self.tree = tree
        self.lines = split_lines(source)  # rows as the parser counts them (not str.splitlines)
        self.module_scope: dict[str, str] = {}
        self.funcs: list[Func] = []
        self.classes: dict[str, ClassInfo] = {}
        self.toplevel: dict[str, Func] = {}
        self.assigns: dict[Key, list[Assign]] = {}
        self.refs: list[Ref] = []
        self.imports: list[ImportInfo] = []
        self.autocast_calls: list[tuple[ast.Call, Func, Ctx, ast.stmt]] = []
        self.qual_calls: list[CallSite] = []
        self.annotated_scalers: set[Key] = set()
        self.aliases: set[str] = set()  # names assigned a torch AMP object (GS = torch.cuda.amp.GradScaler)
        self.target_torch_version = "2.4"  # set by the engine from settings
        self._status: dict[Key, str] = {}
        self._seq = 0
        self.mentions_torch_amp = any(
            t in source for t in ("GradScaler", "autocast", "torch.amp", "cuda.amp", "cpu.amp", "import amp")
        )

    # ------------------------------------------------------------------ helpers
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def text(self, node: ast.AST) -> str:
        # ast.get_source_segment re-splits the whole source on every call (quadratic on a 1 MB line)
        seg = _segment(self.lines, node)
        return seg if seg is not None else ast.unparse(node)

    def char_col(self, lineno: int, col: int) -> int:
        """ast columns are UTF-8 byte offsets; convert to characters."""
        if lineno - 1 >= len(self.lines):
            return col
        line = self.lines[lineno - 1]
        if line.isascii():
            return col
        return len(line.encode("utf-8")[:col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """(row, col, end_row, end_col), 1-based rows, 0-based character columns."""
        row, col = node.lineno, node.col_offset
        erow = getattr(node, "end_lineno", None) or row
        ecol = getattr(node, "end_col_offset", None)
        if ecol is None:
            ecol = col
        return row, self.char_col(row, col), erow, self.char_col(erow, ecol)

    def dispose(self) -> None:
        """Break the model's reference cycles (functions <-> events, classes <-> methods) so
        reference counting frees it at once; the cyclic GC would otherwise have to trace every
        file's model (a third of a serial run's time on AMP-dense trees)."""
        for f in self.funcs:
            for lst in (f.events, f.calls, f.methods, f.bare_uses):
                lst.clear()
            f.nested.clear()
            f.parent = f.cls = None
        for c in self.classes.values():
            c.methods.clear()
        self.__dict__.clear()

    def reset_derived(self) -> None:
        self._status.clear()
        for name in ("_methods_by_key", "_called_keys", "stepped_optimizers"):
            self.__dict__.pop(name, None)

    def mentions(self, func: Func, name: str) -> bool:
        node = func.node
        start = getattr(node, "lineno", 1)
        end = getattr(node, "end_lineno", None) or len(self.lines)
        return name in "".join(self.lines[start - 1 : end])

    # ------------------------------------------------------------------ scalers
    def scaler_status(self, key: Key | None) -> str:
        if key is None:
            return NOT
        if key in self._status:
            return self._status[key]
        self._status[key] = NOT  # cycle guard
        result = self._compute_status(key)
        self._status[key] = result
        return result

    def is_scaler(self, key: Key | None) -> bool:
        return self.scaler_status(key) != NOT

    def _compute_status(self, key: Key) -> str:
        if key in self.annotated_scalers:
            return CERTAIN
        evidence = NOT
        veto = False
        for a in self.assigns.get(key, ()):
            if a.kind == "ctor":
                evidence = CERTAIN
            elif a.kind == "veto":
                veto = True
            elif a.kind == "key":
                st = self.scaler_status(a.ref)
                if st == CERTAIN:
                    evidence = CERTAIN
                elif st == LIKELY and evidence == NOT:
                    evidence = LIKELY
        if veto:
            return NOT
        if evidence != NOT:
            return evidence
        # Name-based: only for names that look like scalers, in files that use torch AMP,
        # and whose use matches GradScaler's API.
        name = key[-1] if isinstance(key[-1], str) else ""
        if key[0] == "X" or not SCALER_NAME.match(name) or not self.mentions_torch_amp:
            return NOT
        if self._api_consistent(key):
            return LIKELY
        return NOT

    @cached_property
    def _methods_by_key(self) -> dict[Key, list[MethodCall]]:
        out: dict[Key, list[MethodCall]] = {}
        for f in self.funcs:
            for m in f.methods:
                if m.receiver is not None:
                    out.setdefault(m.receiver, []).append(m)
        return out

    @cached_property
    def _called_keys(self) -> set[Key]:
        out = set()
        for c in self.qual_calls:
            k = self.key_of_expr(c.callee, c.func)
            if k is not None:
                out.add(k)
        return out

    def _api_consistent(self, key: Key) -> bool:
        uses = self._methods_by_key.get(key, [])
        if key in self._called_keys:
            return False
        if any(m.attr not in GRAD_SCALER_API and not m.attr.startswith("__") for m in uses):
            return False
        return any(m.attr in ("scale", "step", "update", "unscale_") for m in uses)

    def scaler_keys(self) -> list[Key]:
        keys = set(self.assigns) | set(self._methods_by_key) | self.annotated_scalers
        return sorted((k for k in keys if self.is_scaler(k)), key=repr)

    def constructions(self, key: Key) -> list[Assign]:
        return [a for a in self.assigns.get(key, ()) if a.kind == "ctor"]

    # ------------------------------------------------------------------ keys
    def key_of_expr(self, node: ast.AST, func: Func) -> Key | None:
        if isinstance(node, ast.Name):
            return self.name_key(node.id, func)
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name):
                f: Func | None = func
                while f is not None:
                    if f.self_name and base.id == f.self_name and f.cls is not None:
                        return ("A", f.cls.qualname, node.attr)
                    if base.id in f.locals or base.id in f.params:
                        break
                    f = f.parent
            parts = dotted(node)
            if parts is not None:
                return ("X", ".".join(parts))
        return None

    def name_key(self, name: str, func: Func) -> Key:
        f: Func | None = func
        while f is not None:
            if f.node is self.tree:
                break
            if name in f.locals or name in f.params:
                return ("L", f.fid, name)
            f = f.parent
        return ("G", name)

    # ------------------------------------------------------------------ queries
    def events(self, kind: str | None = None) -> Iterator[Event]:
        for f in self.funcs:
            for e in f.events:
                if kind is None or e.kind == kind:
                    yield e

    def func_of_key(self, key: Key) -> Func | None:
        if key[0] == "L":
            for f in self.funcs:
                if f.fid == key[1]:
                    return f
        return None

    def resolve_callee(self, call: CallSite) -> Func | None:
        return self.resolve_callee_expr(call.callee, call.func)

    def resolve_callee_expr(self, callee: ast.expr, f: Func) -> Func | None:
        if isinstance(callee, ast.Name):
            g: Func | None = f
            while g is not None:
                if callee.id in g.nested:
                    return g.nested[callee.id]
                g = g.parent
            return self.toplevel.get(callee.id)
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
            g = f
            while g is not None:
                if g.self_name == callee.value.id and g.cls is not None:
                    return g.cls.methods.get(callee.attr)
                g = g.parent
        return None

    def calls_self_unknown(self, call: CallSite) -> bool:
        """``self.something(...)`` that is not a method defined in this class."""
        callee = call.callee
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
            g: Func | None = call.func
            while g is not None:
                if g.self_name == callee.value.id and g.cls is not None:
                    return callee.attr not in g.cls.methods
                g = g.parent
        if (
            isinstance(callee, ast.Attribute)
            and isinstance(callee.value, ast.Call)
            and isinstance(callee.value.func, ast.Name)
            and callee.value.func.id == "super"
        ):
            return True
        return False

    def may_update(self, func: Func, key: Key, within: Loop | None = None, _seen=None) -> bool:
        """Can running ``func`` (only the part inside loop ``within`` when given) call
        ``update()`` on the scaler ``key``? Unknown callees that receive the scaler (or
        ``self`` for attribute scalers) count as yes: precision first."""
        if _seen is None:
            _seen = set()
        if (func.fid, key, id(within)) in _seen:
            return False
        _seen.add((func.fid, key, id(within)))

        def inside(ctx: Ctx) -> bool:
            return within is None or within in ctx.loops

        for e in func.events:
            if e.kind == "update" and e.scaler == key and inside(e.ctx):
                return True
        for k, _node, ctx, _seq in func.bare_uses:
            if inside(ctx) and (k == key or (key[0] == "A" and k[0] == "L" and k[2] == func.self_name)):
                return True
        for c in func.calls:
            if not inside(c.ctx):
                continue
            callee = self.resolve_callee(c)
            if callee is not None and not callee.walked:
                # not analysed (no AMP token in it): unknown, unless it cannot name the scaler
                if any(k == key for _p, k in c.arg_keys) or self.mentions(callee, str(key[-1])):
                    return True
                continue
            if callee is not None:
                if key[0] in ("A", "G") and self.may_update(callee, key, None, _seen):
                    return True
                for pos, k in c.arg_keys:
                    if k == key:
                        pname = self._param_for(callee, pos)
                        if pname is None or self.may_update(callee, ("L", callee.fid, pname), None, _seen):
                            return True
            elif key[0] == "A" and self.calls_self_unknown(c):
                cls = self.classes.get(key[1])
                if cls is None or cls.has_unknown_bases:
                    return True
        # nested functions defined here may be called in ways we do not see
        for nested in func.nested.values():
            if nested.walked and self.may_update(nested, key, None, _seen):
                if within is None or any(
                    isinstance(n, ast.Name) and n.id == nested.name
                    for c in func.calls
                    if within in c.ctx.loops
                    for n in [c.callee]
                ):
                    return True
        return False

    @staticmethod
    def _param_for(func: Func, pos: int | str) -> str | None:
        if isinstance(pos, str):
            return pos if pos in func.params else None
        params = func.params
        if func.self_name and params and params[0] == func.self_name:
            params = params[1:]
        return params[pos] if pos < len(params) else None

    def escapes(self, key: Key, func: Func) -> bool:
        """Is the scaler ``key`` handed to code we cannot see (passed, returned, stored)?"""
        for f in self.funcs:
            for k, _n, _c, _s in f.bare_uses:
                if k == key:
                    return True
        return False

    def updated_anywhere(self, key: Key) -> bool:
        return any(e.kind == "update" and e.scaler == key for e in self.events())

    def iteration_loop(self, e: Event) -> Loop | None:
        """The innermost loop around ``e`` that is a training iteration, not a loop over
        optimizers (``for opt in optimizers: scaler.step(opt)``)."""
        names = set()
        if e.node is not None and isinstance(e.node, ast.Call):
            for a in e.node.args:
                names |= {n.id for n in ast.walk(a) if isinstance(n, ast.Name)}
        for loop in reversed(e.loops):
            if names and loop.targets & names:
                continue
            return loop
        return None

    def is_optimizer(self, receiver: ast.expr, func: Func) -> bool:
        text = ".".join(dotted(receiver) or [])
        if not text:
            return False
        last = text.rsplit(".", 1)[-1]
        if text in self.stepped_optimizers:
            return True
        if NOT_OPTIMIZER.search(last):
            return False
        key = self.key_of_expr(receiver, func)
        if key is not None:
            for a in self.assigns.get(key, ()):
                if a.value is not None and isinstance(a.value, ast.Call):
                    q = qualify(a.value.func, a.func.scopes()) or ""
                    if "lr_scheduler" in q or "swa_utils" in q:
                        return False
                    if q.startswith("torch.optim.") and q.count(".") == 2:
                        return True
        return bool(OPTIMIZER_NAME.search(last))

    @cached_property
    def stepped_optimizers(self) -> set[str]:
        return {e.optimizer for e in self.events() if e.kind in ("step", "unscale") and e.optimizer}


# ---------------------------------------------------------------------- building


def _target_names(t: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}


def _locals_of(fn: ast.AST) -> set[str]:
    """Names bound in a function body (not in nested functions/classes). Statements only:
    expressions bind names just through the walrus operator, which is rare enough here."""
    out: set[str] = set()
    globs: set[str] = set()

    def targets(t):
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)

    def block(stmts):
        for node in stmts:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target)
                block(node.body)
                block(node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                block(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    out.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                globs.update(node.names)
            elif isinstance(node, (ast.If, ast.While)):
                block(node.body)
                block(node.orelse)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                block(node.body)
                for h in node.handlers:
                    if h.name:
                        out.add(h.name)
                    block(h.body)
                block(node.orelse)
                block(node.finalbody)
            elif type(node).__name__ == "Match":
                for case in node.cases:
                    block(case.body)

    block(getattr(fn, "body", []))
    return out - globs


def _norm_test(test: ast.expr) -> tuple[str | None, bool]:
    pol = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
        pol = not pol
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
    ):
        op, c = test.ops[0], test.comparators[0].value
        if c is None and isinstance(op, (ast.Is, ast.IsNot)):
            return ast.unparse(test.left), pol if isinstance(op, ast.IsNot) else not pol
        if isinstance(c, bool) and isinstance(op, (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
            positive = isinstance(op, (ast.Eq, ast.Is)) == c
            return ast.unparse(test.left), pol if positive else not pol
    try:
        return ast.unparse(test), pol
    except Exception:  # pragma: no cover - unparse of odd nodes
        return None, pol


def _terminates(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, (ast.Return, ast.Raise)):
        return "func"
    if isinstance(stmt, (ast.Continue, ast.Break)):
        return "loop"
    return None


_GUARD_EXC = {"ImportError", "ModuleNotFoundError", "AttributeError"}


class _Walker:
    def __init__(self, model: FileModel, func: Func):
        self.m = model
        self.f = func

    # statements -------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], ctx: Ctx) -> str | None:
        for stmt in stmts:
            result = self.stmt(stmt, ctx)
            if isinstance(result, Ctx):
                ctx = result
                continue
            if result is not None:
                return result
        return None

    def stmt(self, s: ast.stmt, ctx: Ctx):
        m = self.m
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in getattr(s, "decorator_list", []):
                self.expr(d, ctx, s, role="decorator")
            return None
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            if self.f.node is not m.tree:
                add_import(self.f.scope, s)
            m.imports.append(ImportInfo(s, self.f, ctx))
            return None
        if isinstance(s, ast.If):
            self.expr(s.test, ctx, s)
            key, pol = _norm_test(s.test)
            gid = id(s)
            guard = ctx.guarded or bool(GUARD_TEXT.search(ast.unparse(s.test)) and "amp" in ast.unparse(s.test))
            c_then = ctx._replace(lits=ctx.lits | {Lit(gid, 0, key, pol)}, guarded=guard)
            c_else = ctx._replace(lits=ctx.lits | {Lit(gid, 1, key, not pol)}, guarded=guard)
            t1 = self.block(s.body, c_then)
            t2 = self.block(s.orelse, c_else) if s.orelse else None
            if t1 and t2:
                return t1 if t1 == t2 else "func"
            if t1:
                return ctx._replace(lits=ctx.lits | {Lit(gid, 1, key, not pol)})
            if t2:
                return ctx._replace(lits=ctx.lits | {Lit(gid, 0, key, pol)})
            return None
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter, ctx, s)
            loop = Loop(s, frozenset(_target_names(s.target)))
            self.assign_target(s.target, None, s, ctx)
            self.block(s.body, ctx._replace(loops=ctx.loops + (loop,)))
            if s.orelse:
                self.block(s.orelse, ctx)
            return None
        if isinstance(s, ast.While):
            self.expr(s.test, ctx, s)
            loop = Loop(s, frozenset())
            self.block(s.body, ctx._replace(loops=ctx.loops + (loop,)))
            if s.orelse:
                self.block(s.orelse, ctx)
            return None
        if isinstance(s, (ast.With, ast.AsyncWith)):
            regions = []
            for item in s.items:
                self.expr(item.context_expr, ctx, s)
                ac = self.autocast_item(item.context_expr, s)
                if ac is not None:
                    regions.append(ac)
                if item.optional_vars is not None:
                    self.assign_target(item.optional_vars, None, s, ctx)
            inner = ctx._replace(autocasts=ctx.autocasts + tuple(regions)) if regions else ctx
            return self.block(s.body, inner)
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            gid = id(s)
            handled = {
                n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                for h in s.handlers
                if h.type is not None
                for n in ([*h.type.elts] if isinstance(h.type, ast.Tuple) else [h.type])
            }
            guard = ctx.guarded or bool(handled & _GUARD_EXC)
            body_ctx = ctx._replace(guarded=guard)
            t_body = self.block(s.body, body_ctx)
            for i, h in enumerate(s.handlers):
                hctx = body_ctx._replace(lits=ctx.lits | {Lit(gid, i + 1, None, True)})
                if h.type is not None:
                    self.expr(h.type, hctx, h)
                self.block(h.body, hctx)
            if s.orelse:
                self.block(s.orelse, ctx._replace(lits=ctx.lits | {Lit(gid, 0, None, True)}))
            if s.finalbody:
                self.block(s.finalbody, ctx._replace(in_finally=True))
            return t_body if not s.handlers and t_body else None
        if type(s).__name__ == "Match":
            self.expr(s.subject, ctx, s)
            gid = id(s)
            for i, case in enumerate(s.cases):
                cctx = ctx._replace(lits=ctx.lits | {Lit(gid, i, None, True)})
                if case.guard is not None:
                    self.expr(case.guard, cctx, s)
                self.block(case.body, cctx)
            return None
        if isinstance(s, ast.Assign):
            self.expr(s.value, ctx, s)
            for t in s.targets:
                self.assign_target(t, s.value, s, ctx)
            return None
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.expr(s.value, ctx, s)
            self.annotation(s.target, s.annotation)
            self.assign_target(s.target, s.value, s, ctx)
            return None
        if isinstance(s, ast.AugAssign):
            self.expr(s.value, ctx, s)
            self.assign_target(s.target, None, s, ctx, aug=True)
            return None
        term = _terminates(s)
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expr(child, ctx, s)
        return term

    def annotation(self, target: ast.expr, ann: ast.expr | None) -> None:
        if ann is None:
            return
        scopes = self.f.scopes()
        for n in ast.walk(ann):
            if isinstance(n, (ast.Name, ast.Attribute)) and canonical(qualify(n, scopes)) == "GradScaler":
                key = self.m.key_of_expr(target, self.f)
                if key is not None:
                    self.m.annotated_scalers.add(key)
                return
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "GradScaler" in n.value:
                key = self.m.key_of_expr(target, self.f)
                if key is not None:
                    self.m.annotated_scalers.add(key)
                return

    def autocast_item(self, expr: ast.expr, with_node) -> Autocast | None:
        """Does this ``with`` item enter a torch autocast region? Conditional expressions
        (``autocast(...) if amp else nullcontext()``) are 'maybe'."""
        scopes = self.f.scopes()
        m = self.m
        if isinstance(expr, ast.IfExp):
            a = self.autocast_item(expr.body, with_node) or self.autocast_item(expr.orelse, with_node)
            if a is not None:
                return Autocast(expr, with_node, "no" if a.enabled == "no" else "maybe", a.call)
            return None
        if isinstance(expr, ast.Call):
            q = canonical(qualify(expr.func, scopes))
            factory = False
            if q != "autocast" and isinstance(expr.func, ast.Name):
                # an alias: ac = partial(torch.autocast, ...) / ac = torch.autocast
                key = m.key_of_expr(expr.func, self.f)
                factory = any(a.kind == "autocast" for a in m.assigns.get(key, ()))
            if q == "autocast" or factory:
                enabled = "yes"
                for kw in expr.keywords:
                    if kw.arg == "enabled":
                        if isinstance(kw.value, ast.Constant):
                            enabled = "yes" if kw.value.value else "no"
                        else:
                            enabled = "maybe"
                if q == "autocast" and len(expr.args) >= 3:
                    a2 = expr.args[2]
                    if isinstance(a2, ast.Constant):
                        enabled = "yes" if a2.value else "no"
                    else:
                        enabled = "maybe"
                return Autocast(expr, with_node, enabled, expr)
            return None
        if isinstance(expr, (ast.Name, ast.Attribute)):
            key = m.key_of_expr(expr, self.f)
            kinds = [a for a in m.assigns.get(key, ())] if key else []
            if kinds and all(a.kind == "autocast" for a in kinds):
                cond = any(isinstance(a.value, ast.IfExp) for a in kinds)
                return Autocast(expr, with_node, "maybe" if cond else "yes", None)
        return None

    def classify_value(self, value: ast.expr | None) -> tuple[str, Key | None]:
        if value is None:
            return "unknown", None
        scopes = self.f.scopes()
        m = self.m
        if isinstance(value, ast.Constant) and value.value is None:
            return "none", None
        if isinstance(value, ast.IfExp):
            parts = [self.classify_value(value.body), self.classify_value(value.orelse)]
            kinds = {k for k, _ in parts}
            if "autocast" in kinds:
                return "autocast", None
            if "ctor" in kinds and kinds <= {"ctor", "none"}:
                return "ctor", None
            if "veto" in kinds:
                return "veto", None
            for k, ref in parts:
                if k == "key":
                    return "key", ref
            return "unknown", None
        if isinstance(value, ast.BoolOp):
            for v in value.values:
                k, ref = self.classify_value(v)
                if k in ("ctor", "key"):
                    return k, ref
            return "unknown", None
        if isinstance(value, ast.Call):
            q = qualify(value.func, scopes)
            c = canonical(q)
            if c == "GradScaler":
                return "ctor", None
            if c == "autocast":
                return "autocast", None
            if q in ("functools.partial", "partial") and value.args:
                if canonical(qualify(value.args[0], scopes)) == "autocast":
                    return "autocast", None
            # x = scaler.scale(loss) / x = scaler.scale(loss) / n
            sk = self.scale_call_key(value)
            if sk is not None:
                return "scaled", sk
            if q is not None and q.split(".")[-1][:1].isupper():
                # A class construction of something else (fairseq/apex/own scalers).
                return "veto", None
            return "unknown", None
        if isinstance(value, ast.BinOp):
            for side in (value.left, value.right):
                sk = self.scale_call_key(side) if isinstance(side, ast.Call) else None
                if sk is not None:
                    return "scaled", sk
            return "unknown", None
        if isinstance(value, (ast.Name, ast.Attribute)):
            q = canonical(qualify(value, scopes))
            if q == "autocast":
                return "autocast", None
            if q == "GradScaler":
                return "unknown", None
            key = m.key_of_expr(value, self.f)
            if key is not None:
                return "key", key
        return "unknown", None

    def scale_call_key(self, call: ast.Call) -> Key | None:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "scale":
            return self.m.key_of_expr(call.func.value, self.f)
        return None

    def assign_target(self, target: ast.expr, value, stmt, ctx: Ctx, aug: bool = False) -> None:
        m = self.m
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.assign_target(elt, None, stmt, ctx)
            return
        if isinstance(target, ast.Starred):
            self.assign_target(target.value, None, stmt, ctx)
            return
        if isinstance(target, ast.Name) and isinstance(value, (ast.Name, ast.Attribute)) and not aug:
            # an alias of a torch AMP object: GS = torch.cuda.amp.GradScaler
            q = qualify(value, self.f.scopes())
            if q and (canonical(q) in ("GradScaler", "autocast") or q.startswith(("torch.cuda.amp", "torch.cpu.amp", "torch.amp"))):
                self.f.scope[target.id] = q
                m.aliases.add(target.id)
        key = m.key_of_expr(target, self.f)
        if key is None:
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                self.expr(target.value, ctx, stmt)
            return
        if aug:
            kind, ref = "unknown", None
        else:
            kind, ref = self.classify_value(value)
        m.assigns.setdefault(key, []).append(
            Assign(key, value, kind, ref, target, stmt, m.next_seq(), self.f, ctx)
        )

    # expressions -----------------------------------------------------------
    def expr(self, node: ast.expr, ctx: Ctx, stmt: ast.stmt, role: str = "load") -> None:
        if type(node) is ast.Constant:  # the commonest leaf: nothing to record (issue 8)
            return
        m = self.m
        f = self.f
        if isinstance(node, (ast.Lambda,)):
            return
        if isinstance(node, ast.Call):
            self.expr(node.func, ctx, stmt, role="call" if role != "decorator" else "decorator")
            arg_keys: list = []
            # arguments to a function of this file are followed into it (not an escape)
            arg_role = "known_arg" if m.resolve_callee_expr(node.func, f) is not None else "arg"
            for i, a in enumerate(node.args):
                inner = a.value if isinstance(a, ast.Starred) else a
                self.expr(inner, ctx, stmt, role=arg_role if not isinstance(a, ast.Starred) else "arg")
                k = m.key_of_expr(inner, f) if isinstance(inner, (ast.Name, ast.Attribute)) else None
                if k is not None:
                    arg_keys.append((i, k))
            for kw in node.keywords:
                self.expr(kw.value, ctx, stmt, role=arg_role if kw.arg else "arg")
                k = (
                    m.key_of_expr(kw.value, f)
                    if isinstance(kw.value, (ast.Name, ast.Attribute))
                    else None
                )
                if k is not None and kw.arg:
                    arg_keys.append((kw.arg, k))
            seq = m.next_seq()
            q = qualify(node.func, f.scopes())
            cs = CallSite(node, node.func, q, stmt, seq, f, ctx, arg_keys)
            f.calls.append(cs)
            m.qual_calls.append(cs)
            c = canonical(q)
            if c == "autocast":
                m.autocast_calls.append((node, f, ctx, stmt))
            if isinstance(node.func, ast.Attribute):
                rk = m.key_of_expr(node.func.value, f)
                f.methods.append(
                    MethodCall(rk, node.func.value, node.func.attr, node, node.func, True, stmt, seq, f, ctx)
                )
            if c == "clip":  # torch.nn.utils.clip_grad_norm_(...) is an attribute call too
                f.events.append(Event("clip", node, stmt, seq, f, ctx))
            elif q == "torch.autograd.backward":
                f.events.append(Event("backward", node, stmt, seq, f, ctx, extra={"autograd": True}))
            return
        if isinstance(node, ast.Attribute):
            q = qualify(node, f.scopes())
            if q and (q.startswith("torch.cuda.amp.") or q.startswith("torch.cpu.amp.") or q.startswith("apex.amp")):
                m.refs.append(Ref(node, q, stmt, f, ctx, role))
                return
            if role != "call":
                rk = m.key_of_expr(node.value, f) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
                if rk is not None:
                    f.methods.append(
                        MethodCall(rk, node.value, node.attr, node, node, False, stmt, m.next_seq(), f, ctx)
                    )
            self.expr(node.value, ctx, stmt, role="attrbase")
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                q = qualify(node, f.scopes())
                if q and q != node.id and node.id not in m.aliases and (
                    q.startswith("torch.cuda.amp") or q.startswith("torch.cpu.amp") or q.startswith("apex.amp")
                ):
                    m.refs.append(Ref(node, q, stmt, f, ctx, role))
                if role not in ("attrbase", "call", "known_arg"):
                    key = m.name_key(node.id, f)
                    f.bare_uses.append((key, node, ctx, m.next_seq()))
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            # comprehensions: walk their parts as plain expressions
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.comprehension):
                    self.expr(child.iter, ctx, stmt)
                    for cond in child.ifs:
                        self.expr(cond, ctx, stmt)
                elif isinstance(child, ast.expr):
                    self.expr(child, ctx, stmt)
            return
        if isinstance(node, ast.NamedExpr):
            self.expr(node.value, ctx, stmt)
            self.assign_target(node.target, node.value, stmt, ctx)
            return
        # ast.iter_child_nodes, inlined (the walker's hottest loop)
        child_role = "load" if role in ("attrbase", "call") else role
        for name in node._fields:
            v = getattr(node, name, None)
            for child in v if type(v) is list else (v,):
                if isinstance(child, ast.expr):
                    self.expr(child, ctx, stmt, role=child_role)
                elif isinstance(child, ast.keyword):
                    self.expr(child.value, ctx, stmt)


def _cut(line: str, start: int | None, end: int | None) -> str:
    if line.isascii():
        return line[start:end]
    return line.encode("utf-8")[start:end].decode("utf-8", errors="replace")


def _segment(lines: list[str], node: ast.AST) -> str | None:
    """ast.get_source_segment over pre-split lines (ast offsets are UTF-8 byte columns)."""
    try:
        row, erow = node.lineno - 1, node.end_lineno - 1
        col, ecol = node.col_offset, node.end_col_offset
    except (AttributeError, TypeError):
        return None
    if erow is None or ecol is None or row < 0 or erow >= len(lines) or erow < row:
        return None
    if row == erow:
        return _cut(lines[row], col, ecol)
    return "".join([_cut(lines[row], col, None), *lines[row + 1 : erow], _cut(lines[erow], None, ecol)])


def _match_rows(source: str, pattern: re.Pattern) -> list[int]:
    """The rows (counted at \\n) that hold a match of ``pattern``."""
    lits = _literals(pattern.pattern)
    if lits is not None:
        return _literal_rows(source, lits)
    rows: list[int] = []
    last = 0
    row = 1
    for mt in pattern.finditer(source):
        row += source.count("\n", last, mt.start())
        last = mt.start()
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


# Speed (issue 8): Python's regex engine scans an alternation of words at ~20 MB/s, while
# str.find runs at memory speed. A pattern that is only an alternation of literal words
# (each optionally between \b, with [xX] classes) is therefore searched word by word; the
# rows are the same, since no match spans a line. Any other pattern uses the regex.
_ALT_PART = re.compile(r"(\\b)?((?:\\[^A-Za-z0-9]|\[[A-Za-z0-9_]+\]|[^\\\[\]().*+?{}|^$])+)(\\b)?")
_literal_cache: dict[str, list[tuple[str, bool, bool]] | None] = {}


def _literals(pat: str) -> list[tuple[str, bool, bool]] | None:
    """``pat`` as (word, \\b before, \\b after) alternatives, or None if it is not that simple."""
    if pat in _literal_cache:
        return _literal_cache[pat]
    out: list[tuple[str, bool, bool]] | None = []
    body, outer = pat, (False, False)
    grouped = re.fullmatch(r"\\b\(\?:(.*)\)\\b", pat)
    if grouped and "(" not in grouped.group(1) and ")" not in grouped.group(1):
        body, outer = grouped.group(1), (True, True)
    for alt in body.split("|"):
        mt = _ALT_PART.fullmatch(alt)
        if mt is None or not alt:
            out = None
            break
        words = [""]
        for piece in re.findall(r"\\.|\[[A-Za-z0-9_]+\]|.", mt.group(2)):
            if piece.startswith("["):
                words = [w + c for w in words for c in dict.fromkeys(piece[1:-1])]
            else:
                words = [w + piece[-1] for w in words]
        out.extend((w, bool(mt.group(1)) or outer[0], bool(mt.group(3)) or outer[1]) for w in words)
    if len(_literal_cache) < 256:
        _literal_cache[pat] = out
    return out


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _literal_rows(source: str, lits: list[tuple[str, bool, bool]]) -> list[int]:
    find = source.find
    n = len(source)
    pos: list[int] = []
    for word, b_before, b_after in lits:
        k = len(word)
        if not k:
            continue
        i = find(word)
        while i != -1:
            if b_before and (i > 0 and _is_word(source[i - 1])) == _is_word(word[0]):
                pass
            elif b_after and (i + k < n and _is_word(source[i + k])) == _is_word(word[-1]):
                pass
            else:
                pos.append(i)
            i = find(word, i + 1)
    pos.sort()
    rows: list[int] = []
    last = 0
    row = 1
    count = source.count
    for p in pos:
        row += count("\n", last, p)
        last = p
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


def _decorated_start(node) -> int:
    decos = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decos])


class _Builder:
    def __init__(self, source: str, tree: ast.Module):
        self.m = FileModel(source, tree)
        # Lines holding a relevant token, found with one search over the file; a function is
        # walked when its line range holds one.
        pattern = RELEVANT_WITH_SCALER if ("scaler" in source or "Scaler" in source) else RELEVANT
        self.rows = _match_rows(source, pattern)
        self.declared: list[Func] = []

    def relevant(self, node) -> bool:
        start = _decorated_start(node)
        end = getattr(node, "end_lineno", None) or start
        i = bisect.bisect_left(self.rows, start)
        return i < len(self.rows) and self.rows[i] <= end

    def build(self) -> FileModel:
        m = self.m
        tree = m.tree
        module = Func(tree, "<module>", "<module>", None, None, m.module_scope)
        self._collect_imports(tree.body, m.module_scope)
        module.locals = set()
        m.funcs.append(module)
        pending: list[Func] = []
        self._declare(tree.body, module, None, "", pending)
        # Walk functions after declaring all of them, so calls and self attributes resolve.
        _Walker(m, module).block([s for s in tree.body], Ctx())
        module.walked = True
        for f in pending:
            # A class body keeps its defs: the walker visits only their decorators
            # (``@torch.cuda.amp.custom_fwd`` on a method), never their bodies.
            body = f.node.body
            w = _Walker(m, f)
            if isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._params(f, w)
            w.block(body, Ctx())
            f.walked = True
        self._propagate_params()
        self._walk_scaler_callees()
        self._walk_scaler_name_users()
        self._classify_events()
        return m

    def _walk_scaler_name_users(self) -> None:
        """``self.gs = GradScaler()``: methods using ``self.gs`` hold no relevant token, so
        walk the functions that mention a constructed scaler's name."""
        m = self.m
        names = {
            str(k[-1])
            for k, assigns in m.assigns.items()
            if k[0] in ("A", "G", "L") and any(a.kind == "ctor" for a in assigns) and not RELEVANT.search(str(k[-1]))
        }
        if not names:
            return
        pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
        saved = self.rows
        self.rows = _match_rows(m.source, pattern)
        todo = [f for f in self.declared if not f.walked and self.relevant(f.node)]
        self.rows = saved
        for f in todo:
            f.locals = _locals_of(f.node)
            m.funcs.append(f)
            w = _Walker(m, f)
            self._params(f, w)
            w.block(f.node.body, Ctx())
            f.walked = True
        if todo:
            m.reset_derived()
            self._propagate_params()

    def _walk_scaler_callees(self) -> None:
        """A function the screen skipped is still walked when a walked one passes it a
        scaler (``def step(s, opt): s.step(opt); s.update()``)."""
        m = self.m
        for _ in range(8):
            extra: list[Func] = []
            for f in m.funcs:
                for c in f.calls:
                    callee = m.resolve_callee(c)
                    if callee is None or callee.walked or callee in extra:
                        continue
                    if any(m.is_scaler(k) for _pos, k in c.arg_keys):
                        extra.append(callee)
            if not extra:
                return
            for f in extra:
                f.locals = _locals_of(f.node)
                m.funcs.append(f)
                w = _Walker(m, f)
                self._params(f, w)
                w.block(f.node.body, Ctx())
                f.walked = True
            m.reset_derived()
            self._propagate_params()

    def _collect_imports(self, body, scope) -> None:
        for s in body:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                add_import(scope, s)
            elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ in ("TryStar",):
                self._collect_imports(s.body, scope)
                self._collect_imports(getattr(s, "orelse", []), scope)
                for h in getattr(s, "handlers", []):
                    self._collect_imports(h.body, scope)
                self._collect_imports(getattr(s, "finalbody", []), scope)

    def _declare(self, body, parent: Func, cls: ClassInfo | None, prefix: str, pending: list) -> None:
        m = self.m
        for s in body:
            if isinstance(s, ast.ClassDef):
                qual = prefix + s.name
                bases = [ast.unparse(b) for b in s.bases]
                info = ClassInfo(
                    s,
                    qual,
                    has_unknown_bases=any(b not in ("object", "nn.Module", "torch.nn.Module", "Module") for b in bases),
                )
                m.classes[qual] = info
                if self.relevant(s):
                    body_func = Func(s, s.name, qual + ".<body>", None, parent, {})
                    m.funcs.append(body_func)
                    pending.append(body_func)
                self._declare(s.body, parent, info, qual + ".", pending)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = Func(s, s.name, prefix + s.name, cls, parent if cls is None else parent, {})
                self.declared.append(f)
                if cls is not None:
                    cls.methods[s.name] = f
                    f.parent = parent
                elif parent.node is m.tree:
                    m.toplevel[s.name] = f
                else:
                    parent.nested[s.name] = f
                args = s.args
                allargs = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs, *([args.kwarg] if args.kwarg else [])]
                f.params = [a.arg for a in allargs]
                f.param_nodes = {a.arg: a for a in allargs}
                is_static = any(
                    isinstance(d, ast.Name) and d.id in ("staticmethod",) for d in s.decorator_list
                )
                if cls is not None and not is_static and (args.posonlyargs or args.args):
                    f.self_name = (args.posonlyargs or args.args)[0].arg
                elif cls is None and parent.self_name and parent.cls is not None:
                    # nested function in a method: inherit self (closure)
                    f.cls = parent.cls
                    f.self_name = parent.self_name
                    if f.self_name in f.params:
                        f.self_name = None
                if self.relevant(s):
                    f.locals = _locals_of(s)
                    m.funcs.append(f)
                    pending.append(f)
                    self._declare(s.body, f, None, prefix + s.name + ".", pending)
            elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ in ("TryStar",):
                self._declare(s.body, parent, cls, prefix, pending)
                self._declare(getattr(s, "orelse", []), parent, cls, prefix, pending)
                for h in getattr(s, "handlers", []):
                    self._declare(h.body, parent, cls, prefix, pending)
                self._declare(getattr(s, "finalbody", []), parent, cls, prefix, pending)
            elif cls is None and parent.node is not m.tree and hasattr(s, "body") and not isinstance(s, ast.ClassDef):
                # defs nested in loops/with blocks of a function
                self._declare(s.body, parent, None, prefix, pending)
                self._declare(getattr(s, "orelse", []), parent, None, prefix, pending)

    def _params(self, f: Func, w: _Walker) -> None:
        node = f.node
        for name, a in f.param_nodes.items():
            w.annotation(ast.Name(id=name, ctx=ast.Store()), a.annotation)
        args = node.args
        defaults = list(zip(reversed(args.args), reversed(args.defaults)))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, d in defaults:
            kind, ref = w.classify_value(d)
            if kind in ("ctor", "autocast"):
                key = ("L", f.fid, a.arg)
                self.m.assigns.setdefault(key, []).append(Assign(key, d, kind, ref, a, None, 0, f, Ctx()))

    def _propagate_params(self) -> None:
        """A parameter receives whatever the same file's call sites pass to it."""
        m = self.m
        for f in m.funcs:
            for c in f.calls:
                callee = m.resolve_callee(c)
                if callee is None:
                    continue
                for pos, k in c.arg_keys:
                    pname = FileModel._param_for(callee, pos)
                    if pname is None:
                        continue
                    pkey = ("L", callee.fid, pname)
                    m.assigns.setdefault(pkey, []).append(
                        Assign(pkey, None, "key", k, c.node, c.stmt, c.seq, f, c.ctx)
                    )

    def _classify_events(self) -> None:
        m = self.m
        for f in m.funcs:
            scaled_names: dict[Key, list[Assign]] = {}
            for key, assigns in m.assigns.items():
                for a in assigns:
                    if a.func is f and a.kind == "scaled" and m.is_scaler(a.ref):
                        scaled_names.setdefault(key, []).append(a)
            new_events: list[Event] = []
            for mc in f.methods:
                if not mc.called:
                    continue
                call: ast.Call = mc.node  # type: ignore[assignment]
                rk = mc.receiver
                attr = mc.attr
                if rk is not None and m.is_scaler(rk):
                    opt = ast.unparse(call.args[0]) if call.args else None
                    if attr == "scale":
                        new_events.append(Event("scale", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk))
                    elif attr == "unscale_":
                        new_events.append(Event("unscale", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk, optimizer=opt))
                    elif attr == "step":
                        new_events.append(Event("step", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk, optimizer=opt))
                    elif attr == "update":
                        new_events.append(Event("update", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk))
                    elif attr == "state_dict":
                        new_events.append(Event("scaler_state", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk))
                    continue
                if attr == "backward":
                    recv = mc.receiver_node
                    sk = self._scaled_by(recv, f, mc.seq, scaled_names, mc.ctx)
                    if sk is not None:
                        new_events.append(
                            Event("backward", call, mc.stmt, mc.seq, f, mc.ctx, scaler=sk, scaled=True, receiver=rk)
                        )
                    elif call.args:
                        new_events.append(Event("framework_backward", call, mc.stmt, mc.seq, f, mc.ctx, receiver=rk))
                    else:
                        new_events.append(Event("backward", call, mc.stmt, mc.seq, f, mc.ctx, receiver=rk))
                elif attr == "zero_grad":
                    new_events.append(
                        Event("zero_grad", call, mc.stmt, mc.seq, f, mc.ctx, optimizer=ast.unparse(mc.receiver_node), receiver=rk)
                    )
                elif attr == "step" and not call.args and not call.keywords:
                    if m.is_optimizer(mc.receiver_node, f):
                        new_events.append(
                            Event("opt_step", call, mc.stmt, mc.seq, f, mc.ctx, optimizer=ast.unparse(mc.receiver_node), receiver=rk)
                        )
            # torch.autograd.backward(scaler.scale(loss)) / clip events are already recorded
            for e in f.events:
                if e.kind == "backward" and e.extra.get("autograd") and e.node.args:
                    sk = self._scaled_by(e.node.args[0], f, e.seq, scaled_names, e.ctx)
                    if sk is not None:
                        e.scaled, e.scaler = True, sk
            f.events.extend(new_events)
            f.events.sort(key=lambda e: e.seq)

    def _scaled_by(self, expr: ast.expr, f: Func, seq: int, scaled_names, ctx: Ctx | None = None) -> Key | None:
        m = self.m
        for n in ast.walk(expr):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "scale":
                k = m.key_of_expr(n.func.value, f)
                if m.is_scaler(k):
                    return k
            if isinstance(n, (ast.Name, ast.Attribute)):
                k = m.key_of_expr(n, f)
                if k in scaled_names:
                    # the latest assignment of this name before the backward
                    prior = [
                        a for a in m.assigns.get(k, ())
                        if a.func is f and a.seq < seq and (ctx is None or not exclusive(a.ctx.lits, ctx.lits))
                    ]
                    if prior and prior[-1].kind == "scaled":
                        return prior[-1].ref
        return None


def build_model(source: str, tree: ast.Module) -> FileModel:
    return _Builder(source, tree).build()


def iter_stmts(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    for s in body:
        yield s
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            yield from iter_stmts(getattr(s, field_name, []) or [])
