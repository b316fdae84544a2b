"""Compile a script's top-level training loop into a function ``amplint verify`` can call.

A script whose loop runs at module level (or in its ``if __name__ == "__main__":`` block) has no
function to map. :func:`compile_toplevel` builds one from the module's own statements, without
running any of them:

* the statements are the module's top level, with the ``__main__`` block's body in its place;
* kept, in source order: the argparse statements (``parser = argparse.ArgumentParser(...)``,
  ``parser.add_argument(...)``; ``args = parser.parse_args()`` becomes a parse of no arguments,
  so the defaults, with ``sys.argv`` ignored, and any ``epochs``-like option set to 1), and every
  compound statement (``for``/``while``/``with``/``if``/``try``) that trains (calls
  ``backward``, ``step``, ``update`` or ``scale``);
* dropped (never run): everything else: the model, optimizer, scaler and data loader
  constructions, prints, saves, file writes;
* the names the kept statements read that nothing kept binds and the loaded definitions do not
  define become the parameters of ``_amplint_toplevel(...)``; the role mapping then hands them
  the harness objects (``model``, ``optimizer``, ``scaler``, ``loader`` / ``train_loader`` <- one
  epoch of the tiny batches, ...). A name with no role leaves the function unmapped, which
  verify reports as ``cannot verify`` with the statement that would have bound it.

The function's statements keep their line numbers, so tracebacks and sanitizer findings point at
the script's own lines.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

from amplint.runtime.loader import Loaded, _is_main_guard, bound_names

__all__ = ["TopLevel", "compile_toplevel", "FUNC_NAME"]

FUNC_NAME = "_amplint_toplevel"
PARSE_HOOK = "_amplint_parse_defaults"
_TRAIN_ATTRS = {"backward", "step", "update", "scale"}
_EPOCH_OPT = re.compile(r"^(epochs|num_epochs|n_epochs|max_epochs|nepochs|num_epoch|total_epochs)$")


class TopLevel:
    """The compiled function and what went into it."""

    def __init__(self) -> None:
        self.func: Any = None
        self.node: ast.FunctionDef | None = None
        self.params: list[str] = []
        self.kept: list[int] = []  # first lines of the kept statements
        self.dropped: dict[str, str] = {}  # parameter name -> the dropped statement that bound it
        self.epoch_options: list[str] = []
        self.error: str | None = None


def _trains(s: ast.stmt) -> bool:
    for n in ast.walk(s):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _TRAIN_ATTRS:
            return True
    return False


def _is_parser_stmt(s: ast.stmt) -> bool:
    """``parser = argparse.ArgumentParser(...)``, ``parser.add_argument(...)``,
    ``group = parser.add_argument_group(...)``, ``args = parser.parse_args()``."""
    v = s.value if isinstance(s, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if not isinstance(v, ast.Call):
        return False
    f = v.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in ("ArgumentParser", "add_argument", "add_argument_group", "add_mutually_exclusive_group",
                    "set_defaults", "parse_args", "parse_known_args")


class _ParseArgs(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("parse_args", "parse_known_args"):
            call = ast.Call(func=ast.Name(PARSE_HOOK, ast.Load()),
                            args=[f.value, ast.Constant(f.attr == "parse_known_args")], keywords=[])
            return ast.copy_location(call, node)
        return node


def _script_body(tree: ast.Module) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in tree.body:
        if isinstance(s, ast.If) and _is_main_guard(s.test):
            out.extend(s.body)
        else:
            out.append(s)
    return out


def _reads_and_binds(stmts: list[ast.stmt]) -> tuple[list[str], set[str]]:
    reads: list[str] = []
    bound = set(bound_names(stmts))
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    if n.id not in reads:
                        reads.append(n.id)
                else:
                    bound.add(n.id)
            elif isinstance(n, ast.comprehension):
                bound |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
            elif isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                bound |= {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
                bound |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
            elif isinstance(n, ast.ExceptHandler) and n.name:
                bound.add(n.name)
    return reads, bound


def _parse_defaults(epoch_opts: list[str]):
    def parse(parser: Any, known: bool) -> Any:
        ns = parser.parse_known_args([])[0] if known else parser.parse_args([])
        for k in list(vars(ns)):
            if _EPOCH_OPT.match(k):
                setattr(ns, k, 1)
                if k not in epoch_opts:
                    epoch_opts.append(k)
        return (ns, []) if known else ns
    return parse


def compile_toplevel(loaded: Loaded) -> TopLevel:
    """Build ``_amplint_toplevel`` from ``loaded``'s top-level statements (see the module docstring)
    and define it in the loaded module's namespace."""
    out = TopLevel()
    body = _script_body(loaded.tree)
    kept: list[ast.stmt] = []
    dropped: list[ast.stmt] = []
    for s in body:
        if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        if _is_parser_stmt(s):
            kept.append(_ParseArgs().visit(s))
            v = s.value
            if isinstance(v.func, ast.Attribute) and v.func.attr == "add_argument":
                for a in v.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        opt = a.value.lstrip("-").replace("-", "_")
                        if _EPOCH_OPT.match(opt) and opt not in out.epoch_options:
                            out.epoch_options.append(opt)
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try)) \
                and _trains(s):
            kept.append(s)
        else:
            dropped.append(s)
    if not any(_trains(s) for s in kept):
        out.error = "no training loop at the top level (no for/while/with block calls backward/step/update)"
        return out
    ns = loaded.namespace
    reads, bound = _reads_and_binds(kept)
    params = [n for n in reads if n not in bound and n not in ns and not hasattr(builtins, n)
              and n != PARSE_HOOK]
    lines = loaded.source.splitlines()
    for s in dropped:
        for n in bound_names([s]):
            if n in params and n not in out.dropped:
                text = lines[s.lineno - 1].strip() if 0 < s.lineno <= len(lines) else ""
                out.dropped[n] = f"line {s.lineno} ({text})"
    fn = ast.FunctionDef(
        name=FUNC_NAME,
        args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=kept, decorator_list=[], returns=None, type_params=[])
    first = kept[0]
    fn.lineno, fn.col_offset = first.lineno, 0
    fn.end_lineno, fn.end_col_offset = kept[-1].end_lineno, 0
    for a in fn.args.args:
        a.lineno, a.col_offset = first.lineno, 0
    ast.fix_missing_locations(fn)
    mod = ast.Module(body=[fn], type_ignores=[])
    ns[PARSE_HOOK] = _parse_defaults(out.epoch_options)
    try:
        exec(compile(mod, loaded.path, "exec"), ns)  # only defines the function
    except SyntaxError as exc:  # e.g. a `return` at the top level of main()'s body
        out.error = f"the top-level statements do not compile as a function: {exc.msg} (line {exc.lineno})"
        return out
    out.func = ns[FUNC_NAME]
    out.node = fn
    out.params = params
    out.kept = [s.lineno for s in kept]
    return out
