"""Phase 2 of project mode: the project index. It maps module names to files, resolves the
calls a function makes (absolute imports against the project's source roots, relative
imports, ``__init__`` re-exports, methods of the same class) and composes the per-function
summaries of phase 1 bottom-up through the call graph (bounded depth, recursion-safe).

What does not resolve stays unknown, and unknown never produces a finding. Phase 1's
summaries are complete (a masked parse keeps every definition a summary records and names
the ones it blanked out); a file phase 1 did not summarise (the byte screen dropped it) is
summarised on demand the first time a resolved call needs one of its functions.
"""

from __future__ import annotations

import ast
import os
import re

from amplint.lazyre import lazy
from amplint.fspath import absolute
from amplint.model.names import WRAPPER_CLASSES, add_import
from amplint.screen import may_restore_optimizer
from amplint.model.summary import MODULE, FileSummary, FuncSummary, SaveFact, summarise

MAX_DEPTH = 4


class Facts:
    """A function's composed facts: what it and the functions it calls (up to MAX_DEPTH) do."""

    __slots__ = ("saves_param", "dict_saves", "scaler_ops", "backward", "returns", "returns_dtype", "self_ops", "returns_state", "clips")

    def __init__(self, s: FuncSummary):
        self.saves_param = {x.param for x in s.saves if x.param}
        self.dict_saves = [x for x in s.saves if x.param is None]
        self.scaler_ops = {k: set(v) for k, v in s.scaler_ops.items()}
        # ``self.<attr>`` -> ops, with those of the methods it calls on ``self`` (the same object):
        # ``__init__`` calling ``self.resume()``, which loads ``self.scaler``
        self.self_ops = {k: set(v) for k, v in s.scaler_ops.items() if k.startswith("self.")}
        self.backward = s.backward
        self.returns = s.returns
        self.returns_dtype = s.returns_dtype
        self.returns_state = s.returns_state
        self.clips = s.clips


def module_name(path: str, roots: list[str]) -> str | None:
    """The dotted module name of ``path`` under the first source root that holds it."""
    ap = absolute(path)
    for root in roots:  # absolute and normalised (ProjectIndex): a prefix test, no relpath
        prefix = root if root.endswith(os.sep) else root + os.sep
        if not ap.startswith(prefix):
            continue
        rel = ap[len(prefix):]
        rel = rel[:-3] if rel.endswith(".py") else (rel[:-4] if rel.endswith(".pyi") else None)
        if rel is None:
            return None
        parts = rel.replace(os.sep, "/").split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None


def _read_regular(path: str) -> bytes | None:
    """The bytes of a regular file, else None: a FIFO, a device or a link to one named x.py
    (``/dev/zero``) must neither hang nor exhaust the run."""
    from amplint.source import SourceError, read_bytes

    try:
        return read_bytes(path)[0]
    except SourceError:
        return None


class _Importer:
    """How a file that imports top-level function ``qual`` of module file ``ap`` by name and
    calls it reads: byte finds first (the call, the module's last name, ``import``), then
    ``from X import ..., qual`` (parenthesised over lines too) on the decoded text."""

    def __init__(self, index: "ProjectIndex", ap: str, qual: str):
        mod = index.module_of.get(ap) or os.path.splitext(os.path.basename(ap))[0]
        self.ap, self.qual = ap, qual
        self.called = (qual + "(").encode("utf-8", "surrogateescape")
        self.last = mod.rsplit(".", 1)[-1].encode("utf-8", "surrogateescape")
        self.pattern = re.compile(
            r"^[ \t]*from[ \t]+[\w.]+[ \t]+import\b(?:[^\n(]*|[ \t]*\([^)]*)\b" + re.escape(qual) + r"\b", re.MULTILINE)

    def text_of(self, f: str, data: bytes) -> str | None:
        """``data`` (the bytes of project file ``f``) decoded when ``f`` is such an importer."""
        if f == self.ap or self.called not in data or self.last not in data or b"import" not in data:
            return None
        from amplint.source import SourceError, decode

        try:
            text = decode(data)[0]
        except SourceError:
            return None
        return text if self.pattern.search(text) else None


# ``from X import a, b`` / ``import X``, anywhere (in functions too; in a notebook's JSON too)
_IMPORTED = lazy(rb"\bfrom\s+(\.*[\w.]*)\s+import\s+(?:\*|\(?\s*([\w]+(?:\s*,\s*\w+)*))|\bimport\s+([\w.]+)")
_IDENT = lazy(r"[A-Za-z_]\w*")


class ProjectIndex:
    def __init__(self, roots: list[str], files: list[str], summaries: dict[str, FileSummary] | None = None,
                 texts: dict[str, str] | None = None):
        self.roots = [os.path.abspath(r) for r in roots]
        self.by_module: dict[str, str] = {}
        self.module_of: dict[str, str] = {}
        for f in files:
            ap = absolute(f)
            m = module_name(ap, self.roots)
            if m is not None:
                self.by_module.setdefault(m, ap)
                self.module_of[ap] = m
        self._heads = {m.split(".", 1)[0] for m in self.by_module}  # top-level packages of the project
        self._summaries = {absolute(k): v for k, v in (summaries or {}).items()}
        self._texts = {absolute(k): v for k, v in (texts or {}).items()}
        self._full: dict[str, FileSummary | None] = {}
        self._facts: dict[tuple[str, str], Facts | None] = {}
        self.reads: set[str] = set()  # files whose summaries a query used (for cache keys)
        # does any file of the project restore an optimizer state (resume training)? None: not
        # known (one file alone); set by the pipeline from every file's bytes
        self.restores_optimizer: bool | None = None
        # absolute paths of the files that may save or load a scaler state (project mode only)
        self.scaler_state_files: set[str] | None = None
        # absolute paths of the files that may restore an optimizer state, and of every file of
        # the project (project mode only): which scripts can resume (script_restores)
        self.restoring_files: set[str] | None = None
        self.project_files: list[str] = []
        self._script_restores: dict[str, bool | None] = {}
        self._used_cache: dict[str, list | None] = {}
        self._mentions: dict[str, set[str]] = {}  # module stem -> project files naming it
        self._epoch_callers: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (path, function) -> epoch_callers
        self._subclasses: dict[tuple[str, str], list] | None = None  # (path, class) -> scaler-holding subclasses
        self._siblings: dict[tuple[str, tuple[str, ...]], tuple[str, int] | None] = {}  # (dir, import) -> module beside/above

    # ------------------------------------------------------------------ summaries
    def summary(self, path: str) -> FileSummary | None:
        """Phase 1's summary of ``path``; a file phase 1 did not summarise (the byte screen
        dropped it: a checkpoint helper holds no AMP token) is summarised here, once."""
        ap = absolute(path)
        s = self._summaries.get(ap)
        if s is not None:
            return s
        if ap not in self._full:
            self._full[ap] = self._summarise_file(ap)
        return self._full[ap]

    def _summarise_file(self, ap: str) -> FileSummary | None:
        text = self._texts.get(ap)
        if text is None:
            from amplint.source import SourceError, read_source

            try:
                text = read_source(ap).text
            except SourceError:
                return None
        from amplint.parse import parse_masked

        try:
            tree, dropped = parse_masked(text, ap) or (ast.parse(text), frozenset())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return summarise(tree, source=text, dropped=dropped)

    # ------------------------------------------------------------------ scripts
    def script_restores(self, path: str) -> bool | None:
        """Can the process that runs ``path`` restore an optimizer state? ``path`` is a script
        (a notebook, or a module no project file imports): what runs with it is the file and
        the project modules it imports, directly or through each other (any ``import``
        statement, in functions too). An imported module's restore counts only where that code
        can run: at import (module level), or in a top-level function or class that the
        imported code refers to (a name, an attribute, a string such as ``getattr``'s, an
        ``import ... as`` alias that is used; an import alone is not a use) or that a decorator
        may register. False when none of them may restore one; None when not known: not a
        script, or an import that may be the project's does not resolve."""
        ap = absolute(path)
        if ap not in self._script_restores:
            self._script_restores[ap] = self._closure_restores(ap) if self.restoring_files is not None else None
        return self._script_restores[ap]

    def _closure_restores(self, ap: str) -> bool | None:
        if not self._standalone(ap):
            return None
        todo, seen, restoring = [ap], {ap}, []
        while todo:
            p = todo.pop()
            if p in self.restoring_files:
                if p == ap:
                    return True  # the script's own code: it is the file that runs
                restoring.append(p)
            data = _read_regular(p)
            if data is None:
                return None
            for m in _IMPORTED.finditer(data):
                first = (m.group(1) or m.group(3)).decode("ascii", "replace")
                names = [first]
                if m.group(2):  # from X import a, b: X.a may be a module
                    sep = "" if first.endswith(".") else "."
                    names += [first + sep + a.strip() for a in m.group(2).decode("ascii", "replace").split(",") if a.strip()]
                for mod in names:
                    if mod != "." * len(mod):
                        mod = mod.rstrip(".")
                    hit, local = self._module_file(p, mod)
                    if hit is None:
                        if local:
                            return None  # the project's own module, not found: unknown
                        continue
                    if hit not in seen:
                        seen.add(hit)
                        todo.append(hit)
        if not restoring:
            return False
        per_file = {p: self._names_by_stmt(p) for p in seen}
        if any(v is None for v in per_file.values()):
            return True  # unreadable: it may call anything
        for p in restoring:
            defs = self._restoring_defs(p)
            if defs is None:
                return True
            for name in defs:  # used by any code of the closure but the definition's own
                if any(name in names for q, stmts in per_file.items() for d, names in stmts if q != p or d != name):
                    return True
        return False

    def _names_by_stmt(self, ap: str) -> list[tuple[str | None, set[str]]] | None:
        """The names each top-level statement of ``ap`` refers to, with the name it defines (a
        function or class; else None): names, attributes, identifier strings and the imported
        names behind the aliases it uses (not the names an import lists). A notebook, or a file
        that does not parse: every identifier of its text, as one statement. None: unreadable."""
        if ap in self._used_cache:
            return self._used_cache[ap]
        data = _read_regular(ap)
        out = None
        if data is not None:
            text = data.decode("utf-8", "replace")
            try:
                tree = None if ap.endswith(".ipynb") else ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            if tree is None:
                out = [(None, set(_IDENT.findall(text)))]
            else:
                out, aliases = [], []
                for st in tree.body:
                    names: set[str] = set()
                    for n in ast.walk(st):
                        t = type(n)
                        if t is ast.Name:
                            names.add(n.id)
                        elif t is ast.Attribute:
                            names.add(n.attr)
                        elif t is ast.Constant and type(n.value) is str and n.value.isidentifier():
                            names.add(n.value)
                        elif t is ast.ImportFrom:
                            aliases += [(a.name, a.asname) for a in n.names if a.asname]
                    defines = st.name if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None
                    out.append((defines, names))
                every = set().union(*(names for _, names in out)) if out else set()
                out.append((None, {name for name, asname in aliases if asname in every}))
        self._used_cache[ap] = out
        return out

    def _restoring_defs(self, ap: str) -> set[str] | None:
        """The top-level functions and classes of ``ap`` whose code may restore an optimizer
        state (the byte test that marks a restoring file, on each definition's lines). None
        when a restore may run at import or cannot be placed: a module-level statement, a
        decorated definition (a registry may call it by no name), or no parse."""
        data = _read_regular(ap)
        if data is None:
            return None
        try:
            tree = ast.parse(data.decode("utf-8", "replace"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        lines = data.splitlines(keepends=True)
        out: set[str] = set()
        for st in tree.body:
            start = min([st.lineno, *(d.lineno for d in getattr(st, "decorator_list", ()))])
            if not may_restore_optimizer(b"".join(lines[start - 1 : st.end_lineno or st.lineno])):
                continue
            if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or st.decorator_list:
                return None
            out.add(st.name)
        return out or None  # flagged as a whole but by no definition alone: keep the file's verdict

    def _module_file(self, ap: str, mod: str) -> tuple[str | None, bool]:
        """The project file module ``mod`` (as imported in ``ap``) is, and whether an
        unresolved name may still be the project's (relative, or a top-level package or a
        module beside the file of that name)."""
        if mod.startswith("."):
            full = self._absolute(ap, mod)
            if full is None:
                return None, True
            mod = full
        if not mod:
            return None, False
        hit = self.by_module.get(mod)
        if hit is not None:
            return hit, True
        parts = mod.split(".")
        sib = self._sibling_module(ap, os.path.dirname(ap), [*parts, "_"])
        if sib is not None and sib[1] == len(parts):
            return sib[0], True
        head = parts[0]
        d = os.path.dirname(ap)
        local = head in self._heads or os.path.exists(os.path.join(d, head + ".py")) or os.path.isdir(os.path.join(d, head))
        if local and len(parts) > 1:  # from pkg import name: pkg itself (its __init__) is the module
            return self._module_file(ap, ".".join(parts[:-1]))
        return None, local

    def _standalone(self, ap: str) -> bool:
        """A notebook, or a ``.py`` file whose top level runs its own functions or classes
        (``if __name__ == "__main__": main()``) or trains or saves there (a script written at top level) and
        whose module name no other project file mentions (as a whole word, anywhere: an
        import, ``importlib``, a comment): nothing imports it, so it runs as a script."""
        if ap.endswith(".ipynb"):
            return True
        stem = os.path.splitext(os.path.basename(ap))[0]
        if stem == "__init__" or not stem.isidentifier():
            return False
        summ = self.summary(ap)
        top = summ.functions.get(MODULE) if summ is not None else None
        if top is None:
            return False
        own = {q for q in summ.functions if "." not in q and not q.startswith("<")} | set(summ.inert) | {
            q for q in summ.classes if "." not in q}
        if not (top.backward or top.saves or top.scaler_ops or any(c.callee.split(".", 1)[0] in own for c in top.calls)):
            return False  # its top level runs none of its own code: a library module
        return stem not in self.mentioned([stem], ap)

    def mentioned(self, stems, ap: str | None = None) -> set[str]:
        """The ``stems`` some project file other than ``ap`` names as a whole word: one read
        of each project file for all the stems not asked about before, memoised per stem."""
        todo = [st for st in stems if st not in self._mentions]
        if todo:
            words = {st: (st.encode(), re.compile(rb"\b" + re.escape(st.encode()) + rb"\b")) for st in todo}
            found: dict[str, set[str]] = {st: set() for st in todo}
            for f in self.project_files:
                data = _read_regular(f)
                if data is None:
                    continue
                for st, (key, word) in words.items():
                    if key in data and word.search(data):
                        found[st].add(f)
            for st in todo:
                self._mentions[st] = found[st]
        return {st for st in stems if self._mentions[st] - {ap}}

    # ------------------------------------------------------------------ resolution
    def resolve(self, path: str, callee: str, cls: str | None = None, _depth: int = 0) -> tuple[str, FuncSummary] | None:
        """The project function ``callee`` (as qualified in ``path``) denotes, or None."""
        return self._resolve(path, callee, cls, _depth, self._lookup)

    def imported_by_name(self, functions) -> set[tuple[str, str]]:
        """The ``(path, qual)`` of ``functions`` (top-level functions) that another project
        file imports by name from their module and calls (``from engine import
        train_one_epoch`` ... ``train_one_epoch(``): one read of the project for all of them."""
        want = [_Importer(self, absolute(path), qual) for path, qual in functions]
        out: set[tuple[str, str]] = set()
        for f in self.project_files:
            if len(out) == len(want):
                break
            data = None
            for w in want:
                if (w.ap, w.qual) in out:
                    continue
                if data is None and (data := _read_regular(f)) is None:
                    break
                if w.text_of(f, data) is not None:
                    out.add((w.ap, w.qual))
        return out

    def epoch_callers(self, path: str, qual: str) -> list[tuple[str, int]]:
        """``(caller path, line)`` of each call, in another file of the project, of the
        top-level function ``qual`` of ``path`` inside a loop of the caller that is not a loop
        over runs (its body builds no optimizer or model, its target names no fold, seed or
        config): once per epoch. The callers are the project files that import it by name from
        its module (one read of the project per function; each of them parsed whole, since an
        entry point often holds no AMP token and is neither screened in nor summarised)."""
        from amplint.model.queries_extra import _calls_in_loops, fresh_run_loop

        ap = absolute(path)
        if not self.project_files or "." in qual:
            return []
        memo = self._epoch_callers.get((ap, qual))
        if memo is not None:
            return memo
        probe = _Importer(self, ap, qual)
        out = []
        for f in self.project_files:
            if not f.endswith(".py") or (data := _read_regular(f)) is None or (text := probe.text_of(f, data)) is None:
                continue
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            scope: dict[str, str] = {}
            for st in ast.walk(tree):
                if isinstance(st, (ast.Import, ast.ImportFrom)):
                    add_import(scope, st)
            hit = self.resolve(f, scope.get(qual, qual))
            if hit is None or hit[0] != ap or hit[1].qualname != qual:
                continue  # the name there is another function
            out.extend((f, call.lineno) for call, loop in _calls_in_loops(tree, qual, False)
                       if not fresh_run_loop(loop, scope, lambda n: ast.get_source_segment(text, n) or ""))
        self._epoch_callers[(ap, qual)] = out
        return out

    def resolve_call(self, path: str, c, cls: str | None = None) -> tuple[str, FuncSummary] | None:
        """The project function the call ``c`` (a CallFact) reaches. A method of a class only
        an annotation declares counts while no project class derived from it redefines it."""
        if getattr(c, "declared", False):
            return self.resolve_declared(path, c.callee)
        return self.resolve(path, c.callee, cls)

    def resolve_declared(self, path: str, callee: str) -> tuple[str, FuncSummary] | None:
        """``Class.method`` where only an annotation declares the object's class: the method,
        unless a project class derived from the one that defines it redefines it."""
        hit = self.resolve(path, callee)
        if hit is not None:
            owner, _dot, method = hit[1].qualname.rpartition(".")
            if not owner or self.overridden_below(hit[0], owner, method):
                return None
        return hit

    def resolve_class(self, path: str, name: str) -> tuple[str, str] | None:
        """``(path, qualname)`` of the project class ``name`` (as qualified in ``path``) denotes."""
        return self._resolve(path, name, None, 0, self._lookup_class)

    def _lookup_class(self, ap: str, qual: str) -> tuple[str, str] | None:
        s = self.summary(ap)
        if s is None or qual not in s.classes:
            return None
        self.reads.add(ap)
        return ap, qual

    def scaled_subclasses(self, path: str, cls: str) -> list[tuple[str, str, tuple[str, ...]]]:
        """The project classes that derive from class ``cls`` of ``path`` (directly or through
        other project classes) and build an enabled GradScaler in ``self.<attr>``:
        ``(path, qualname, attrs)``, with the methods they or the classes between define
        (which replace ``cls``'s own) as a fourth item."""
        return self._subclass_map().get((absolute(path), cls), [])

    def _subclass_map(self) -> dict[tuple[str, str], list]:
        if self._subclasses is None:
            self._subclasses = {}
            for sp, summ in self._summaries.items():
                for q, fact in summ.classes.items():
                    attrs = (*fact.scaler_attrs, *self.wrapper_attrs(sp, fact))
                    if attrs and not set(attrs) & fact.states:  # saves its own scaler state
                        self._climb(sp, q, fact, (sp, q, attrs), set(fact.methods), 0)
        return self._subclasses

    def _ancestors(self, path: str, fact, _depth: int = 0, _seen=None, _overridden=None):
        """The project base classes of class ``fact`` (of ``path``), depth first, each once,
        five levels up: ``((base path, base qualname), base fact, the methods the classes
        below it define)``."""
        seen = set() if _seen is None else _seen
        overridden = set(fact.methods) if _overridden is None else _overridden
        if _depth > 4:
            return
        for b in fact.bases:
            hit = self.resolve_class(path, b)
            if hit is None or hit in seen:
                continue
            seen.add(hit)
            base = self.summary(hit[0]).classes[hit[1]]
            yield hit, base, overridden
            yield from self._ancestors(hit[0], base, _depth + 1, seen, overridden | set(base.methods))

    def overridden_below(self, path: str, cls: str, method: str) -> bool:
        """Does a project class derived from class ``cls`` of ``path`` (directly or through
        others) define its own ``method``? The classes looked at are those of ``path`` and of
        the project files that name ``cls`` (one read of the project per class name)."""
        ap = absolute(path)
        name = cls.rsplit(".", 1)[-1]
        files = {ap}
        if self.project_files:
            self.mentioned([name])
            files |= self._mentions.get(name, set())
        for f in files:
            s = self.summary(f)
            if s is None:
                continue
            for q, fact in s.classes.items():
                if (f, q) == (ap, cls) or method not in fact.methods or not fact.bases:
                    continue
                if any(hit == (ap, cls) for hit, _base, _ov in self._ancestors(f, fact)):
                    return True
        return False

    def inherited_scaler_attrs(self, path: str, cls: str) -> list[tuple[str, str, str]]:
        """``(attr, base path, base qualname)`` for each ``self.<attr>`` that a project base
        class of class ``cls`` of ``path`` (directly or through others, depth 4) builds as an
        enabled GradScaler or a loss-scaler wrapper, and that ``cls`` does not build itself.
        An attribute whose state some class of that chain saves or loads is left out."""
        s = self.summary(path)
        fact = s.classes.get(cls) if s is not None else None
        if fact is None or not fact.bases:
            return []
        out: list[tuple[str, str, str]] = []
        states = set(fact.states)
        own = set(fact.scaler_attrs)
        for hit, base, _overridden in self._ancestors(path, fact):
            states.update(base.states)
            for a in (*base.scaler_attrs, *self.wrapper_attrs(hit[0], base)):
                if a not in own and all(a != x[0] for x in out):
                    out.append((a, hit[0], hit[1]))
        return [x for x in out if x[0] not in states]

    def base_init(self, path: str, cls: str) -> tuple[str, FuncSummary] | None:
        """``(path, FuncSummary)`` of the ``__init__`` that ``super().__init__`` runs for class
        ``cls`` of ``path``: that of its single base, or of the nearest single base above it
        that defines one (depth 3); None when unknown (several bases, one outside the project)."""
        s = self.summary(path)
        fact = s.classes.get(cls) if s is not None else None
        for _depth in range(3):
            if fact is None or len(fact.bases) != 1:
                return None
            hit = self.resolve_class(path, fact.bases[0])
            if hit is None:
                return None
            path, fact = hit[0], self.summary(hit[0]).classes.get(hit[1])
            if fact is not None and "__init__" in fact.methods:
                return self.lookup(path, f"{hit[1]}.__init__")
        return None

    def wrapper_attrs(self, path: str, fact) -> list[str]:
        """The ``self.<attr>`` of class ``fact`` (in ``path``) that hold a loss-scaler wrapper:
        timm's ``NativeScaler()``, or a project class that builds an enabled GradScaler in
        ``self.<attr>`` and defines ``state_dict()``."""
        out = []
        for attr, q in fact.wrappers:
            if attr not in out and attr not in fact.scaler_attrs and self.is_scaler_wrapper(path, q):
                out.append(attr)
        return out

    def is_scaler_wrapper(self, path: str, q: str) -> bool:
        """Is ``q`` (qualified in ``path``) a loss-scaler wrapper class, whose state is its
        GradScaler's: timm's ``NativeScaler``, or a project class that builds an enabled
        GradScaler in ``self.<attr>`` and defines ``state_dict()``?"""
        if q in WRAPPER_CLASSES:
            return True
        hit = self.resolve_class(path, q)
        wrapped = self.summary(hit[0]).classes.get(hit[1]) if hit is not None else None
        return wrapped is not None and bool(wrapped.scaler_attrs) and "state_dict" in wrapped.methods

    def scaled_base_files(self) -> set[str]:
        """The files defining a base class of some scaler-holding project class."""
        return {p for p, _q in self._subclass_map()}

    def inherited_autocast_calls(self, path: str, cls: str) -> list[tuple[str, str, str, int, str | None]]:
        """Calls ``self.<m>()`` that methods class ``cls`` of ``path`` inherits from project
        base classes make inside an autocast region (a base ``iterate()`` running
        ``with autocast(...): self.step(data)``): ``(base path, base method, m, line, kind)``,
        kind the region's ``device:dtype`` (``"cuda:float16"``) or None where not literal.
        A method the class or a class between defines replaces the base's."""
        out: list[tuple[str, str, str, int, str | None]] = []
        s = self.summary(path)
        fact = s.classes.get(cls) if s is not None else None
        if fact is None or not fact.bases:
            return out
        for hit, base, overridden in self._ancestors(absolute(path), fact):
            bs = self.summary(hit[0])
            for name in sorted(base.methods - overridden):
                fs = bs.function(f"{hit[1]}.{name}")
                for cf in fs.calls if fs is not None else ():
                    if cf.in_autocast and cf.callee.startswith("self.") and "." not in cf.callee[5:]:
                        kind = cf.in_autocast if isinstance(cf.in_autocast, str) else None
                        out.append((hit[0], f"{hit[1]}.{name}", cf.callee[5:], cf.line, kind))
        return out

    def _climb(self, path, qual, fact, sub, overridden, depth) -> None:
        if depth > 4:
            return
        for b in fact.bases:
            hit = self.resolve_class(path, b)
            if hit is None or hit == (path, qual):
                continue
            self._subclasses.setdefault(hit, []).append((*sub, frozenset(overridden)))
            base = self.summary(hit[0]).classes[hit[1]]
            self._climb(hit[0], hit[1], base, sub, overridden | set(base.methods), depth + 1)

    def _resolve(self, path, callee, cls, _depth, lookup):
        if _depth > 5 or not callee:
            return None
        ap = absolute(path)
        if callee.startswith("self."):
            if cls is None:
                return None
            return lookup(ap, f"{cls}.{callee[5:]}")
        if callee.startswith("."):
            callee = self._absolute(ap, callee)
            if callee is None:
                return None
        if "." not in callee:
            return lookup(ap, callee)
        parts = callee.split(".")
        if parts[0] not in self._heads:
            return self._sibling(ap, parts, lookup)
        for i in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:i])
            target = self.by_module.get(mod)
            if target is None:
                continue
            rest = ".".join(parts[i:])
            hit = lookup(target, rest)
            if hit is not None:
                return hit
            s = self.summary(target)
            head = parts[i]
            if s is not None and head in s.imports:  # re-exported through this module
                return self._resolve(target, ".".join([s.imports[head], *parts[i + 1:]]), None, _depth + 1, lookup)
            if s is not None:  # re-exported by a star import (`from .base_trainer import *`)
                for k, v in s.imports.items():
                    if k.startswith("*"):
                        hit = self._resolve(target, ".".join([v[:-2], *parts[i:]]), None, _depth + 1, lookup)
                        if hit is not None:
                            return hit
            return None
        return None

    def _sibling(self, ap: str, parts: list[str], lookup=None):
        """``from helpers import f`` in a script: Python puts the script's directory first on
        sys.path, so a module beside the file wins. Else the nearest directory above the file
        (inside the project) that holds the module: a package nested in a monorepo
        (``PyTorch/X/pkg/runtime/train.py`` importing ``pkg.runtime.common``), run from
        its own folder."""
        d = os.path.dirname(ap)
        memo = (d, tuple(parts))
        found = self._siblings.get(memo, False)
        if found is False:
            found = self._sibling_module(ap, d, parts)
            self._siblings[memo] = found
        if found is None or found[0] == ap:
            return None
        return (lookup or self._lookup)(found[0], ".".join(parts[found[1]:]))

    def _sibling_module(self, ap: str, d: str, parts: list[str]) -> tuple[str, int] | None:
        top = next((r for r in self.roots if ap.startswith(r if r.endswith(os.sep) else r + os.sep)), None)
        while True:
            for i in range(len(parts) - 1, 0, -1):
                base = os.path.join(d, *parts[:i])
                for cand in (base + ".py", os.path.join(base, "__init__.py")):
                    if cand in self.module_of:
                        return cand, i
            if top is None or d == top or len(d) <= len(top):
                return None
            d = os.path.dirname(d)

    def lookup(self, path: str, qual: str) -> tuple[str, FuncSummary] | None:
        """The function ``qual`` (qualified within its file: ``f``, ``C.m``, ``f.inner``) of ``path``."""
        return self._lookup(absolute(path), qual)

    def _lookup(self, ap: str, qual: str) -> tuple[str, FuncSummary] | None:
        s = self.summary(ap)
        if s is None:
            return None
        self.reads.add(ap)
        f = s.function(qual)
        return (ap, f) if f is not None else None

    def _absolute(self, ap: str, rel: str) -> str | None:
        mod = self.module_of.get(ap)
        if mod is None:
            return None
        level = len(rel) - len(rel.lstrip("."))
        pkg = mod.split(".") if os.path.basename(ap).startswith("__init__.") else mod.split(".")[:-1]
        if level - 1 > len(pkg):
            return None
        base = pkg[: len(pkg) - (level - 1)]
        rest = rel[level:]
        return ".".join([*base, rest]) if rest else ".".join(base)

    # ------------------------------------------------------------------ composition
    def facts(self, path: str, s: FuncSummary, _stack: tuple = ()) -> Facts:
        key = (absolute(path), s.qualname)
        if key in self._facts and self._facts[key] is not None:
            return self._facts[key]
        out = Facts(s)
        if len(_stack) < MAX_DEPTH and key not in _stack:
            for c in s.calls:
                hit = self.resolve_call(path, c, s.cls)
                if hit is None:
                    continue
                cpath, cs = hit
                cf = self.facts(cpath, cs, (*_stack, key))
                out.backward = out.backward or cf.backward
                out.clips = out.clips or cf.clips
                if c.callee.startswith("self.") and "." not in c.callee[5:]:
                    for k, ops in cf.self_ops.items():
                        out.self_ops.setdefault(k, set()).update(ops)
                names = {}
                for pos, mine in c.forwards:
                    theirs = cs.param_at(pos)
                    if theirs is None:
                        continue
                    names[theirs] = mine
                    if theirs in cf.saves_param:
                        out.saves_param.add(mine)
                    if theirs in cf.scaler_ops:
                        out.scaler_ops.setdefault(mine, set()).update(cf.scaler_ops[theirs])
                for pos, d in c.dict_args:  # a dict built here, saved by the callee
                    if cs.param_at(pos) in cf.saves_param:
                        out.dict_saves.append(d)
                for d in cf.dict_saves:
                    out.dict_saves.append(SaveFact(
                        None, d.has_opt, d.has_scaler,
                        [names[p] for p in d.opt_params if p in names],
                        [names[p] for p in d.scaler_params if p in names], d.line,
                        [names[p] for p in d.owner_params if p in names],
                        [names[p] for p in d.state_params if p in names],
                    ))
        if not _stack:
            self._facts[key] = out
        return out
