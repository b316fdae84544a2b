"""Load a script's definitions without running the script (what ``amplint verify`` executes).

``load_definitions(path)`` parses the file and executes, one top-level statement at a time and
in source order, only:

* imports (``import x``, ``from x import y``; the script's directory is first on ``sys.path``,
  as under ``python script.py``, so a sibling ``myutils.py`` imports);
* function and class definitions (their decorators, default values and base classes are
  evaluated, as Python always does when it defines them);
* assignments whose value is a constant or a *simple expression*: names, attributes,
  arithmetic, comparisons, containers, f-strings, comprehensions, lambdas, and calls of a few
  side-effect-free functions (``int``, ``os.environ.get``, ``torch.device``,
  ``torch.cuda.is_available``, ``logging.getLogger``, ...);
* ``if``/``try`` blocks made only of the statements above (``try: import wandb`` /
  ``except ImportError: wandb = None``).

Everything else is skipped and recorded: any other call (``main()``, ``sys.exit(0)``,
``parser.parse_args()``, ``model = Net()``), loops, ``with`` blocks, and the
``if __name__ == "__main__":`` block. :attr:`Loaded.skipped_defs` maps each name that only a
skipped statement would define to that statement, so a caller can say which line a function
needs. A kept assignment that fails (it used a name only a skipped statement defines) is
recorded in :attr:`Loaded.failed` instead of stopping the load; a failing import, definition
or decorator raises :class:`LoadError` with the line.

The module gets a private name (``_amplint_loaded_<stem>_<n>``, never ``"__main__"``) and is
registered in ``sys.modules`` (dataclasses and pickling look it up there).
"""

from __future__ import annotations

import __future__ as _future
import ast
import itertools
import os
import sys
import types
from typing import Iterable

__all__ = ["LoadError", "Loaded", "Skipped", "load_definitions", "bound_names", "is_simple_expr",
           "SAFE_CALLS"]

# Calls that are allowed inside a kept top-level assignment: pure functions of their
# arguments (or of the environment), never training or I/O.
SAFE_CALLS = frozenset({
    "int", "float", "str", "bool", "bytes", "complex", "len", "range", "tuple", "list", "dict", "set",
    "frozenset", "min", "max", "abs", "round", "sorted", "sum", "any", "all", "enumerate", "zip",
    "reversed", "isinstance", "issubclass", "hasattr", "getattr", "repr", "format", "divmod", "pow",
    "os.environ.get", "os.getenv", "os.cpu_count", "os.getcwd", "os.path.join", "os.path.dirname",
    "os.path.abspath", "os.path.basename", "os.path.expanduser", "os.path.splitext", "os.path.realpath",
    "os.path.exists", "os.path.isdir", "os.path.isfile", "os.fspath",
    "pathlib.Path", "pathlib.PurePath", "logging.getLogger", "re.compile",
    "collections.namedtuple", "typing.NamedTuple", "typing.TypeVar", "typing.NewType", "typing.cast",
    "functools.partial", "dataclasses.field",
    "torch.device", "torch.dtype", "torch.cuda.is_available", "torch.cuda.device_count",
    "torch.cuda.is_bf16_supported", "torch.backends.mps.is_available", "torch.get_default_dtype",
    "torch.amp.is_autocast_available", "torch.distributed.is_available",
    "torch.distributed.is_initialized",
})

_load_counter = itertools.count()


class LoadError(RuntimeError):
    """A kept statement (import, definition) failed; the message names its line."""


class Skipped:
    """A top-level statement ``verify`` did not run."""

    __slots__ = ("line", "text", "why", "names")

    def __init__(self, line: int, text: str, why: str, names: frozenset[str]) -> None:
        self.line = line
        self.text = text
        self.why = why
        self.names = names

    def __repr__(self) -> str:
        return f"Skipped(line={self.line}, text={self.text!r}, why={self.why!r})"


class Loaded:
    def __init__(self, module: types.ModuleType, path: str, tree: ast.Module, source: str) -> None:
        self.module = module
        self.path = path
        self.tree = tree
        self.source = source
        self.skipped: list[Skipped] = []
        self.skipped_defs: dict[str, Skipped] = {}  # name -> skipped statement that binds it
        self.failed: dict[str, str] = {}  # name -> why its kept assignment failed
        self.ran: list[int] = []  # lines of the statements executed

    @property
    def namespace(self) -> dict:
        return self.module.__dict__

    def unload(self) -> None:
        sys.modules.pop(self.module.__name__, None)


# ---------------------------------------------------------------------- classification


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Top-level import aliases: ``np`` -> ``numpy``, ``Path`` -> ``pathlib.Path``."""
    out: dict[str, str] = {}
    for s in ast.walk(tree):
        if isinstance(s, ast.Import):
            for a in s.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(s, ast.ImportFrom) and s.module and not s.level:
            for a in s.names:
                out[a.asname or a.name] = f"{s.module}.{a.name}"
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


def _canonical(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    base = aliases.get(head, head)
    full = f"{base}.{rest}" if rest else base
    for short, long in (("nn.", "torch.nn."),):
        if full.startswith(short):
            full = long + full[len(short):]
    return full


def is_simple_expr(node: ast.AST | None, aliases: dict[str, str] | None = None) -> bool:
    """A constant or an expression with no call other than :data:`SAFE_CALLS`."""
    if node is None:
        return True
    aliases = aliases or {}
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = _dotted(n.func)
            if name is None or _canonical(name, aliases) not in SAFE_CALLS:
                return False
        elif isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
    return True


def _is_main_guard(test: ast.expr) -> bool:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        names = [s.id for s in sides if isinstance(s, ast.Name)]
        consts = [s.value for s in sides if isinstance(s, ast.Constant)]
        return names == ["__name__"] and consts == ["__main__"]
    return False


def _why_skipped(s: ast.stmt, aliases: dict[str, str]) -> str | None:
    """None when the statement is run, else a short reason it is not."""
    if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                      ast.ClassDef, ast.Pass, ast.Global, ast.Nonlocal)):
        return None
    if isinstance(s, ast.Expr):
        if isinstance(s.value, ast.Constant):
            return None  # a docstring or a bare constant
        v = s.value
        if isinstance(v, ast.Call):
            name = _dotted(v.func) or ""
            if name.endswith(("parse_args", "parse_known_args")):
                return "argparse"
            if _canonical(name, aliases) in ("sys.exit", "exit", "quit", "os._exit"):
                return "an exit"
            return "a call"
        return "an expression"
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = s.value
        if value is None:
            return None
        if isinstance(value, ast.Call):
            name = _dotted(value.func) or ""
            if name.endswith(("parse_args", "parse_known_args")):
                return "argparse"
        return None if is_simple_expr(value, aliases) else "a call"
    if isinstance(s, ast.If):
        if _is_main_guard(s.test):
            return "the __main__ block"
        if not is_simple_expr(s.test, aliases):
            return "a call"
        inner = [_why_skipped(b, aliases) for b in [*s.body, *s.orelse]]
        return next((w for w in inner if w), None)
    if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
        stmts = [*s.body, *s.orelse, *s.finalbody, *(b for h in s.handlers for b in h.body)]
        inner = [_why_skipped(b, aliases) for b in stmts]
        return next((w for w in inner if w), None)
    if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
        return "a loop"
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return "a with block"
    return f"a {type(s).__name__.lower()} statement"


def bound_names(stmts: Iterable[ast.stmt]) -> set[str]:
    """Names the statements bind at their own level (descending into blocks, not into defs)."""
    out: set[str] = set()

    def target(t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                target(e)
        elif isinstance(t, ast.Starred):
            target(t.value)

    def walk(body: Iterable[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(s.name)
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    target(t)
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
                target(s.target)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    if a.name != "*":
                        out.add((a.asname or a.name).split(".")[0])
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                target(s.target)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    if item.optional_vars is not None:
                        target(item.optional_vars)
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if isinstance(sub, list) and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                ast.ClassDef)):
                    walk(sub)
            for h in getattr(s, "handlers", []) or []:
                if h.name:
                    out.add(h.name)
                walk(h.body)
            if type(s).__name__ == "Match":
                for case in s.cases:
                    walk(case.body)
            for n in ast.walk(s) if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                        ast.ClassDef)) else ():
                if isinstance(n, ast.NamedExpr):
                    target(n.target)

    walk(stmts)
    return out


def _first_line(source_lines: list[str], s: ast.stmt) -> str:
    line = source_lines[s.lineno - 1].strip() if 0 < s.lineno <= len(source_lines) else ""
    end = getattr(s, "end_lineno", s.lineno) or s.lineno
    return line + (" ..." if end > s.lineno else "")


# ---------------------------------------------------------------------- loading


def _future_flags(tree: ast.Module) -> int:
    flags = 0
    for s in tree.body:
        if isinstance(s, ast.ImportFrom) and s.module == "__future__":
            for a in s.names:
                feature = getattr(_future, a.name, None)
                if feature is not None:
                    flags |= feature.compiler_flag
    return flags


def load_definitions(path: str | os.PathLike[str]) -> Loaded:
    """Execute only the definitions of the script at ``path`` (see the module docstring).

    The caller decides what stdout is (``verify`` sends it to stderr) and keeps the script's
    directory on ``sys.path`` while the functions run; this function puts it there for the load
    and leaves it there (callers restore ``sys.path``).
    """
    path = os.fspath(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    source = raw.decode("utf-8-sig", errors="replace")
    tree = ast.parse(raw, filename=path)
    stem = os.path.splitext(os.path.basename(path))[0]
    modname = f"_amplint_loaded_{''.join(c if c.isalnum() else '_' for c in stem)}_{next(_load_counter)}"
    module = types.ModuleType(modname, ast.get_docstring(tree))
    module.__file__ = path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    loaded = Loaded(module, path, tree, source)
    script_dir = os.path.dirname(os.path.abspath(path))
    if not sys.path or sys.path[0] != script_dir:
        sys.path.insert(0, script_dir)
    sys.modules[modname] = module
    aliases = _aliases(tree)
    lines = source.splitlines()
    flags = _future_flags(tree)
    ns = module.__dict__
    for s in tree.body:
        why = _why_skipped(s, aliases)
        if why is not None:
            sk = Skipped(s.lineno, _first_line(lines, s), why, frozenset(bound_names([s])))
            loaded.skipped.append(sk)
            for name in sk.names:
                loaded.skipped_defs[name] = sk
            continue
        code = compile(ast.Module(body=[s], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, ns)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from an imported module too
            text = f"{type(exc).__name__}: {exc}"
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for name in bound_names([s]):
                    loaded.failed[name] = f"line {s.lineno} ({_first_line(lines, s)}) raised {text}"
                continue
            loaded.unload()
            raise LoadError(f"line {s.lineno} ({_first_line(lines, s)}) raised {text}") from exc
        loaded.ran.append(s.lineno)
        for name in bound_names([s]):
            loaded.skipped_defs.pop(name, None)
            loaded.failed.pop(name, None)
    return loaded
