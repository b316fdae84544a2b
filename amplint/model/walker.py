"""The walker: one pass over a function's statements in evaluation order, recording events,
calls, method calls, assignments and references with their context (loops, branch literals,
autocast regions, guards)."""

from __future__ import annotations

import ast

from amplint.model.facts import (
    Assign, Autocast, CallSite, Ctx, Event, Func, ImportInfo, Key, Lit, Loop, MethodCall, Ref,
)
from amplint.model.filemodel import GUARD_TEXT, FileModel
from amplint.model.names import add_import, canonical, qualify


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
            if ctx.guarded:
                guard = True
            else:  # _norm_test's key is the whole test's text when it is not `x is None`, `x == True`...
                text = key if key is not None and not isinstance(s.test, (ast.UnaryOp, ast.Compare)) else ast.unparse(s.test)
                guard = bool("amp" in text and GUARD_TEXT.search(text))
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
                    ac.ctx = ctx  # the context the region is entered in (its loops)
                    ac.func = self.f
                    regions.append(ac)
                    m.autocast_regions.append(ac)
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
            if isinstance(expr.func, ast.Attribute) and expr.func.attr == "autocast" and "accelerator" in ast.unparse(expr.func.value).lower():
                return Autocast(expr, with_node, "maybe", None)  # accelerate's: on with its mixed precision
            ret, dtype = m.wrapper_returns(expr, self.f)
            if ret == "autocast":  # a project wrapper: a @contextmanager or a function returning torch.autocast(...)
                if any(kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False for kw in expr.keywords):
                    return Autocast(expr, with_node, "no", None, dtype)  # `torch_autocast(enabled=False)`
                flag = any(kw.arg == "enabled" and not isinstance(kw.value, ast.Constant) for kw in expr.keywords)
                return Autocast(expr, with_node, "maybe" if flag or expr.args else "yes", None, dtype)
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
            ret, _dtype = m.wrapper_returns(value, self.f)
            if ret == "GradScaler":  # a project scaler factory: def create_grad_scaler(): return GradScaler(...)
                return "ctor", None
            if ret == "autocast":
                return "autocast", None
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
            if isinstance(value, ast.Attribute) and value.attr == "autocast" and "accelerator" in ast.unparse(value.value).lower():
                return "autocast", None  # ctx = accelerator.autocast
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

    def _factory_position(self, value, n: int) -> int | None:
        """``model, scaler = create_model_and_scaler()``: the position of the GradScaler in the
        tuple a project factory returns (``return model, GradScaler()``), else None."""
        if not isinstance(value, ast.Call):
            return None
        ret, _dtype = self.m.wrapper_returns(value, self.f)
        if not ret or not ret.startswith("GradScaler@"):
            return None
        i = int(ret.split("@", 1)[1])
        return i if i < n else None

    def assign_target(self, target: ast.expr, value, stmt, ctx: Ctx, aug: bool = False, made: bool = False) -> None:
        m = self.m
        if isinstance(target, (ast.Tuple, ast.List)):
            at = self._factory_position(value, len(target.elts))
            for i, elt in enumerate(target.elts):
                self.assign_target(elt, None, stmt, ctx, made=i == at)
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
        if made:
            kind, ref = "ctor", None
        elif aug:
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
