"""``FileModel``: everything the rules may ask about one file (scalers, keys, callees,
updates reachable through helpers, optimizers)."""

from __future__ import annotations

import ast
import re
from functools import cached_property
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up
    from typing import Iterator

from amplint.lazyre import any_word, ascii_fast, lazy
from amplint.model.facts import (
    CERTAIN, LIKELY, NOT, Assign, CallSite, ClassInfo, Ctx, Event, Func, ImportInfo, Key, Loop, Ref,
    MethodCall,
)
from amplint.model.names import GRAD_SCALER_API, SCALER_NAME, attr_classes, declared_attr_classes, declared_class, dotted, qualify
from amplint.source import split_lines

def _optimizer_name(low: str) -> bool:
    """OPTIMIZER_NAME's regex on lower-case ASCII: "optimizer"/"optimiser" anywhere, or, at the
    start or after "_", opt/optim/optimizer/optimiser, an optional "s", then an optional "_"
    and at most 12 word characters up to the end (or a final newline)."""
    if "optimizer" in low or "optimiser" in low:
        return True
    i = low.find("opt")
    while i != -1:
        if i == 0 or low[i - 1] == "_":
            rest = low[i + 3 :]
            if rest.endswith("\n"):
                rest = rest[:-1]
            if not rest or rest.replace("_", "a").isalnum():  # every character a word character
                for head in ("", "im", "imizer", "imiser"):
                    if rest.startswith(head):
                        tail = rest[len(head) :]
                        for t in ((tail, tail[1:]) if tail.startswith("s") else (tail,)):
                            if len(t) <= 12 or (len(t) == 13 and t[0] == "_"):
                                return True
        i = low.find("opt", i + 1)
    return False


OPTIMIZER_NAME = ascii_fast(r"(?:^|_)(?:opt|optim|optimizer|optimiser)s?(?:_?\w{0,12})?$|optimizer|optimiser", _optimizer_name)
_NOT_OPT = r"sched|lr_|warmup|ema|swa|scaler|engine|model|trainer|accelerator"
NOT_OPTIMIZER = ascii_fast(_NOT_OPT, any_word(_NOT_OPT))
AMP_TOKENS = frozenset(
    {
        "amp", "scaler", "fp16", "half", "mixed", "precision", "autocast", "bf16", "bfloat16",
        "fp32", "float16", "float32", "apex", "deepspeed", "fsdp", "accelerator", "scaling",
        "float", "dtype", "fp8", "grad_scaler", "gradscaler", "use_amp", "enable_amp",
    }
)
_WRAPPER = r"scaler|autocast|amp|precision|mixed"
WRAPPER_NAME = ascii_fast(_WRAPPER, any_word(_WRAPPER))
GUARD_TEXT = lazy(r"hasattr|version|TORCH_|is_torch|_torch_|getattr")


def amp_ish(text: str) -> bool:
    toks = {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}
    return bool(toks & AMP_TOKENS) or "scaler" in text.lower()



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
        self.autocast_regions: list = []  # every `with` item entering autocast (facts.Autocast)
        self.qual_calls: list[CallSite] = []
        self.annotated_scalers: set[Key] = set()
        self.aliases: set[str] = set()  # names assigned a torch AMP object (GS = torch.cuda.amp.GradScaler)
        self.target_torch_version = "2.4"  # set by the engine from settings
        self.path = "<string>"  # set by the engine
        self.masked = False  # parsed with definitions left out (amplint.parse)
        self._index = None  # the project index (amplint.model.index), set by the engine or made lazily
        self._status: dict[Key, str] = {}
        self._attr_classes: dict[str, dict[str, str]] = {}  # class -> self.<attr> made once by a project class
        self._declared_attrs: dict[str, dict[str, str]] = {}  # class -> self.<attr> whose class an annotation declares
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

    # ------------------------------------------------------------------ project
    @property
    def index(self):
        """The project index; without a project, one of this file alone (its own helpers,
        even those the masked parse left out, are summarised on demand)."""
        if self._index is None:
            import os

            from amplint.model.index import ProjectIndex

            d = os.path.dirname(os.path.abspath(self.path))
            self._index = ProjectIndex([d], [self.path], texts={self.path: self.source})
        return self._index

    @index.setter
    def index(self, value) -> None:
        self._index = value

    @cached_property
    def helper_names(self) -> frozenset[str]:
        """The names this file calls the project's AMP helpers by (functions returning an
        autocast context or a GradScaler): its own top-level ones, and (project mode) those
        the index found anywhere in the project, under the local name they are imported as."""
        idx = self._index
        out = set()
        own = idx.summary(self.path) if idx is not None and hasattr(idx, "summary") and self.path else None
        if own is not None:
            out.update(q for q, f in own.functions.items() if "." not in q and f.returns in ("autocast", "GradScaler"))
        helpers = getattr(idx, "amp_helpers", ())
        if helpers:
            out.update(local for local, q in self.module_scope.items() if q.rsplit(".", 1)[-1] in helpers)
        return frozenset(out)

    def wrapper_returns(self, call: ast.Call, func) -> tuple[str | None, str | None]:
        """What a project function called as ``call`` returns: ``("GradScaler", None)`` for a
        scaler factory, ``("autocast", dtype)`` for an autocast wrapper (a function returning
        ``torch.autocast(...)`` or a ``@contextmanager`` yielding inside one); ``(None, None)``
        when unknown. Only names that say so (``scaler``, ``autocast``, ``amp``, ``precision``)
        are looked up, so most calls cost nothing."""
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if not WRAPPER_NAME.search(name or "") and name not in self.helper_names:
            return None, None
        hit = self._resolve_in_project(call.func, qualify(call.func, func.scopes()), func)
        if hit is None:
            return None, None
        facts = self.index.facts(*hit)
        return facts.returns, facts.returns_dtype

    def project_callee(self, call: CallSite):
        """``(path, FuncSummary, Facts)`` of the project function ``call`` calls (same file or
        another module of the project), or None when it does not resolve (unknown)."""
        callee = call.callee
        if isinstance(callee, ast.Name) and call.qualname == callee.id:
            inner = self._nested_def(callee, call.func)
            if inner is not None:  # a helper defined in an enclosing function, called through the closure
                hit = self.index.lookup(self.path, inner.qualname)
                return None if hit is None else (hit[0], hit[1], self.index.facts(*hit))
            if not self._may_be_own_function(callee.id, call.func):
                return None
        hit = self._resolve_in_project(callee, call.qualname, call.func)
        if hit is None:
            return None
        return hit[0], hit[1], self.index.facts(*hit)

    def _resolve_in_project(self, callee: ast.expr, q: str | None, func):
        """The project function a callee expression (qualified as ``q``) denotes: a method of
        this class for ``self.m``, else what the import-qualified name resolves to."""
        cls = None
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
            g = func
            while g is not None:
                if g.self_name == callee.value.id and g.cls is not None:
                    q, cls = "self." + callee.attr, g.cls.qualname
                    break
                g = g.parent
        if not q or q.startswith("torch."):
            return None
        hit = self.index.resolve(self.path, q, cls)
        if hit is None and cls is None and isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
            made = self._instance_class(callee.value, func)  # saver = Saver(...); saver.save_model(...)
            if made is not None:
                hit = self.index.resolve(self.path, f"{made}.{callee.attr}", None)
            elif (declared := self._declared_param_class(callee.value, func)) is not None:
                hit = self.index.resolve_declared(self.path, f"{declared}.{callee.attr}")  # def train(..., saver: Saver): saver.save(...)
        if hit is None and isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Attribute):
            made = self._attr_class(callee.value, func)  # self.ckpt = CheckpointManager(...); self.ckpt.save(...)
            if made is not None:
                hit = self.index.resolve(self.path, f"{made}.{callee.attr}", None)
            elif (declared := self._attr_class(callee.value, func, declared=True)) is not None:
                hit = self.index.resolve_declared(self.path, f"{declared}.{callee.attr}")  # self.model: LanguageModel = model
        return hit

    def _declared_param_class(self, name: ast.Name, func) -> str | None:
        """The class a parameter's annotation declares (``saver: Saver``) when the function
        never rebinds it."""
        if func is None or name.id not in func.params or name.id == func.self_name:
            return None
        a = func.param_nodes.get(name.id)
        if a is None or a.annotation is None or self.assigns.get(self.key_of_expr(name, func)):
            return None
        return declared_class(a.annotation, self.module_scope)

    def _attr_class(self, node: ast.Attribute, func, declared: bool = False) -> str | None:
        """The qualified name of the call that made ``self.<attr>`` when the class assigns that
        attribute exactly once, anywhere in its methods, from a call of a name the module
        imports or defines (``self.ckpt = CheckpointManager(out)``), else None."""
        if not isinstance(node.value, ast.Name):
            return None
        g = func
        while g is not None and not (g.self_name == node.value.id and g.cls is not None):
            g = g.parent
        if g is None:
            return None
        memo = self._declared_attrs if declared else self._attr_classes
        if g.cls.qualname not in memo:
            memo[g.cls.qualname] = (declared_attr_classes if declared else attr_classes)(g.cls.node, self.module_scope)
        return memo[g.cls.qualname].get(node.attr)

    def _instance_class(self, name: ast.Name, func) -> str | None:
        """The qualified name of the call that made ``name`` when it is assigned exactly once,
        from a call (``saver = Saver(args)``): the class whose methods ``name.m()`` runs."""
        key = self.key_of_expr(name, func)
        made = self.assigns.get(key, ()) if key is not None else ()
        if len(made) != 1 or not isinstance(made[0].value, ast.Call):
            return None
        q = qualify(made[0].value.func, made[0].func.scopes()) if made[0].func is not None else None
        return q if q and not q.startswith("torch.") else None

    def _nested_def(self, callee: ast.Name, func) -> Func | None:
        """The function ``callee`` denotes when it is defined inside ``func`` or a function
        around it (not at module level), else None."""
        inner = self.resolve_callee_expr(callee, func)
        if inner is None or inner.parent is None or inner.parent.node is self.tree:
            return None
        return inner

    def _may_be_own_function(self, name: str, func) -> bool:
        """Can the bare, unimported ``name`` be a function defined in this file? Not a local
        or parameter; a declared top-level function, or any name when the parse was masked
        (a definition without AMP tokens is not in the tree)."""
        if self.name_key(name, func)[0] == "L":
            return False
        if name in self.toplevel:
            return True
        return self.masked

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
                        if f.cls is not None and base.id in _built_by_cls(f):
                            return ("A", f.cls.qualname, node.attr)  # obj = cls(...) in a classmethod: the new instance
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

    def may_update(self, func: Func, key: Key, within: Loop | None = None, _seen=None, on: set[int] | None = None) -> bool:
        """Can running ``func`` (only the part inside loop ``within`` when given; of that, only
        the statements whose ids are in ``on`` when given: the core's cycle through a step)
        call ``update()`` on the scaler ``key``? Unknown callees that receive the scaler (or
        ``self`` for attribute scalers) count as yes: precision first."""
        if _seen is None:
            _seen = set()
        if (func.fid, key, id(within)) in _seen:
            return False
        _seen.add((func.fid, key, id(within)))

        def inside(ctx: Ctx, stmt=None) -> bool:
            return (within is None or within in ctx.loops) and (on is None or stmt is None or id(stmt) in on)

        for e in func.events:
            if e.kind == "update" and e.scaler == key and inside(e.ctx, e.stmt):
                return True
        # the scaler handed to a function of the project (another module): its summary decides
        known_args = set()
        for c in func.calls:
            if not inside(c.ctx, c.stmt) or not any(k == key for _p, k in c.arg_keys) or self.resolve_callee(c) is not None:
                continue
            hit = self.project_callee(c)
            if hit is None:
                continue
            _path, cs, facts = hit
            for pos, arg in [*enumerate(c.node.args), *((kw.arg, kw.value) for kw in c.node.keywords if kw.arg)]:
                if self.key_of_expr(arg, func) == key and isinstance(arg, (ast.Name, ast.Attribute)):
                    known_args.add(id(arg))
                    if facts.scaler_ops.get(cs.param_at(pos) or "", set()) & {"update", "update_value"}:
                        return True
        for k, node, ctx, _seq in func.bare_uses:
            if id(node) in known_args:
                continue
            if inside(ctx) and (k == key or (key[0] == "A" and k[0] == "L" and k[2] == func.self_name)):
                return True
        for c in func.calls:
            if not inside(c.ctx, c.stmt):
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
            if names and (loop.targets & names or _derived_in(loop, names)):
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


def _derived_in(loop: Loop, names: set[str]) -> bool:
    """Is one of ``names`` assigned in the loop's body from the loop's own targets
    (``for group in groups: opt = self.optimizers[group]``): a loop over optimizers?"""
    if not loop.targets:
        return False
    for st in getattr(loop.node, "body", ()):
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in st.targets):
            if any(isinstance(n, ast.Name) and n.id in loop.targets for n in ast.walk(st.value)):
                return True
    return False


def _built_by_cls(f) -> frozenset:
    """The locals of a classmethod ``f`` that every assignment makes ``cls(...)``: the
    instance a factory (``def from_opt(cls, ...): optimizer = cls(...); optimizer._scaler =
    GradScaler()``) builds and sets up, so its attributes are the class's own."""
    hit = f.__dict__.get("_built_by_cls")
    if hit is not None:
        return hit
    out: set[str] = set()
    node = f.node
    if f.self_name and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list):
        made, other = set(), set()
        for n in ast.walk(node):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) else []
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                        v = getattr(n, "value", None)
                        if (t is x and isinstance(n, ast.Assign) and isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                                and v.func.id == f.self_name):
                            made.add(x.id)
                        else:
                            other.add(x.id)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.comprehension)):
                for t in ([n.target] if hasattr(n, "target") else [i.optional_vars for i in n.items if i.optional_vars is not None]):
                    other.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
        out = made - other - set(f.params)
    f.__dict__["_built_by_cls"] = frozenset(out)
    return f.__dict__["_built_by_cls"]
