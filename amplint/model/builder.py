"""``build_model(source, tree)``: declare every function and class, walk those that can hold
AMP code (found with one literal search over the file), then propagate parameters and classify
the recorded method calls into AMP events."""

from __future__ import annotations

import ast
import bisect
import re
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up
    from typing import Iterable, Iterator

from amplint.model.facts import Assign, ClassInfo, Ctx, Event, Func, Key, exclusive
from amplint.model.filemodel import FileModel
from amplint.model.names import add_import
from amplint.model.walker import _Walker, _locals_of
from amplint.tokens import RELEVANT, RELEVANT_WITH_SCALER, match_rows


def _decorated_start(node) -> int:
    decos = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decos])


class _Builder:
    def __init__(self, source: str, tree: ast.Module):
        self.m = FileModel(source, tree)
        # Lines holding a relevant token, found with one search over the file; a function is
        # walked when its line range holds one.
        pattern = RELEVANT_WITH_SCALER if ("scaler" in source or "Scaler" in source) else RELEVANT
        self.rows = match_rows(source, pattern)
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
        self._walk_scaler_owners()
        self._walk_helper_users()
        self._walk_inherited()
        self._walk_autocast_overrides()
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
        if names:
            self._walk_matching(re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b"))

    def _walk_scaler_owners(self) -> None:
        """``self.scaler = GradScaler()``: every method of that class runs with the object's
        scaler, optimizer and model, whatever tokens its own lines hold (``fit()`` calls
        ``self.train_step()`` and then ``save_checkpoint(dir, self.model, self.optimizer)``),
        so the class's methods are walked as one object; in project mode, also those of a class
        whose project base class builds it."""
        m = self.m
        owners = {k[1] for k, assigns in m.assigns.items() if k[0] == "A" and any(a.kind == "ctor" for a in assigns)}
        idx = m._index
        if idx is not None and hasattr(idx, "inherited_scaler_attrs"):  # a project base class builds it
            owners |= {q for q, info in m.classes.items() if getattr(info.node, "bases", None) and idx.inherited_scaler_attrs(m.path, q)}
        if not owners:
            return
        self._walk_late([f for qual, info in m.classes.items() if qual in owners for f in info.methods.values() if not f.walked])

    def _walk_matching(self, pattern: re.Pattern) -> None:
        """Walk the functions not walked yet whose lines hold a match of ``pattern``."""
        saved = self.rows
        self.rows = match_rows(self.m.source, pattern)
        todo = [f for f in self.declared if not f.walked and self.relevant(f.node)]
        self.rows = saved
        self._walk_late(todo)

    def _walk_helper_users(self) -> None:
        """``with amp_ctx():`` / ``scaler = make_scaler()``: a function that uses AMP only
        through a project helper (this file's or another module's, returning an autocast
        context or a GradScaler) holds no relevant token of its own, so walk the functions
        that call one by the name it is defined or imported under."""
        m = self.m
        idx = m._index
        if idx is None or not self.declared:
            return
        names = {n for n in m.helper_names if not RELEVANT.search(n) and n + "(" in m.source}
        if names:
            self._walk_matching(re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\s*\("))

    def _walk_inherited(self) -> None:
        """In project mode, the methods of a class that a subclass elsewhere inherits while it
        trains with a GradScaler attribute: they run for that scaler (a checkpoint save)."""
        m = self.m
        idx = m._index
        if idx is None or getattr(idx, "restores_optimizer", None) is None:
            return
        todo = [
            f for qual, info in m.classes.items() if idx.scaled_subclasses(m.path, qual)
            for f in info.methods.values() if not f.walked
        ]
        self._walk_late(todo)

    def _walk_autocast_overrides(self) -> None:
        """In project mode, the methods a base class in another module calls inside autocast
        (``with autocast(...): self.step(data)``): they run under that region even without an
        AMP token of their own (a plain ``loss.backward()``)."""
        m = self.m
        idx = m._index
        if idx is None or not hasattr(idx, "inherited_autocast_calls"):
            return
        todo = []
        for qual, info in m.classes.items():
            if not getattr(info.node, "bases", None):
                continue
            for _bpath, _bmeth, name, _line, _kind in idx.inherited_autocast_calls(m.path, qual):
                f = info.methods.get(name)
                if f is not None and not f.walked and f not in todo:
                    todo.append(f)
        self._walk_late(todo)

    def _walk_late(self, todo: list[Func]) -> None:
        """Walk functions found to matter after the first pass, then recompute what depends on them."""
        m = self.m
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
            self._walk_late(extra)

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
                        # update(new_scale) ends the iteration too, but only sets the scale: it never
                        # raises "No inf checks were recorded" and is not a second update (amp-facts 3b)
                        value = bool(call.args or call.keywords)
                        new_events.append(Event("update", call, mc.stmt, mc.seq, f, mc.ctx, scaler=rk, extra={"value": value}))
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


def build_model(source: str, tree: ast.Module, path: str | None = None, index=None) -> FileModel:
    """The loop model of one file. ``path`` and the project ``index`` let the walker see
    through project wrappers (a scaler factory, an autocast context manager)."""
    b = _Builder(source, tree)
    if path is not None:
        b.m.path = path
    if index is not None:
        b.m.index = index
    return b.build()


def iter_stmts(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    for s in body:
        yield s
        for field_name in ("body", "orelse", "finalbody", "handlers"):
            yield from iter_stmts(getattr(s, field_name, []) or [])
