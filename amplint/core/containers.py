"""What a checkpoint dict holds where it is saved or returned (issue 31's value flow for
containers, AMP301).

For the dict-valued locals of one function the analysis runs forward over the function's CFG
and keeps, per name, the *versions* it may hold: the dict it grew from (a ``{...}`` or
``dict(k=v)`` literal, or a parameter) and the entries the statements on that path added
(``d["optimizer"] = ...``, ``d.update({...})``, ``d.setdefault(k, v)``). A local alias of a
``state_dict()`` call (``opt_state = optimizer.state_dict()``) stored into the dict is replaced
by the call. A dict handed to a call we do not read (a project function whose summary saves
that parameter only reads it), updated from something else, or rebound
to another value is Top: ``contents`` answers None there, and no rule reports it.
"""

from __future__ import annotations

import ast

from amplint.core.cfg import of
from amplint.model.names import literal_dict

TOP = "top"
SAVERS = frozenset(("torch.save",))
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class Contents:
    """A dict as some path may hold it: ``values`` (every value on any path, aliases resolved),
    ``text`` (the literal and the added keys and values, as written) and ``identity`` (the
    literal or parameter it grew from: one checkpoint however many saves write it)."""

    __slots__ = ("values", "text", "identity")

    def __init__(self, values, text, identity):
        self.values, self.text, self.identity = values, text, identity


class DictFlow:
    def __init__(self, model, func):
        self.model, self.func = model, func
        self.cfg = of(func)
        self.nodes: dict[int, ast.AST] = {}
        self.before: dict[int, dict] = {}
        self._sites = {id(c.node): c for c in func.calls}
        self._solve()

    # ------------------------------------------------------------------ transfer
    def _header(self, s):
        if isinstance(s, (ast.If, ast.While)):
            return [s.test]
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return [s.iter]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            return [i.context_expr for i in s.items]
        if isinstance(s, ast.Match):
            return [s.subject]
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try), *_NESTED)):
            return []
        return [s]

    def _value(self, v, state):
        """A stored value, an alias of a ``state_dict()`` call resolved."""
        if isinstance(v, ast.Name):
            al = state.get("=" + v.id)
            if al and TOP not in al:
                return [self.nodes[i] for i in sorted(al)]
        return [v]

    def _add(self, state, name, entries):
        vs = state.get(name)
        if not vs or TOP in vs:
            return
        for k, v in entries:
            self.nodes[id(v)] = v
        add = frozenset((k, id(v)) for k, v in entries)
        state[name] = frozenset((o, e | add) for o, e in vs)

    def _transfer(self, s, state: dict) -> dict:
        state = dict(state)
        for root in self._header(s):
            for n in _walk(root):
                if isinstance(n, ast.Call):
                    self._call(n, state)
            if isinstance(root, ast.Assign) and len(root.targets) == 1:
                self._assign(root.targets[0], root.value, state)
            elif isinstance(root, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (root.targets if isinstance(root, ast.Assign) else [root.target]):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name) and x.id in state:
                            state[x.id] = frozenset((TOP,))
        return state

    def _call(self, n, state):
        fn = n.func
        if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) and fn.value.id in state:
            name = fn.value.id
            if fn.attr == "update":
                d = literal_dict(n.args[0]) if len(n.args) == 1 and not n.keywords else None
                if d is None and not n.args and n.keywords and all(k.arg for k in n.keywords):
                    d = ast.Dict(keys=[ast.Constant(k.arg) for k in n.keywords], values=[k.value for k in n.keywords])
                if d is None or any(k is None for k in d.keys):
                    state[name] = frozenset((TOP,))
                else:
                    self._add(state, name, [(ast.unparse(k), x) for k, v in zip(d.keys, d.values) for x in self._value(v, state)])
            elif fn.attr == "setdefault" and len(n.args) == 2:
                self._add(state, name, [(ast.unparse(n.args[0]), x) for x in self._value(n.args[1], state)])
        for pos, a in [*enumerate(n.args), *((k.arg, k.value) for k in n.keywords)]:
            if isinstance(a, ast.Name) and a.id in state and not a.id.startswith("="):
                if self._saved_by(n, pos):
                    continue
                state[a.id] = frozenset((TOP,))  # handed to other code: what it adds is unknown

    def _saved_by(self, n, pos) -> bool:
        """Is ``n`` ``torch.save``, or a call of a project function whose summary
        saves the parameter it is handed the dict in (``save_checkpoint(ckpt, ...)``)? Saving
        reads the dict and adds nothing to it."""
        site = self._sites.get(id(n))
        if site is not None and site.qualname in SAVERS:
            return True
        hit = self.model.project_callee(site) if site is not None and pos is not None else None
        if hit is None:
            return False
        p = hit[1].param_at(pos)
        return p is not None and p in hit[2].saves_param

    def _assign(self, t, v, state):
        if isinstance(t, ast.Name):
            d = literal_dict(v)
            if d is not None:  # ``**other`` stays a value of its own (an unknown dict's entries)
                self.nodes[id(d)] = d
                state[t.id] = frozenset(((("lit", id(d)), frozenset()),))
                self._add(state, t.id, [(ast.unparse(k) if k is not None else "**", x) for k, x0 in zip(d.keys, d.values) for x in self._value(x0, state)])
                return
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict":
                self.nodes[id(v)] = v
                state["=" + t.id] = frozenset((id(v),))
                return
            if t.id in state:
                state[t.id] = frozenset((TOP,))
            if "=" + t.id in state:
                state["=" + t.id] = frozenset((TOP,))
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in state:
            self._add(state, t.value.id, [(ast.unparse(t.slice), x) for x in self._value(v, state)])

    # ------------------------------------------------------------------ solving
    def _solve(self) -> None:
        cfg = self.cfg
        start = {p: frozenset(((("param", p), frozenset()),)) for p in self.func.params}
        into = {id(cfg.entry): start}
        work = [cfg.entry]
        while work:
            n = work.pop()
            out = self._transfer(n.stmt, into[id(n)]) if n.stmt is not None else into[id(n)]
            for s in n.succ:
                old = into.get(id(s))
                new = out if old is None else _join(old, out)
                if new != old:
                    into[id(s)] = new
                    work.append(s)
        self.before = {id(n.stmt): into[id(n)] for n in cfg.nodes if n.stmt is not None and id(n) in into}

    # ------------------------------------------------------------------ queries
    def alias(self, stmt, name: str) -> list | None:
        """The ``state_dict()`` calls the local ``name`` may alias on entry to ``stmt``
        (``opt_state = optimizer.state_dict()``); None when it may hold anything else."""
        al = self.before.get(id(stmt), {}).get("=" + name)
        if not al or TOP in al:
            return None
        return [self.nodes[i] for i in sorted(al)]

    def contents(self, stmt, name: str) -> Contents | None:
        """What ``name`` may hold on entry to ``stmt``; None when unknown or not a dict."""
        vs = self.before.get(id(stmt), {}).get(name)
        if not vs or TOP in vs:
            return None
        vs = [v for v in vs if v[0][0] == "lit" or v[1]]  # a parameter nothing was added to
        if not vs:
            return None
        values, texts, seen = [], [], set()
        origins = sorted({o for o, _e in vs if o[0] == "lit"}, key=lambda o: getattr(self.nodes[o[1]], "lineno", 0))
        own = set()
        for o in origins:
            d = self.nodes[o[1]]
            texts.append(self.model.text(d))
            own |= {id(x) for x in d.values}
        for _o, entries in vs:
            for k, i in sorted(entries, key=lambda e: (getattr(self.nodes[e[1]], "lineno", 0), e[0])):
                if i not in seen:
                    seen.add(i)
                    values.append(self.nodes[i])
                    if i not in own:
                        texts.append(k + " " + ast.unparse(self.nodes[i]))
        identity = origins[0][1] if origins else (id(self.func.node), name)
        return Contents(values, " ".join(texts), identity)


def _join(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] | v if k in out else v
    return out


def _walk(root):
    """The nodes of a statement (or expression), not of functions or classes defined in it,
    in evaluation order closely enough: a call's arguments before the call."""
    out, todo = [], [root]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(ch for ch in ast.iter_child_nodes(n) if not isinstance(ch, _NESTED))
    return reversed(out)
