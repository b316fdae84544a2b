"""What ``amplint verify`` needs from the static model, in one place.

This is the only runtime module that imports the static core, and it imports only
``amplint.model.build_model``; it reads the returned FileModel's public attributes (``funcs``
with their ``events``, ``classes``). If the model package moves, this import is the one line to
change. Nothing here imports torch.

:func:`analyse` returns a :class:`FileInfo`: every top-level function and method of the file
with its parameters, the AMP events the model saw in it (scale/backward/unscale/clip/step/
update/zero_grad/opt_step with loop depth and branch guards), the functions of the same file it
calls, the ``self.<attr>`` and module-level names it reads, and how it uses each parameter
(iterated, unpacked, called, ``.parameters()``, passed as autocast's device, used after ``%``
in a guard, ...), which :mod:`amplint.runtime.roles` turns into roles.
"""

from __future__ import annotations

import ast
import builtins
from typing import Iterable, NamedTuple

from amplint.model import build_model

__all__ = ["ParamInfo", "EventInfo", "FuncInfo", "ClassData", "FileInfo", "analyse", "TRAINING_KINDS"]

# Events that make a function a training function.
TRAINING_KINDS = frozenset({"scale", "backward", "unscale", "step", "update", "opt_step"})
_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__"}
_ITER_WRAPPERS = frozenset({"enumerate", "iter", "tqdm", "zip", "islice", "cycle", "trange", "chain",
                            "tqdm.tqdm", "itertools.islice", "itertools.cycle", "itertools.chain"})


class ParamInfo(NamedTuple):
    name: str
    kind: str  # positional | keyword | varargs | varkw
    default: ast.expr | None
    annotation: str | None

    @property
    def has_default(self) -> bool:
        return self.default is not None


class EventInfo(NamedTuple):
    kind: str
    line: int
    scaler: str | None  # the scaler's name (a parameter, local, global or attribute name)
    scaler_where: str | None  # param | local | attr | global
    optimizer: str | None  # the optimizer expression's text (``optimizer``, ``self.opt``)
    guards: tuple[str, ...]  # branch tests around the event (``(i + 1) % accum == 0``)
    depth: int  # enclosing loops
    node: ast.AST


class FuncInfo:
    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        self.node = node
        self.name = node.name
        self.cls = cls
        self.qualname = f"{cls}.{node.name}" if cls else node.name
        self.line = node.lineno
        self.params: list[ParamInfo] = _params(node)
        self.is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        self.is_classmethod = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list)
        self.self_name: str | None = None
        if cls and not self.is_static and self.params and self.params[0].kind == "positional":
            self.self_name = self.params[0].name
        self.events: list[EventInfo] = []
        self.calls: set[str] = set()  # qualnames of same-file functions/methods called
        self.uses: dict[str, set[str]] = {}  # param / "self.attr" / global name -> use tags
        self.attrs_read: set[str] = set()  # self.<attr> read or called (not assigned only)
        self.globals_read: set[str] = set()
        self.guards: list[tuple[int, str, str]] = []  # (line, guard text, event kind) of step/update events

    @property
    def call_params(self) -> list[ParamInfo]:
        """The parameters a caller passes (without ``self``/``cls``)."""
        ps = self.params
        if self.cls and not self.is_static and ps and ps[0].kind == "positional":
            return ps[1:]
        return ps

    @property
    def is_training(self) -> bool:
        return any(e.kind in TRAINING_KINDS for e in self.events)

    def __repr__(self) -> str:
        return f"FuncInfo({self.qualname!r}, line={self.line}, events={[e.kind for e in self.events]})"


class ClassData:
    def __init__(self, node: ast.ClassDef, qualname: str) -> None:
        self.node = node
        self.qualname = qualname
        self.methods: dict[str, FuncInfo] = {}
        self.bases = [ast.unparse(b) for b in node.bases]
        self.class_attrs = {
            t.id for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)
        }
        # self.<attr> = <expr> in __init__ (the last assignment wins)
        self.init_assigns: dict[str, ast.expr] = {}
        self.init_params: dict[str, ParamInfo] = {}


class FileInfo:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.funcs: dict[str, FuncInfo] = {}  # qualname -> info (top-level functions and methods)
        self.classes: dict[str, ClassData] = {}
        self.module_events: list[EventInfo] = []  # training events at the top level
        self.module_lines: list[int] = []

    def training_funcs(self) -> list[FuncInfo]:
        return [f for f in self.funcs.values() if f.is_training]

    def callers_closure(self, targets: Iterable[str]) -> set[str]:
        """Functions that call (transitively) any of ``targets``."""
        targets = set(targets)
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for q, f in self.funcs.items():
                if q not in out and f.calls & (targets | out):
                    out.add(q)
                    changed = True
        return out

    def callees_closure(self, qualname: str) -> list[FuncInfo]:
        """``qualname`` and every same-file function it calls, transitively (in discovery order)."""
        seen: list[str] = []
        todo = [qualname]
        while todo:
            q = todo.pop(0)
            if q in seen or q not in self.funcs:
                continue
            seen.append(q)
            todo.extend(sorted(self.funcs[q].calls))
        return [self.funcs[q] for q in seen]

    def candidates(self) -> list[FuncInfo]:
        """Training functions and their same-file callers, in source order."""
        train = {f.qualname for f in self.training_funcs()}
        train |= {q for q, f in self.funcs.items() if f.name in ("train_step", "train_loop") and not f.cls}
        names = train | self.callers_closure(train)
        return sorted((self.funcs[q] for q in names), key=lambda f: f.line)


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ParamInfo]:
    a = node.args
    pos = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    out = [ParamInfo(p.arg, "positional", d, ast.unparse(p.annotation) if p.annotation else None)
           for p, d in zip(pos, defaults)]
    if a.vararg:
        out.append(ParamInfo(a.vararg.arg, "varargs", None, None))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append(ParamInfo(p.arg, "keyword", d, ast.unparse(p.annotation) if p.annotation else None))
    if a.kwarg:
        out.append(ParamInfo(a.kwarg.arg, "varkw", None, None))
    return out


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# ---------------------------------------------------------------------- use tags


class _Uses(ast.NodeVisitor):
    """Tags how a function uses each name and ``self.<attr>``."""

    def __init__(self, info: FuncInfo, cls: ClassData | None, file: FileInfo, toplevel: set[str]) -> None:
        self.f = info
        self.cls = cls
        self.file = file
        self.toplevel = toplevel
        self.self_name = info.self_name
        self.stored: set[str] = {p.name for p in info.params}
        self.loaded: set[str] = set()
        self.declared_global: set[str] = set()
        self.loop_alias: dict[str, str] = {}  # for t in X: t -> X

    def key(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and self.self_name and node.value.id == self.self_name):
            return f"self.{node.attr}"
        return None

    def tag(self, node: ast.AST, tag: str) -> None:
        k = self.key(node)
        if k is not None:
            self.f.uses.setdefault(k, set()).add(tag)

    # -- statements
    def visit_Global(self, node: ast.Global) -> None:
        self.declared_global.update(node.names)

    def visit_For(self, node: ast.For) -> None:
        it = node.iter
        self.tag(it, "iter")
        if isinstance(it, ast.Call) and (_dotted(it.func) or "") in _ITER_WRAPPERS:
            for a in it.args:
                self.tag(a, "iter")
        if isinstance(it, ast.Call) and _dotted(it.func) == "range":
            for a in it.args:
                self.tag(a, "range")
        src = self.key(it)
        if src is not None and isinstance(node.target, ast.Name):
            self.loop_alias[node.target.id] = src
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            if isinstance(t, (ast.Tuple, ast.List)):
                self.tag(node.value, "unpack")
            if isinstance(t, ast.Attribute) and self.key(t) is not None:
                self.tag(t, "assigned")
        self.generic_visit(node)

    # -- expressions
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loaded.add(node.id)
        else:
            self.stored.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        k = self.key(node)
        if k is not None and isinstance(node.ctx, ast.Load):
            self.f.attrs_read.add(node.attr)
        base = node.value
        if isinstance(node.ctx, ast.Load):
            self.tag(base, f"a:{node.attr}")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        sl = node.slice
        if isinstance(sl, ast.Constant):
            self.tag(node.value, "index" if isinstance(sl.value, int) else "key")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mod):
            self.tag(node.right, "mod")
        elif isinstance(node.op, (ast.Div, ast.FloorDiv)):
            self.tag(node.right, "div")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for c in node.comparators:
            self.tag(c, "cmp")
        self.generic_visit(node)

    def visit_Starred(self, node: ast.Starred) -> None:
        self.tag(node.value, "star")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _dotted(func) or ""
        last = name.rsplit(".", 1)[-1]
        npos = len(node.args)
        self.tag(func, "call")
        if npos == 2 or (npos == 1 and node.keywords):
            self.tag(func, "call2")
        if isinstance(func, ast.Attribute):
            self.tag(func.value, f"m:{func.attr}")
            if func.attr in ("to", "cuda") and node.args:
                self.tag(node.args[0], "device_arg")
            if func.attr in ("step", "unscale_") and npos >= 1 and "scal" in ast.unparse(func.value).lower():
                self.tag(node.args[0], "stepped")
        if last == "autocast" and node.args:
            self.tag(node.args[0], "autocast_device")
        if last in ("GradScaler",) and node.args:
            self.tag(node.args[0], "scaler_device")
        if name in _ITER_WRAPPERS or last in ("next", "len"):
            for a in node.args:
                self.tag(a, "iter" if last != "len" else "len")
        if last in ("range",):
            for a in node.args:
                self.tag(a, "range")
        if last in ("save", "open", "makedirs", "mkdir", "Path", "join", "exists"):
            for a in node.args:
                self.tag(a, "path")
        if last in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"):
            for a in node.args[1:2]:
                self.tag(a, "clip_arg")
            for kw in node.keywords:
                if kw.arg in ("max_norm", "clip_value"):
                    self.tag(kw.value, "clip_arg")
        for kw in node.keywords:
            if kw.arg == "device_type":
                self.tag(kw.value, "autocast_device")
            elif kw.arg == "device":
                self.tag(kw.value, "device_arg")
            elif kw.arg == "dtype":
                self.tag(kw.value, "dtype_arg")
            elif kw.arg == "enabled":
                self.tag(kw.value, "enabled")
            elif kw.arg in ("max_norm", "clip_value"):
                self.tag(kw.value, "clip_arg")
        # same-file calls
        if isinstance(func, ast.Name) and func.id in self.toplevel and func.id not in self.stored:
            self.f.calls.add(func.id)
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and self.self_name
              and func.value.id == self.self_name and self.cls is not None and func.attr in self.cls.methods):
            self.f.calls.add(f"{self.cls.qualname}.{func.attr}")
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            self.stored.add(a.arg)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # nested defs: closures count
        self.stored.add(node.name)
        for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            self.stored.add(a.arg)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stored.add(node.name)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.stored.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            self.stored.add(a.asname or a.name)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.stored.add(node.name)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        for n in ast.walk(node.target):
            if isinstance(n, ast.Name):
                self.stored.add(n.id)
        self.generic_visit(node)

    def finish(self) -> None:
        for alias, src in self.loop_alias.items():
            for t in self.f.uses.get(alias, ()):
                self.f.uses.setdefault(src, set()).add(f"elem:{t}")
        glob = (self.loaded - self.stored) | (self.declared_global & self.loaded)
        self.f.globals_read = {n for n in glob if n not in _BUILTINS}


# ---------------------------------------------------------------------- building


def _key_name(key: object) -> tuple[str | None, str | None]:
    """A model key -> (name, where)."""
    if not isinstance(key, tuple) or not key:
        return None, None
    kind = key[0]
    name = key[-1] if isinstance(key[-1], str) else None
    return name, {"L": "local", "A": "attr", "G": "global", "X": "expr"}.get(kind)


def _guard_texts(ctx: object) -> tuple[str, ...]:
    out = []
    for lit in getattr(ctx, "lits", ()) or ():
        key = getattr(lit, "key", None)
        if key:
            out.append(key if getattr(lit, "pol", True) else f"not ({key})")
    return tuple(sorted(out))


def analyse(source: str, tree: ast.Module | None = None) -> FileInfo:
    """The verify-relevant facts of one file (``tree``: its ``ast`` parse, reused when given)."""
    if tree is None:
        tree = ast.parse(source)
    info = FileInfo(tree)
    toplevel: set[str] = set()
    order: list[tuple[FuncInfo, ClassData | None]] = []

    def declare(body: list[ast.stmt], cls: ClassData | None, prefix: str) -> None:
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = FuncInfo(s, cls.qualname if cls else None)
                info.funcs[f.qualname] = f
                order.append((f, cls))
                if cls is None:
                    toplevel.add(s.name)
                else:
                    cls.methods[s.name] = f
            elif isinstance(s, ast.ClassDef) and cls is None:
                cd = ClassData(s, prefix + s.name)
                info.classes[cd.qualname] = cd
                declare(s.body, cd, prefix + s.name + ".")
            elif isinstance(s, (ast.If, ast.Try)) and cls is None:
                if isinstance(s, ast.If) and _main_guard(s.test):
                    continue
                declare(s.body, None, prefix)
                declare(getattr(s, "orelse", []) or [], None, prefix)

    declare(tree.body, None, "")
    for f, cls in order:
        v = _Uses(f, cls, info, toplevel)
        for stmt in f.node.body:
            v.visit(stmt)
        for p in f.params:
            if p.default is not None:
                v.visit(p.default)
        v.finish()
    for cd in info.classes.values():
        init = cd.methods.get("__init__")
        if init is None:
            continue
        cd.init_params = {p.name: p for p in init.call_params}
        for n in ast.walk(init.node):
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id == init.self_name and n.value is not None):
                        cd.init_assigns[t.attr] = n.value

    # the static model: events per function (it walks only functions that can hold AMP code)
    model = build_model(source, tree)
    by_node = {id(f.node): f for f in info.funcs.values()}
    for mf in model.funcs:
        target = by_node.get(id(mf.node))
        is_module = mf.node is tree
        if target is None and not is_module:
            continue
        for e in mf.events:
            sname, swhere = _key_name(e.scaler)
            if target is not None and swhere == "local" and sname in {p.name for p in target.params}:
                swhere = "param"
            ev = EventInfo(e.kind, getattr(e.node, "lineno", 0), sname, swhere, e.optimizer,
                           _guard_texts(e.ctx), len(e.ctx.loops), e.node)
            if is_module:
                if e.kind in TRAINING_KINDS:
                    info.module_events.append(ev)
                continue
            target.events.append(ev)
            if e.kind in ("step", "update", "opt_step"):
                for g in ev.guards:
                    target.guards.append((ev.line, g, e.kind))
            # the model's knowledge of scalers and optimizers becomes use tags
            if e.kind in ("scale", "step", "update", "unscale") and sname:
                key = sname if swhere != "attr" else f"self.{sname}"
                target.uses.setdefault(key, set()).add("scaler")
            if e.kind in ("step", "unscale", "zero_grad", "opt_step") and e.optimizer:
                text = e.optimizer
                if target.self_name and text.startswith(target.self_name + "."):
                    text = "self." + text[len(target.self_name) + 1:]
                target.uses.setdefault(text, set()).add("optimizer")
    for f in info.funcs.values():
        for _line, g, _kind in f.guards:
            try:
                expr = ast.parse(g, mode="eval")
            except SyntaxError:
                continue
            for n in ast.walk(expr):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
                    k = _Uses(f, None, info, set()).key(n.right)
                    if isinstance(n.right, ast.Attribute) and f.self_name and _dotted(n.right) and \
                            _dotted(n.right).startswith(f.self_name + "."):
                        k = "self." + _dotted(n.right).split(".", 1)[1]
                    if k:
                        f.uses.setdefault(k, set()).add("accum_guard")
    info.module_lines = sorted({e.line for e in info.module_events})
    return info


def _main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")
