"""Phase 1 of project mode: a small, picklable *summary* of what each function of a file does
to its inputs, so callers in other modules can use it without re-analysing the callee
(Infer's procedure summaries; see architecture.md).

Per function (module-level functions and methods, by qualified name ``f`` / ``Class.m``):

* ``params``: the parameter names (without ``self``), ``varkw``: it takes ``**kwargs``;
* ``scaler_ops``: per parameter (or ``self.<attr>``), the GradScaler calls made on it
  (``scale``, ``unscale``, ``step``, ``update``, ``update_value`` for ``update(new_scale)``,
  ``state_dict``, ``load`` for ``load_state_dict``);
* ``backward``: it calls ``.backward(...)`` itself (``loss.backward()``, a scaled backward,
  ``accelerator.backward``);
* ``saves``: the checkpoints it writes with ``torch.save``: a parameter saved as it is
  (``torch.save(state, path)``) or a dict it builds (which parameters' ``state_dict()`` it
  holds: an optimizer's, a scaler's);
* ``returns``: ``GradScaler`` (a scaler factory), ``autocast`` (returns or, as a
  ``@contextmanager``, yields inside an autocast region) with its dtype when literal;
* ``calls``: the calls it makes, each with the parameters it forwards, so phase 2 composes
  facts through the call graph (a helper that forwards its ``state`` to another helper that
  saves it saves it too).

A summary depends only on the file's text: it is cached with the file's results. Everything
here is computed from the tree the model was built from, one extra pass over the kept
function bodies (statements and calls only).
"""

from __future__ import annotations

import ast
import bisect

from amplint.model.names import (
    SCALER_NAME, add_import, attr_classes, autocast_device, autocast_dtype, canonical, declared_attr_classes, declared_class,
    dotted, literal_dict, qualify, qualify_parts, state_owner,
)
from amplint.tokens import SUMMARY_TOKENS, match_rows

_SCALER_METHODS = {"scale", "unscale_", "step", "update", "state_dict", "load_state_dict"}
_OPTIMIZER_WORDS = ("optim", "opt")


class SaveFact:
    """One ``torch.save``: ``param`` (a parameter saved as is) or a dict with the parameters
    whose ``state_dict()`` it holds (``opt_params``/``scaler_params``), and whether it holds an
    optimizer state (``has_opt``) or anything scaler-like at all (``has_scaler``)."""

    __slots__ = ("param", "has_opt", "has_scaler", "opt_params", "scaler_params", "line", "owner_params", "state_params")

    def __init__(self, param=None, has_opt=False, has_scaler=False, opt_params=(), scaler_params=(), line=0, owner_params=(),
                 state_params=()):
        self.param = param
        self.has_opt = has_opt
        self.has_scaler = has_scaler
        self.opt_params = tuple(opt_params)
        self.scaler_params = tuple(scaler_params)
        self.line = line
        # parameters whose attribute's optimizer state it holds (``trainer.optimizer.state_dict()``)
        self.owner_params = tuple(owner_params)
        # every parameter (or ``self.<attr>``) whose state, or whose object, it holds, whatever its
        # name: the caller types them by the arguments it hands over (``make_state(o, epoch)``)
        self.state_params = tuple(state_params)

    def __repr__(self) -> str:
        return f"SaveFact(param={self.param!r}, opt={self.has_opt}, scaler={self.has_scaler}, line={self.line})"

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        if len(state) != len(self.__slots__):
            raise ValueError("a summary of another amplint version")  # the cache drops it
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)


class CallFact:
    """A call a function makes: the callee as written, qualified through the file's imports
    (``pkg.utils.save``; ``.utils.save`` for a relative import; ``self.m`` for a method of the
    same class), the parameters it forwards ``((position or keyword, param), ...)``, and whether
    it is made inside an enabled (or flag-enabled) autocast region (False; True; or the
    innermost region's ``device:dtype`` where literal, ``"cuda:float16"``)."""

    __slots__ = ("callee", "forwards", "in_autocast", "line", "dict_args", "declared")

    def __init__(self, callee, forwards=(), in_autocast=False, line=0, dict_args=(), declared=False):
        self.callee = callee
        self.forwards = tuple(forwards)
        self.in_autocast = in_autocast
        self.line = line
        self.dict_args = tuple(dict_args)  # (position or keyword, SaveFact of a dict built here)
        # the callee is a method of a class an annotation declares (`saver: Saver`): the object
        # may be of a derived class, so it holds only while no derived class redefines it
        self.declared = declared

    def __repr__(self) -> str:
        return f"CallFact({self.callee!r}, forwards={self.forwards!r}, in_autocast={self.in_autocast})"

    def __getstate__(self):
        return (self.callee, self.forwards, self.in_autocast, self.line, self.dict_args, self.declared)

    def __setstate__(self, state):
        self.callee, self.forwards, self.in_autocast, self.line, self.dict_args, self.declared = state


class FuncSummary:
    __slots__ = ("qualname", "params", "varkw", "scaler_ops", "backward", "saves", "returns", "returns_dtype", "calls", "line", "cls",
                 "returns_state", "clips", "builds_scaler")

    def __init__(self, qualname, params, varkw=False, line=0, cls=None):
        self.qualname = qualname
        self.params = list(params)
        self.varkw = varkw
        self.scaler_ops: dict[str, set[str]] = {}
        self.backward = False
        self.saves: list[SaveFact] = []
        self.returns: str | None = None
        self.returns_dtype: str | None = None
        self.calls: list[CallFact] = []
        self.line = line
        self.cls = cls
        # the checkpoint dict it returns (``return {"optimizer": optimizer.state_dict(), ...}``)
        self.returns_state: SaveFact | None = None
        self.clips = False  # calls torch.nn.utils.clip_grad_norm_/clip_grad_value_
        self.builds_scaler = False  # assigns a local `name = GradScaler(...)` (AMP302: built per call)

    def __repr__(self) -> str:
        return (f"FuncSummary({self.qualname!r}, params={self.params}, scaler_ops={self.scaler_ops}, "
                f"backward={self.backward}, saves={self.saves}, returns={self.returns!r}, calls={len(self.calls)})")

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        if len(state) != len(self.__slots__):
            raise ValueError("a summary of another amplint version")  # the cache drops it
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    def param_at(self, pos) -> str | None:
        if isinstance(pos, str):
            return pos if pos in self.params else None
        return self.params[pos] if 0 <= pos < len(self.params) else None

    @property
    def interesting(self) -> bool:
        return bool(self.scaler_ops or self.backward or self.saves or self.returns or self.calls or self.returns_state or self.clips)


class ClassFact:
    """A class: its bases as qualified through the file's imports, the ``self.<attr>`` it
    assigns an enabled ``GradScaler(...)`` in its methods, and the methods it defines (an
    inherited method runs for it only if it does not define its own)."""

    __slots__ = ("bases", "scaler_attrs", "methods", "line", "states", "wrappers", "injected")

    def __init__(self, bases=(), scaler_attrs=(), methods=(), line=0, states=(), wrappers=(), injected=()):
        self.bases = tuple(bases)
        self.scaler_attrs = tuple(scaler_attrs)
        self.methods = frozenset(methods)
        self.line = line
        self.states = frozenset(states)  # the self.<attr> whose state_dict() a method takes
        # (attr, qualified class): self.<attr> = SomethingScaler(...), a loss-scaler wrapper
        # candidate the project index resolves (timm's NativeScaler, MAE's NativeScalerWithGradNormCount)
        self.wrappers = tuple(wrappers)
        # self.<scaler> = <parameter> (``self.scaler = scaler`` in ``__init__``): a scaler made elsewhere
        self.injected = tuple(injected)

    def __repr__(self) -> str:
        return f"ClassFact(bases={self.bases}, scaler_attrs={self.scaler_attrs})"

    def __getstate__(self):
        return (self.bases, self.scaler_attrs, self.methods, self.line, self.states, self.wrappers, self.injected)

    def __setstate__(self, state):
        self.bases, self.scaler_attrs, self.methods, self.line, self.states, self.wrappers, self.injected = state


class FileSummary:
    """The summaries of one file's functions and its import bindings (local name ->
    qualified name), which the project index uses to resolve names re-exported through it.
    ``inert``: the top-level functions and classes the parser blanked out (amplint.parse): none
    holds a summary token, so each of them, and every method of such a class, does nothing a
    summary records; ``function`` answers for them with an empty summary."""

    __slots__ = ("functions", "imports", "inert", "classes")

    def __init__(self, functions=None, imports=None, inert=frozenset(), classes=None):
        self.functions: dict[str, FuncSummary] = {} if functions is None else functions
        self.imports: dict[str, str] = {} if imports is None else imports
        self.inert = inert
        # class qualname -> ClassFact (bases, scaler attributes, methods)
        self.classes: dict[str, ClassFact] = {} if classes is None else classes

    def __getstate__(self):
        return (self.functions, self.imports, self.inert, self.classes)

    def __setstate__(self, state):
        self.functions, self.imports, self.inert, self.classes = state

    def __repr__(self) -> str:
        return f"FileSummary({sorted(self.functions)}, inert={len(self.inert)})"

    def function(self, qual: str) -> FuncSummary | None:
        f = self.functions.get(qual)
        if f is None and qual.split(".", 1)[0] in self.inert:
            cls = qual.rsplit(".", 1)[0] if "." in qual else None
            f = FuncSummary(qual, (), varkw=True, cls=cls)  # parameters unknown: it records nothing
        return f


def summarise(tree: ast.Module, source: str | None = None, dropped: frozenset[str] = frozenset()) -> FileSummary:
    scope: dict[str, str] = {}
    for s in _top_imports(tree.body):
        add_import(scope, s)
    out = FileSummary(imports=dict(scope), inert=dropped)
    rows = match_rows(source, SUMMARY_TOKENS) if source is not None else None
    class_nodes = dict((qual, node) for node, qual in _classes(tree.body, ""))
    attrs_of: dict[str, dict[str, str]] = {}  # class -> self.<attr> made once by a project call

    def attrs(cls):  # computed on the first `self.<attr>.m(...)` call a method makes
        if cls not in attrs_of:
            attrs_of[cls] = attr_classes(class_nodes[cls], scope) if cls in class_nodes else {}
        return attrs_of[cls]

    declared_of: dict[str, dict[str, str]] = {}  # class -> self.<attr> whose class an annotation declares

    def declared_attrs(cls):
        if cls not in declared_of:
            declared_of[cls] = declared_attr_classes(class_nodes[cls], scope) if cls in class_nodes else {}
        return declared_of[cls]

    for node, qual, cls in _functions(tree.body, "", None):
        if rows is not None and not _holds_row(rows, node):
            out.functions[qual] = FuncSummary(qual, _params(node, cls), node.args.kwarg is not None, node.lineno, cls)
            continue
        out.functions[qual] = _Summariser(node, qual, cls, scope, out.functions, attrs=attrs if cls is not None else None,
                                              declared_attrs=declared_attrs).run()
    for qual, node in class_nodes.items():
        out.classes[qual] = _class_fact(node, scope, rows)
    # the module's own statements (a training script at top level): only what it calls
    top = _Summariser(None, MODULE, None, scope)
    top.block([s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))], False)
    if top.s.calls:
        out.functions[MODULE] = top.s
    return out


MODULE = "<module>"


def _holds_row(rows: list[int], node) -> bool:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    i = bisect.bisect_left(rows, start)
    return i < len(rows) and rows[i] <= (node.end_lineno or start)


def _params(node, cls) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    return names[1:] if cls is not None and names and not is_static else names


def _top_imports(body):
    for s in body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            yield s
        elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ == "TryStar":
            yield from _top_imports(s.body)
            yield from _top_imports(getattr(s, "orelse", []))
            for h in getattr(s, "handlers", []):
                yield from _top_imports(h.body)


def _functions(body, prefix, cls):
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield s, prefix + s.name, cls
        elif isinstance(s, ast.ClassDef):
            yield from _functions(s.body, prefix + s.name + ".", prefix + s.name)
        elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ == "TryStar":
            yield from _functions(s.body, prefix, cls)
            yield from _functions(getattr(s, "orelse", []), prefix, cls)


def _classes(body, prefix):
    for s in body:
        if isinstance(s, ast.ClassDef):
            yield s, prefix + s.name
            yield from _classes(s.body, prefix + s.name + ".")
        elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ == "TryStar":
            yield from _classes(s.body, prefix)
            yield from _classes(getattr(s, "orelse", []), prefix)


def _class_fact(node: ast.ClassDef, scope, rows=None) -> ClassFact:
    """Only methods holding a summary token (``Scaler``, ``state_dict``) are read for scaler
    attributes and states: the rest cannot build or save one."""
    bases = [q for b in node.bases if (q := qualify(b, [scope])) and not q.startswith(("torch.", "object"))]
    methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    attrs, states, wrappers, injected = [], set(), [], []
    for m in methods:
        if not m.args.args or (rows is not None and not _holds_row(rows, m)):
            continue
        me = m.args.args[0].arg
        params = {a.arg for a in [*m.args.args[1:], *m.args.kwonlyargs]}
        selves = {me}  # and, in a classmethod, the instance it builds (`optimizer = cls(...)`)
        if any(isinstance(d, ast.Name) and d.id == "classmethod" for d in m.decorator_list):
            selves |= {t.id for n in _walk_inner(m) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                       and isinstance(n.value.func, ast.Name) and n.value.func.id == me for t in n.targets if isinstance(t, ast.Name)}
        mscope = scope
        for n in _walk_inner(m):
            if isinstance(n, (ast.Import, ast.ImportFrom)):  # `from torch.cuda.amp import GradScaler` in the method
                if mscope is scope:
                    mscope = dict(scope)
                add_import(mscope, n)
                continue
            if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in params and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Attribute) and isinstance(n.targets[0].value, ast.Name)
                    and n.targets[0].value.id == me and SCALER_NAME.match(n.targets[0].attr) and n.targets[0].attr not in injected):
                injected.append(n.targets[0].attr)
            if (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "state_dict"
                and isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name) and n.func.value.value.id == me
            ):
                states.add(n.func.value.attr)
            if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
                continue
            q = qualify(n.value.func, [mscope])
            mine = [t.attr for t in n.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in selves]
            if q and not q.startswith("torch.") and "Scaler" in q.rsplit(".", 1)[-1] and canonical(q) != "GradScaler":
                wrappers.extend((a, q) for a in mine if (a, q) not in wrappers)
                continue
            if canonical(q) != "GradScaler" or any(
                k.arg == "enabled" and isinstance(k.value, ast.Constant) and k.value.value is False for k in n.value.keywords
            ):
                continue
            attrs.extend(a for a in mine if a not in attrs)
    return ClassFact(bases, attrs, [m.name for m in methods], node.lineno, states, wrappers, injected)


def _dtype_of(call: ast.Call, defaults: dict | None = None) -> str | None:
    """``device:dtype`` of an autocast call when both are literal (a parameter's literal
    default counts: ``def my_autocast(dtype=torch.float16)``), else None."""
    dev = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
    dt = next((k.value for k in call.keywords if k.arg == "dtype"), call.args[1] if len(call.args) >= 2 else None)
    if isinstance(dt, ast.Name) and defaults and dt.id in defaults:
        dt = defaults[dt.id]
    if not (isinstance(dev, ast.Constant) and isinstance(dev.value, str)) or dt is None:
        return None
    t = ast.unparse(dt)
    kind = "bfloat16" if t.endswith("bfloat16") else ("float16" if t.endswith(("float16", "half")) else None)
    return f"{dev.value}:{kind}" if kind else None


def _node_types():
    out, todo = set(), [ast.AST]
    while todo:
        c = todo.pop()
        out.add(c)
        todo.extend(c.__subclasses__())
    return out


# Nodes ``_calls_in`` descends into: every AST node type but the leaves (names, constants,
# contexts, operators), so a type test replaces two isinstance calls per child.
_INNER = frozenset(
    t for t in _node_types()
    if not issubclass(t, (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop))
)


def _walk_inner(node):
    """``ast.walk(node)`` without the leaves (names, constants, contexts, operators), as a list
    in the same breadth-first order: for a caller that looks only at inner nodes (assignments,
    calls) the same nodes in the same order, without a generator and two isinstance calls per
    child."""
    out = [node]
    push, inner = out.append, _INNER
    i = 0
    while i < len(out):
        n = out[i]
        i += 1
        for name in n._fields:
            v = getattr(n, name, None)
            if type(v) is list:
                for x in v:
                    if type(x) in inner:
                        push(x)
            elif type(v) in inner:
                push(v)
    return out


def _calls_in(node):
    """The calls inside an expression, outermost first (ast.walk without the leaves)."""
    out = []
    stack = [node]
    push, pop, inner, call = stack.append, stack.pop, _INNER, ast.Call
    while stack:
        n = pop()
        if type(n) is call:
            out.append(n)
        for name in n._fields:
            v = getattr(n, name, None)
            if type(v) is list:
                for x in reversed(v):
                    if type(x) in inner:
                        push(x)
            elif type(v) in inner:
                push(v)
    return out


class _Summariser:
    def __init__(self, node, qual, cls, module_scope, registry=None, outer=None, attrs=None, declared_attrs=None):
        self.node = node
        self.cls = cls
        self.attrs = attrs  # cls -> {self.<attr>: the project class that made it}, on demand
        self.declared_attrs = declared_attrs  # cls -> {self.<attr>: the class an annotation declares}, on demand
        self.registry = registry  # the file's summaries: nested helpers are entered too, by qualified name
        self.outer = outer  # the enclosing function's summariser: its helpers are callable here (closures)
        if node is None:  # the module body
            node = ast.FunctionDef(name=qual, args=ast.arguments([], [], None, [], [], None, []), body=[], decorator_list=[], lineno=1)
        args = node.args
        allargs = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        names = [a.arg for a in allargs]
        self.self_name = names[0] if cls is not None and names and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list) else None
        params = names[1:] if self.self_name else names
        self.s = FuncSummary(qual, params, varkw=args.kwarg is not None, line=node.lineno, cls=cls)
        self.scope = dict(module_scope)
        self.scopes = [self.scope]  # for qualify (the dict itself grows with function-level imports)
        self.params = set(params)
        self.contextmanager = any("contextmanager" in ast.unparse(d) for d in node.decorator_list)
        pos = [*args.posonlyargs, *args.args]
        self.defaults = {a.arg: d for a, d in zip(pos[len(pos) - len(args.defaults):], args.defaults)}
        self.defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        self.declared = {a.arg: q for a in allargs if a.annotation is not None and a.arg in self.params
                         and (q := declared_class(a.annotation, module_scope))}  # parameter -> annotated class
        if self.node is None:
            self.node = node
        self.nested: dict[str, FuncSummary] = {}  # helpers defined in the body, inlined where called
        self.instances: dict[str, str | None] = {}  # local -> qualified call that made it (None: assigned twice)
        self.scaler_locals: set[str] = set()  # locals last assigned a GradScaler(...)
        self.dicts: dict[str, list[ast.expr]] = {}  # local name -> values put into it
        self.escaped: set[str] = set()  # dicts handed to other code before a save (it may add the scaler)

    def run(self) -> FuncSummary:
        self.block(self.node.body, False)
        return self.s

    def ref(self, node) -> str | None:
        """A parameter name or ``self.<attr>`` for ``node``, else None."""
        if isinstance(node, ast.Name) and node.id in self.params:
            return node.id
        if (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and self.self_name and node.value.id == self.self_name
        ):
            return "self." + node.attr
        return None

    def block(self, stmts, in_ac) -> None:
        for st in stmts:
            self.stmt(st, in_ac)

    def stmt(self, st, in_ac) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qual = f"{self.s.qualname}.{st.name}"
            inner = _Summariser(st, qual, None, self.scope, self.registry, self).run()
            self.nested[st.name] = inner
            if self.registry is not None and qual not in self.registry:
                self.registry[qual] = inner
            return
        if isinstance(st, ast.ClassDef):
            return
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            add_import(self.scope, st)
            return
        if isinstance(st, (ast.With, ast.AsyncWith)):
            ac = in_ac
            for item in st.items:
                self.expr(item.context_expr, in_ac)
                e = item.context_expr
                q = qualify(e.func, [self.scope]) if isinstance(e, ast.Call) else None
                if canonical(q) == "autocast":
                    enabled = next((k.value for k in e.keywords if k.arg == "enabled"), None)
                    if not (isinstance(enabled, ast.Constant) and enabled.value is False):
                        dev = autocast_device(e, q)
                        dt = autocast_dtype(e, q, dev)
                        ac = f"{dev}:{dt}" if dev and dt else True  # "cuda:float16"; True: dtype not known
                        if self.contextmanager and any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(st)):
                            self.s.returns, self.s.returns_dtype = "autocast", _dtype_of(e, self.defaults)
            self.block(st.body, ac)
            return
        if isinstance(st, ast.Return) and st.value is not None:
            self._returns(st.value)
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            t = st.targets[0]
            if isinstance(t, ast.Name):  # a local made once by a call: its class, for its methods
                q = qualify(st.value.func, [self.scope]) if isinstance(st.value, ast.Call) else None
                if q and canonical(q) == "GradScaler":
                    self.scaler_locals.add(t.id)
                    self.s.builds_scaler = True
                else:
                    self.scaler_locals.discard(t.id)
                if t.id in self.instances or t.id in self.params or not q or q.startswith("torch."):
                    self.instances[t.id] = None
                else:
                    self.instances[t.id] = q
            if isinstance(t, ast.Name) and literal_dict(st.value) is not None:
                self.dicts[t.id] = list(literal_dict(st.value).values)
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in self.dicts:
                self.dicts[t.value.id].append(st.value)
        for name in st._fields:  # ast.iter_child_nodes, inlined: the expressions of the statement
            v = getattr(st, name, None)
            if type(v) is list:
                for child in v:
                    if isinstance(child, ast.expr):
                        self.expr(child, in_ac)
            elif isinstance(v, ast.expr):
                self.expr(v, in_ac)
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                self.block(sub, in_ac)
        for h in getattr(st, "handlers", []) or []:
            self.block(h.body, in_ac)
        for case in getattr(st, "cases", []) or []:
            self.block(case.body, in_ac)

    def _returns(self, value) -> None:
        if isinstance(value, ast.IfExp):
            self._returns(value.body)
            self._returns(value.orelse)
            return
        if literal_dict(value) is not None or (isinstance(value, ast.Name) and value.id in self.dicts):
            fact = self._dict_fact(value, value.lineno)  # return {"optimizer": optimizer.state_dict(), ...}
            if fact is not None and (fact.has_opt or fact.state_params):
                self.s.returns_state = fact
            return
        if isinstance(value, ast.Tuple):  # return model, scaler: a factory of several objects
            at = [i for i, v in enumerate(value.elts) if (isinstance(v, ast.Name) and v.id in self.scaler_locals) or (
                isinstance(v, ast.Call) and canonical(qualify(v.func, [self.scope])) == "GradScaler")]
            if len(at) == 1 and self.s.returns in (None, f"GradScaler@{at[0]}"):
                self.s.returns = f"GradScaler@{at[0]}"
            elif self.s.returns is not None and self.s.returns.startswith("GradScaler@"):
                self.s.returns = None  # returns do not agree: unknown
            return
        if isinstance(value, ast.Call):
            c = canonical(qualify(value.func, [self.scope]))
            if c == "GradScaler":
                self.s.returns = "GradScaler"
            elif c == "autocast":
                self.s.returns, self.s.returns_dtype = "autocast", _dtype_of(value, self.defaults)

    def expr(self, node, in_ac) -> None:
        for n in _calls_in(node):
            func = n.func
            if isinstance(func, ast.Attribute):
                r = self.ref(func.value)
                if r is not None and func.attr in _SCALER_METHODS:
                    op = {"unscale_": "unscale", "load_state_dict": "load"}.get(func.attr, func.attr)
                    if op == "update" and (n.args or n.keywords):
                        op = "update_value"
                    self.s.scaler_ops.setdefault(r, set()).add(op)
                if func.attr in ("backward", "manual_backward"):
                    self.s.backward = True
                if func.attr == "update" and isinstance(func.value, ast.Name) and func.value.id in self.dicts:
                    self.dicts[func.value.id].extend(a for a in n.args)
            parts = dotted(func)
            q = qualify_parts(parts, self.scopes) if parts is not None else None
            if canonical(q) == "clip":
                self.s.clips = True
                continue
            if q == "torch.save" and n.args:
                self._save(n.args[0], n.lineno)
                continue
            if not self.dicts:
                self._call(n, func, q, in_ac, parts)
                continue
            handed = [a.id for a in [*n.args, *(kw.value for kw in n.keywords)] if isinstance(a, ast.Name) and a.id in self.dicts]
            try:
                self._call(n, func, q, in_ac, parts)
            finally:
                self.escaped.update(handed)  # what the callee did to the dict is not known here

    def _helper(self, name: str) -> FuncSummary | None:
        """The helper ``name`` defined in this function or an enclosing one (a sibling
        defined before this function, called through the closure)."""
        s = self
        while s is not None:
            if name in s.nested:
                return s.nested[name]
            s = s.outer
        return None

    def _call(self, n, func, q, in_ac, parts=None) -> None:
        inner = self._helper(func.id) if isinstance(func, ast.Name) else None
        if inner is not None:
            self._inline(n, inner)
            return
        callee, of_attr = q, False
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.self_name:
            callee = "self." + func.attr
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and isinstance(func.value.value, ast.Name)
              and func.value.value.id == self.self_name and self.attrs is not None
              and func.value.attr in (made := self.attrs(self.cls))):
            callee, of_attr = f"{made[func.value.attr]}.{func.attr}", True  # self.ckpt = CheckpointManager(...); self.ckpt.save(...)
        if callee is None or callee.startswith("torch."):
            return
        parts = parts or ()
        declared = False
        if len(parts) == 3 and parts[0] == self.self_name and not of_attr and self.declared_attrs is not None and (
                kind := self.declared_attrs(self.cls).get(parts[1])):
            callee, declared = f"{kind}.{parts[2]}", True  # self.model: LanguageModel = model; self.model.save_checkpoint(...)
        elif len(parts) > 1 and not callee.startswith("self.") and not of_attr and parts[0] not in self.scope:
            made = self.instances.get(parts[0]) if len(parts) == 2 else None
            if made is None and len(parts) == 2 and parts[0] not in self.instances and parts[0] in self.declared:
                made, declared = self.declared[parts[0]], True  # def train(..., saver: Saver): saver.save(...)
            if made is None:
                return  # a method of a local object: nothing the index can resolve
            callee = f"{made}.{parts[1]}"  # saver = Saver(args); saver.save_model(...)
        fw, dicts = [], []
        for pos, a in [*enumerate(n.args), *((kw.arg, kw.value) for kw in n.keywords if kw.arg)]:
            r = self.ref(a)
            if r is not None:
                fw.append((pos, r))
            elif literal_dict(a) is not None or (isinstance(a, ast.Name) and a.id in self.dicts):
                fact = self._dict_fact(a, n.lineno)  # a checkpoint dict handed to a helper
                if fact is not None:
                    dicts.append((pos, fact))
        self.s.calls.append(CallFact(callee, fw, in_ac, n.lineno, dicts, declared))

    def _inline(self, n, inner: FuncSummary) -> None:
        """A call of a helper defined in this function: what it does to the arguments it is
        given, it does to this function's parameters."""
        self.s.backward = self.s.backward or inner.backward
        for pos, a in [*enumerate(n.args), *((kw.arg, kw.value) for kw in n.keywords if kw.arg)]:
            r, p = self.ref(a), inner.param_at(pos)
            if r is None or p is None:
                continue
            if p in inner.scaler_ops:
                self.s.scaler_ops.setdefault(r, set()).update(inner.scaler_ops[p])
            if any(sv.param == p for sv in inner.saves) and not r.startswith("self."):
                self.s.saves.append(SaveFact(param=r, line=n.lineno))

    def _save(self, arg, line) -> None:
        r = self.ref(arg)
        if r is not None and not r.startswith("self."):
            self.s.saves.append(SaveFact(param=r, line=line))
            return
        fact = self._dict_fact(arg, line)
        if fact is not None:
            self.s.saves.append(fact)

    def _dict_fact(self, arg, line) -> SaveFact | None:
        values: list[ast.expr] = []
        if literal_dict(arg) is not None:
            values = list(literal_dict(arg).values)
        elif isinstance(arg, ast.Name) and arg.id in self.dicts:
            if arg.id in self.escaped:
                return None  # other code saw the dict first: whether it adds the scaler is unknown
            values = self.dicts[arg.id]
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "state_dict":
            values = [arg]  # torch.save(optimizer.state_dict(), path): one state per file
        else:
            return None
        opt_params, scaler_params, owners, has_opt, has_scaler, states = [], [], [], False, False, []
        for v in values:
            if (r := self.ref(v)) is not None:
                states.append(r)  # the object itself: a pickled GradScaler keeps its state
            text = ast.unparse(v).lower() if v is not None else ""
            if "scale" in text:
                has_scaler = True
            for n in ast.walk(v) if v is not None else ():
                base = state_owner(n)
                if base is not None:
                    btext = ast.unparse(base).lower().rsplit(".", 1)[-1]
                    r = self.ref(base)
                    if r:
                        states.append(r)
                    if "scaler" in btext:
                        has_scaler = True
                        if r:
                            scaler_params.append(r)
                    elif any(w in btext for w in _OPTIMIZER_WORDS) and "sched" not in btext:
                        has_opt = True
                        if r:
                            opt_params.append(r)
                        elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in self.params:
                            owners.append(base.value.id)  # trainer.optimizer.state_dict()
        return SaveFact(None, has_opt, has_scaler, opt_params, scaler_params, line, owners, states)

