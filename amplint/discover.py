"""Paths -> the files to check, honouring .gitignore, exclude and extend-exclude.

Speed (issue 8): a large monorepo has tens of thousands of directory entries, and
matching each one against every gitignore pattern in Python dominated the start-up of a
run. Each spec is therefore wrapped in a :class:`_FastSpec`: all of its ``include``
patterns are folded into one compiled regex, and a path that matches none of them is
decided without consulting the spec (a path that no include pattern matches is never
ignored, whatever the negations say). Only the rare path that matches goes through
pathspec's own gitignore logic (priorities, negations), so the results are exactly
pathspec's. Relative paths are built incrementally while walking instead of with
``os.path.relpath`` per entry.
"""

from __future__ import annotations

import os
import re
from amplint.lazyre import lazy
from amplint.record import Record


from amplint.settings import Settings

SUFFIXES = (".py", ".pyi", ".ipynb")


class Discovered(Record):
    files: list[str]
    missing: list[str]  # paths given on the command line that do not exist


_NAMED_GROUP = lazy(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
# pathspec's regex for a pattern without an inner slash ("build/", "*.pyc", ".venv"):
# ^(?:.+/)?INNER(?P<ps_d>/)  (directories only)  or  ^(?:.+/)?INNER(?:(?P<ps_d>/)|$)  (any).
# When INNER cannot match "/", it matches a path iff it matches one whole component.
_ANY_TAIL = "(?:(?P<ps_d>/)|$)"
_DIR_TAIL = "(?P<ps_d>/)"
_HEAD = "^(?:.+/)?"
_SPECIAL = frozenset("\\[]().*+?{}|^$/")


def _inner(inner: str):
    """What INNER of a regex above is, read without compiling a regex (start-up): the
    component literal it matches (escapes undone) when it is only escaped non-alphanumeric
    and plain characters; True (a glob) when it also holds ``[^/]``, ``[^/]*`` or bracket
    classes without ``/``, ``\\`` or a leading ``^``; None for anything else. These are the
    forms the former regexes _INNER/_LITERAL accepted (tests/test_speed_infra.py compares)."""
    out: list[str] = []
    glob = False
    i, n = 0, len(inner)
    if not n:
        return None
    while i < n:
        c = inner[i]
        if c == "\\":
            if i + 1 >= n or (inner[i + 1].isascii() and inner[i + 1].isalnum()):
                return None
            out.append(inner[i + 1] if inner[i + 1] != "\n" else "\\\n")  # re's "." stops at \n
            i += 2
        elif c == "[":
            if inner.startswith("[^/]", i):
                i += 5 if inner.startswith("*", i + 4) else 4
            else:
                j = i + 1
                if j < n and inner[j] == "^":
                    return None
                while j < n and inner[j] not in "]/\\":
                    j += 1
                if j >= n or inner[j] != "]":
                    return None
                i = j + 1
            glob = True
        elif c in _SPECIAL:
            return None
        else:
            out.append(c)
            i += 1
    return True if glob else "".join(out)


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _simple(line: str) -> bool:
    """A plain name of ``[A-Za-z0-9_.-]`` not starting with ``-``, optionally with one trailing
    ``/``, and not ``.`` or ``..``: the former regex _SIMPLE, without compiling it."""
    body = line[:-1] if line.endswith("/") else line
    return bool(body) and body[0] != "-" and body not in (".", "..") and _NAME_CHARS.issuperset(body)


# one glob token of the gitignore lines translated here: a bracket class of plain characters
# and ranges, a wildcard, or any character that is neither special nor a slash
_TOKEN = lazy(r"\[(!|\^)?((?:[A-Za-z0-9_.](?:-[A-Za-z0-9_.])?)+)\]|\*|\?|[^\\\[\]*?/]")


def _translate(line: str) -> tuple[str | None, bool | None] | None:
    """pathspec's ``(regex, include)`` for one gitignore line of the common forms, computed
    without importing pathspec: a blank line or a comment; ``!`` (negation), a leading and a
    trailing ``/``, ``**/`` and ``/**`` segments, segments of literal characters, ``*``, ``?``
    and bracket classes. None for anything else (backslashes, ``**`` inside a name, a lone
    ``*`` pattern, odd brackets): pathspec decides.
    tests/test_speed_infra.py checks that every result equals pathspec's own."""
    if not line or line[0] == "#":
        return (None, None)
    body = line.rstrip(" ")
    if not body:
        return (None, None)
    include = True
    if body[0] == "!":
        include, body = False, body[1:]
    anchored = body.startswith("/")
    if anchored:
        body = body[1:]
    is_dir = body.endswith("/")
    if is_dir:
        body = body[:-1]
    if not body or "\\" in body or body[0] in "!#":
        return None
    segs = body.split("/")
    multi = len(segs) > 1
    lead = multi and segs[0] == "**"  # **/x: at any depth
    if lead:
        segs = segs[1:]
    trail = len(segs) > 1 and segs[-1] == "**" and not lead and not is_dir  # x/**: everything inside
    if trail:
        segs = segs[:-1]
    anchored = not lead and (anchored or multi)  # a slash inside: relative to the .gitignore
    if not segs or segs[0] == "**" or segs[-1] == "**":
        return None
    rx = ""
    for i, seg in enumerate(segs):
        if seg == "**":  # a/**/b: zero or more directories between
            if segs[i - 1] == "**":
                return None
            rx += "(?:/.+)?"
            continue
        if not seg or "**" in seg or (seg == "*" and len(segs) == 1):
            return None
        if i:
            rx += "/"
        if seg == "*":
            rx += "[^/]+"
            continue
        pos = 0
        for m in _TOKEN.finditer(seg):
            if m.start() != pos:
                return None  # a character no token takes (an unclosed bracket)
            pos = m.end()
            t = m.group(0)
            if t == "*":
                rx += "[^/]*"
            elif t == "?":
                rx += "[^/]"
            elif m.group(2) is not None:
                rx += "[" + ("^" if m.group(1) else "") + m.group(2) + "]"
            else:
                rx += re.escape(t)
        if pos != len(seg):
            return None
    head = "^" if anchored else _HEAD
    if trail:
        return (head + rx + "/", include)
    return (head + rx + (_DIR_TAIL if is_dir else _ANY_TAIL), include)


def _regexes(lines: list[str]) -> list[tuple[str | None, bool | None]] | None:
    """pathspec's (regex, include) for each gitignore line. The common forms (plain names such
    as the default excludes, globs such as ``*.py[cod]``, anchored paths, comments) are
    translated here, so a run whose patterns are all of them never imports pathspec (~20-30 ms
    of start-up, most of a one-file check inside a project)."""
    if all(_simple(ln) for ln in lines):
        return [
            (_HEAD + re.escape(ln[:-1]) + _DIR_TAIL, True) if ln.endswith("/") else (_HEAD + re.escape(ln) + _ANY_TAIL, True)
            for ln in lines
        ]
    out = [_translate(ln) for ln in lines]
    if all(r is not None for r in out):
        return out
    try:  # pathspec >= 1.0: classify patterns without compiling a spec that may never be needed
        from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern as _Pattern
    except ImportError:  # pragma: no cover - older pathspec: compile eagerly
        return None
    try:
        return [_Pattern.pattern_to_regex(ln) for ln in lines]
    except Exception:
        return None


class _FastSpec:
    """A GitIgnoreSpec with an exact fast path for paths that no include pattern matches
    (the common case), decided by set look-ups on path components and one regex for the
    patterns with an inner slash. A path that some include pattern does match is decided by
    pathspec itself (priorities, negations), so results equal ``spec.match_file``."""

    __slots__ = ("_lines", "_spec", "exact", "empty", "negated", "lit_any", "lit_dir", "glob_any", "glob_dir", "path_rx")

    def __init__(self, lines: list[str]):
        self._lines = lines
        self._spec = None
        self.lit_any: set[str] = set()
        self.lit_dir: set[str] = set()
        self.glob_any = self.glob_dir = self.path_rx = None
        regexes = _regexes(lines)
        if regexes is None:
            regexes = [(p.regex.pattern if getattr(p, "regex", None) is not None else None, p.include) for p in self.spec.patterns]
        self.exact = True
        self.negated = any(include is False for _, include in regexes)  # a `!pattern` line
        g_any: list[str] = []
        g_dir: list[str] = []
        paths: list[str] = []
        for rx, include in regexes:
            if include is not True or rx is None:
                continue
            if "(?P=" in rx:
                self.exact = False
                break
            inner, kind = None, None
            if rx.startswith(_HEAD):
                if rx.endswith(_ANY_TAIL):
                    inner, kind = rx[len(_HEAD) : -len(_ANY_TAIL)], "any"
                elif rx.endswith(_DIR_TAIL):
                    inner, kind = rx[len(_HEAD) : -len(_DIR_TAIL)], "dir"
            lit = _inner(inner) if inner else None
            if lit is not None:
                if lit is not True:
                    (self.lit_any if kind == "any" else self.lit_dir).add(lit)
                else:
                    (g_any if kind == "any" else g_dir).append(inner)
            else:
                paths.append(_NAMED_GROUP.sub("(?:", rx))
        try:
            if g_any:
                self.glob_any = re.compile("|".join(f"(?:{r})" for r in g_any))
            if g_dir:
                self.glob_dir = re.compile("|".join(f"(?:{r})" for r in g_dir))
            if paths:
                self.path_rx = re.compile("|".join(f"(?:{r})" for r in paths))
        except re.error:
            self.exact = False
        self.empty = self.exact and not (self.lit_any or self.lit_dir or g_any or g_dir or paths)

    @property
    def spec(self):
        if self._spec is None:
            import pathspec  # only when a pattern actually matches: keeps start-up light

            self._spec = pathspec.GitIgnoreSpec.from_lines(self._lines)
        return self._spec

    def component_hit(self, name: str, is_dir: bool) -> bool:
        """Does a component-wise pattern match ``name`` (a directory when ``is_dir``)?"""
        if name in self.lit_any or (is_dir and name in self.lit_dir):
            return True
        if self.glob_any is not None and self.glob_any.fullmatch(name):
            return True
        return is_dir and self.glob_dir is not None and self.glob_dir.fullmatch(name) is not None

    def ancestors_hit(self, rel_dir: str) -> bool:
        """Does a component-wise pattern match a directory of ``rel_dir`` ("a/b/" or "")?"""
        return any(self.component_hit(c, True) for c in rel_dir.split("/") if c)

    def match(self, rel: str, name: str | None = None, is_dir: bool = False, anc: bool = True) -> bool:
        """``spec.match_file(rel)``; ``rel`` ends in "/" for a directory. ``name`` (the last
        component) and ``anc`` (whether a component-wise pattern may match a parent
        directory) enable the fast path."""
        if self.empty:
            return False
        if self.exact:
            if name is None:
                is_dir = rel.endswith("/")
                parts = rel.rstrip("/").split("/")
                name, anc = parts[-1], self.ancestors_hit("/".join(parts[:-1]))
            hit = self.component_hit(name, is_dir) or (self.path_rx is not None and self.path_rx.search(rel) is not None)
            if not (anc or hit):
                return False
            if hit and not self.negated:  # an exact include match that no `!pattern` can undo
                return True
        return self.spec.match_file(rel)


def _spec(patterns) -> _FastSpec:
    return _FastSpec(list(patterns))


def _rel(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:  # different drive (Windows)
        return path
    return rel.replace(os.sep, "/")


class Excluder:
    def __init__(self, settings: Settings):
        self.root = settings.root
        self.abs_root = os.path.abspath(settings.root)
        self.spec = _spec([*settings.exclude, *settings.extend_exclude])

    def excluded(self, path: str, is_dir: bool) -> bool:
        rel = _rel(path, self.root)
        return self._excluded(rel, os.path.basename(path), is_dir, rel.startswith("../"))

    def _excluded(self, rel: str | None, name: str, is_dir: bool, outside: bool, anc: bool = True) -> bool:
        suffix = "/" if is_dir else ""
        match = self.spec.match
        if outside or rel is None:
            return match(name + suffix, name, is_dir, False)
        if rel == ".":
            return match(rel + suffix) or match(name + suffix)
        return match(rel + suffix, name, is_dir, anc) or match(name + suffix, name, is_dir, False)


def discover(paths: list[str], settings: Settings, suffixes=SUFFIXES, memo_dir: str | None = None) -> Discovered:
    """The files under ``paths``. With ``memo_dir`` (the cache directory), the walk of the
    directories named (one or several, when every path is a directory) is remembered with
    the mtime of every directory it entered and of every ``.gitignore`` it read: while none of
    them changed (an entry added, removed or renamed changes its directory's mtime), the next
    run with the same paths reuses the file list instead of walking."""
    ex = Excluder(settings)
    files: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()
    memo = None
    if memo_dir is not None and paths and all(os.path.isdir(p) for p in paths):
        memo = _WalkMemo(memo_dir, settings, suffixes, paths)  # one walk of every directory named
        if memo.files is not None:
            return Discovered(list(memo.files), missing)
    trace = [] if memo is not None else None
    for p in paths:
        if os.path.isdir(p):
            rel = _rel(p, ex.root)
            if rel.startswith("../") or rel == "..":
                prefix = None  # outside the project root: match names only
            else:
                prefix = "" if rel == "." else rel + "/"
            anc = bool(prefix) and ex.spec.ancestors_hit(prefix)
            deferred: list = []
            _walk(p, prefix, anc, ex, settings.respect_gitignore, files, seen, suffixes, [], trace=trace, deferred=deferred)
            while deferred:
                d, sub_prefix, sub_anc, sub_stack, st = deferred.pop(0)
                _walk(d, sub_prefix, sub_anc, ex, settings.respect_gitignore, files, seen, suffixes, sub_stack, st, trace, deferred)
        elif os.path.lexists(p):
            if settings.force_exclude and ex.excluded(p, False):
                continue
            real = os.path.abspath(p)
            if real not in seen:
                seen.add(real)
                files.append(p)
        else:
            missing.append(p)
    if memo is not None:
        memo.save(files, trace)
    return Discovered(files, missing)


def project_root(settings: Settings, paths: list[str]) -> str:
    """The project's root: the directory of the [tool.amplint] configuration, else of the
    nearest pyproject.toml above the paths, else the paths' common directory (above its
    top-level package when it is inside one, but not above a directory holding setup.py,
    setup.cfg or .git)."""
    if settings.config_path:
        return os.path.dirname(os.path.abspath(settings.config_path))
    given = [os.path.abspath(p) for p in paths if p != "-"] or [os.getcwd()]
    try:
        common = os.path.commonpath(given)
    except ValueError:
        common = os.getcwd()
    if not os.path.isdir(common):
        common = os.path.dirname(common)
    d = common
    while True:
        if os.path.isfile(os.path.join(d, "pyproject.toml")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    # above the top package, unless the directory is a project's own root (a repository
    # whose root holds an __init__.py next to its setup.py)
    while os.path.isfile(os.path.join(common, "__init__.py")) and not any(
        os.path.exists(os.path.join(common, m)) for m in _ROOT_MARKERS
    ):
        common = os.path.dirname(common)
    return common


_ROOT_MARKERS = ("setup.py", "setup.cfg", ".git")


def _gitignore(d: str) -> _FastSpec | None:
    gi = os.path.join(d, ".gitignore")
    try:
        with open(gi, encoding="utf-8", errors="replace") as fh:
            return _FastSpec(fh.read().splitlines())
    except OSError:
        return None


def _walk(d, prefix, anc, ex, use_gitignore, files, seen, suffixes, stack, dir_stat=None, trace=None, deferred=None) -> None:
    """``prefix``: ``d`` relative to the project root plus "/" ("" at the root; None
    outside it); ``anc``: whether an exclude pattern may match one of its directories.
    ``stack``: (spec, d relative to that .gitignore's directory plus "/", anc). ``trace``
    collects (path, mtime_ns, size) of what the walk depended on (see _WalkMemo).
    ``deferred``: symlinked directories met on the way, walked after the real tree, so a file
    reachable both ways is checked under its real path (``pkg/utils.py``, not
    ``examples/v2/pkg/utils.py`` through ``examples/v2/pkg -> ../../pkg``)."""
    try:
        st = os.stat(d) if dir_stat is None else dir_stat
        ident = ("dir", st.st_dev, st.st_ino)
        dev = st.st_dev
        if trace is not None:
            trace.append((d, st.st_mtime_ns, -1))
    except OSError:
        ident = ("dir", os.path.realpath(d))
        dev = 0
        if trace is not None:
            trace.append((d, None, -1))  # never valid: walk again next time
    if ident in seen:  # symlink loops
        return
    seen.add(ident)
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        entries = None
    if entries is not None and prefix and any(e.name == "CACHEDIR.TAG" for e in entries):
        return  # a cache directory (amplint's own under another name, pytest's...): never source
    if use_gitignore and (entries is None or any(e.name == ".gitignore" for e in entries)):
        if trace is not None:
            trace.append(_stamp(os.path.join(d, ".gitignore")))
        spec = _gitignore(d)
        if spec is not None and not spec.empty:
            stack = [*stack, (spec, "", False)]
    if entries is None:
        return
    excluded = ex._excluded
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if prefix is not None:
            rel = prefix + name
            outside = False
        elif is_dir and os.path.abspath(entry.path) == ex.abs_root:
            rel, outside = ".", False  # walking down into the project root from outside it
        else:
            rel, outside = None, True
        if excluded(rel, name, is_dir, outside, anc):
            continue
        if stack:
            tail = name + "/" if is_dir else name
            if any(spec.match(sub + tail, name, is_dir, a) for spec, sub, a in stack):
                continue
        if is_dir:
            sub_stack = (
                [(spec, sub + name + "/", a or spec.component_hit(name, True)) for spec, sub, a in stack]
                if stack
                else stack
            )
            if rel is None or rel == ".":
                sub_prefix, sub_anc = (None if rel is None else ""), False
            else:
                sub_prefix, sub_anc = rel + "/", anc or ex.spec.component_hit(name, True)
            try:
                entry_stat = entry.stat()
            except OSError:
                entry_stat = None
            if deferred is not None and entry.is_symlink():
                deferred.append((entry.path, sub_prefix, sub_anc, sub_stack, entry_stat))
                continue
            _walk(entry.path, sub_prefix, sub_anc, ex, use_gitignore, files, seen, suffixes, sub_stack, entry_stat, trace, deferred)
        elif name.endswith(suffixes):
            # a file reachable through several symlinked paths is checked once, under the
            # path walked first (inode identity; DirEntry.inode() costs no system call)
            try:
                if entry.is_symlink():
                    target = os.stat(entry.path)
                    fid = ("file", target.st_dev, target.st_ino)
                else:
                    fid = ("file", dev, entry.inode())
            except OSError:
                fid = None
            if fid is not None:
                if fid in seen:
                    continue
                seen.add(fid)
            files.append(entry.path)


def _stamp(path: str) -> tuple:
    try:
        st = os.stat(path)
        return (path, st.st_mtime_ns, st.st_size)
    except OSError:
        return (path, None, None)


class _WalkMemo:
    """The file list of one walk of the directories named, kept in the cache directory with
    what it depended on: the mtime of each directory entered and the stamp of each
    ``.gitignore`` read, under a key of the walked paths, the working directory, the excludes
    and suffixes."""

    def __init__(self, memo_dir: str, settings: Settings, suffixes, paths):
        import pickle

        from amplint import __version__
        from amplint.cache import blake2b

        key = repr((tuple(os.path.abspath(p) for p in paths), tuple(paths), os.getcwd(), os.path.abspath(settings.root),
                    tuple(settings.exclude), tuple(settings.extend_exclude), settings.respect_gitignore, tuple(suffixes)))
        self.path = os.path.join(memo_dir, __version__, f"walk-{blake2b(key.encode(), digest_size=12).hexdigest()}.pickle")
        self.key = key
        self.files = None
        try:
            with open(self.path, "rb") as fh:
                data = pickle.load(fh)
            if data[0] == key and all(
                _stamp(p)[1:] == (m, z) if z != -1 else _stamp(p)[1] == m for p, m, z in data[1]
            ) and all(m is not None for _p, m, _z in data[1]):
                self.files = list(data[2])
        except Exception:
            self.files = None

    def save(self, files: list[str], trace: list) -> None:
        import pickle

        tmp = f"{self.path}.{os.getpid()}.tmp"  # not tempfile: a warm run imports neither it nor hashlib
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as fh:
                pickle.dump((self.key, trace, files), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except Exception:  # a memo that cannot be written only costs the next run a walk
            try:
                os.unlink(tmp)
            except OSError:
                pass

