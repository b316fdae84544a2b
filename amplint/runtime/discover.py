"""Which functions of a script ``amplint verify`` runs, and how (without running the script).

1. :func:`amplint.runtime.loader.load_definitions` executes the file's imports, definitions and
   constant assignments only (its prints go to stderr).
2. :func:`amplint.runtime.static_info.analyse` asks the static model which functions and
   methods train (scale/backward/step/update/optimizer.step) and which same-file functions
   call them.
3. :func:`amplint.runtime.roles.build_plan` maps each one's parameters (and ``self``
   attributes, and module-level names it needs) to the harness objects.

Without ``function=``, verify runs the outermost functions that can be mapped: a training
function called by another mappable one (``train_step`` called by ``train_loop``,
``Trainer.train_step`` called by ``Trainer.fit``) is verified through its caller. A caller
that cannot be mapped (``main()`` builds its own model) is reported as a note when what it
calls is verified, as an error otherwise.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
from typing import Any

from amplint.runtime.fit import fit_problem
from amplint.runtime.loader import LoadError, Loaded, load_definitions
from amplint.runtime.roles import Plan, build_plan
from amplint.runtime.static_info import FileInfo, FuncInfo, analyse
from amplint.runtime.toplevel import FUNC_NAME, compile_toplevel

__all__ = ["Target", "Discovery", "UsageError", "discover"]


class UsageError(ValueError):
    """A wrong ``--function`` or ``--arg`` (the command exits 2)."""


class Target:
    """One candidate function: ``status`` is run | covered | unmapped | caller."""

    def __init__(self, func: FuncInfo, plan: Plan, status: str, reason: str = "") -> None:
        self.func = func
        self.plan = plan
        self.status = status
        self.reason = reason

    def __repr__(self) -> str:
        return f"Target({self.func.qualname!r}, {self.status!r})"


class Discovery:
    def __init__(self, path: str, display: str) -> None:
        self.path = path
        self.display = display
        self.loaded: Loaded | None = None
        self.info: FileInfo | None = None
        self.targets: list[Target] = []
        self.error: str | None = None  # the file could not be loaded, or holds nothing to verify
        self.toplevel_why: str | None = None  # why a top-level loop could not be compiled

    @property
    def to_run(self) -> list[Target]:
        return [t for t in self.targets if t.status == "run"]


def _display_path(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path))
    return rel if not rel.startswith("..") else path


def _top_level_message(display: str, info: FileInfo) -> str:
    lines = info.module_lines
    spans = sorted({(s.lineno, s.end_lineno or s.lineno) for s in info.tree.body
                    if any(s.lineno <= n <= (s.end_lineno or s.lineno) for n in lines)})
    start, end = (spans[0][0], spans[-1][1]) if spans else (lines[0], lines[-1])
    where = f"line {start}" if start == end else f"lines {start}-{end}"
    return (f"no training function: the training loop runs at the top level of {display} ({where}), "
            f"and verify never runs top-level code; put the loop in a function, e.g. "
            f"`def train(model, loader, optimizer, scaler): ...`, and verify that")


def _loop_code(info: FileInfo, func: Any) -> list[ast.AST]:
    """The code whose loss and reshaping the harness's problem must fit: the function, the
    same-file functions it calls, its class (a method) and the module's top-level assignments."""
    nodes: list[ast.AST] = [f.node for f in info.callees_closure(func.qualname)]
    if func.cls and func.cls in info.classes:
        nodes.append(info.classes[func.cls].node)
    nodes.extend(s for s in info.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)))
    return nodes


def discover(path: str | os.PathLike[str], *, function: str | None = None,
             overrides: dict[str, str] | None = None, dtype_name: str = "float16") -> Discovery:
    """Load ``path``'s definitions and decide what to run (see the module docstring).

    Raises :class:`UsageError` when ``function`` names no function of the file.
    """
    path = os.fspath(path)
    d = Discovery(path, _display_path(path))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            loaded = load_definitions(path)
    except SyntaxError as exc:
        d.error = f"cannot parse: SyntaxError: {exc.msg} (line {exc.lineno})"
        return d
    except LoadError as exc:
        d.error = f"import failed: {exc}"
        return d
    except OSError as exc:
        d.error = f"cannot read: {exc}"
        return d
    d.loaded = loaded
    info = analyse(loaded.source, loaded.tree)
    d.info = info
    cands = info.candidates()
    if function is not None:
        matches = [f for f in info.funcs.values() if function in (f.qualname, f.name)]
        if not matches:
            known = ", ".join(f.qualname for f in cands) or "none"
            raise UsageError(f"{d.display}: no function or method named {function!r} "
                             f"(training functions here: {known})")
        if len(matches) > 1:
            raise UsageError(f"{d.display}: {function!r} is ambiguous: "
                             + ", ".join(f.qualname for f in matches) + " (give Class.method)")
        cands = matches
    if not cands:
        if info.module_events and function is None:
            t = _toplevel_target(d, loaded, info, overrides, dtype_name)
            if t is not None:
                d.targets.append(t)
                return d
        d.error = (_top_level_message(d.display, info) if info.module_events else
                   "no training function found: no function or method here calls scaler.scale/step/"
                   "update, backward() or optimizer.step()")
        return d
    plans = {f.qualname: build_plan(info, f, loaded, f"{d.display}:{f.qualname}", overrides, dtype_name)
             for f in cands}
    models = [c for q, c in info.classes.items() if "." not in q and any(b.split(".")[-1] == "Module" for b in c.bases)
              and isinstance(loaded.namespace.get(q), type)]
    for f in cands:
        gan = _gan_reason(f)
        if gan:
            plans[f.qualname].problems[:] = [gan]
        plans[f.qualname].problem = _with_optimizer(fit_problem(_loop_code(info, f)), loaded)
        if len(models) == 1:  # the file's one model class: the harness builds it when it can
            plans[f.qualname].model_class = loaded.namespace[models[0].qualname]
    if function is not None:
        f = cands[0]
        p = plans[f.qualname]
        d.targets.append(Target(f, p, "run" if p.ok else "unmapped", "; ".join(p.problems)))
        return d
    mapped = [f for f in cands if plans[f.qualname].ok]
    covered: dict[str, str] = {}
    for m in mapped:
        for callee in info.callees_closure(m.qualname)[1:]:
            covered.setdefault(callee.qualname, m.qualname)
    run = [f for f in mapped if f.qualname not in covered]
    run_names = {f.qualname for f in run}
    for f in cands:
        p = plans[f.qualname]
        if f.qualname in run_names:
            d.targets.append(Target(f, p, "run"))
        elif f.qualname in covered:
            d.targets.append(Target(f, p, "covered", f"verified through {d.display}:{covered[f.qualname]}"))
        else:
            reached = {c.qualname for c in info.callees_closure(f.qualname)[1:]} & (run_names | set(covered))
            if reached:
                via = sorted(reached)[0]
                d.targets.append(Target(f, p, "caller", "; ".join(p.problems)
                                        + f"; what it calls is verified ({d.display}:{via})"))
            else:
                d.targets.append(Target(f, p, "unmapped", "; ".join(p.problems)))
    return d


_GAN_G = re.compile(r"^(generator|gen|netg|g|g_?net|g_?model|model_?g|generator_?model)$", re.IGNORECASE)
_GAN_D = re.compile(r"^(discriminator|disc|netd|d|d_?net|d_?model|model_?d|critic|discriminator_?model)$",
                    re.IGNORECASE)


def _gan_reason(func: FuncInfo) -> str | None:
    """Why a GAN step or loop (a generator and a discriminator parameter) is not verified, or None."""
    names = [p.name for p in func.call_params]
    g = [n for n in names if _GAN_G.match(n)]
    d = [n for n in names if _GAN_D.match(n)]
    if not g or not d:
        return None
    opts = [n for n in names if re.search(r"opt", n, re.IGNORECASE)]
    scalers = [n for n in names if re.search(r"scaler", n, re.IGNORECASE)]
    return (f"a GAN (generator `{g[0]}`, discriminator `{d[0]}`"
            + (f", optimizers {', '.join(f'`{o}`' for o in opts)}" if opts else "")
            + (f", {len(scalers)} GradScaler{'s' if len(scalers) > 1 else ''}" if scalers else "")
            + "): the harness builds one model and compares it with a supervised reference loop; it has no "
              "generator/discriminator pair and no adversarial reference of the same computation, so it "
              "cannot say whether this loop's AMP matches one")


def _toplevel_target(d: Discovery, loaded: Loaded, info: FileInfo, overrides: dict[str, str] | None,
                     dtype_name: str) -> Target | None:
    """The script's top-level loop compiled into a function (:mod:`amplint.runtime.toplevel`);
    None when it cannot be (the top-level message stands)."""
    top = compile_toplevel(loaded)
    if top.error or top.node is None:
        d.toplevel_why = top.error
        return None
    tree = ast.Module(body=[*loaded.tree.body, top.node], type_ignores=[])
    info2 = analyse(loaded.source, tree)
    f = info2.funcs.get(FUNC_NAME)
    if f is None:
        return None
    display = f"{d.display}:<top level>"
    plan = build_plan(info2, f, loaded, display, overrides, dtype_name)
    plan.toplevel = top
    plan.problem = _with_optimizer(
        fit_problem([top.node, *(s for s in loaded.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)))]), loaded)
    models = [c for q, c in info2.classes.items() if "." not in q
              and any(b.split(".")[-1] == "Module" for b in c.bases) and isinstance(loaded.namespace.get(q), type)]
    if len(models) == 1:
        plan.model_class = loaded.namespace[models[0].qualname]
    lines = sorted(top.kept)
    plan.notes.append(f"the script's top-level statements (lines {', '.join(map(str, lines))}) compiled into "
                      f"a function of {', '.join(top.params) or 'no names'}; the rest of the top level is not run")
    if top.epoch_options:
        plan.notes.append("argparse defaults (sys.argv ignored), with " + ", ".join(
            f"args.{o} = 1" for o in top.epoch_options))
    fixed = [s.name for s in plan.slots if s.role in ("inputs", "targets", "batch")]
    gan = _gan_reason(f)
    if gan:
        plan.problems[:] = [gan]
    elif fixed:
        where = "; ".join(f"`{n}` from {top.dropped[n]}" if n in top.dropped else f"`{n}`" for n in fixed)
        plan.problems.append(f"the top-level loop trains on tensors the script builds itself ({where}), "
                             f"not on batches from a loader, so the harness cannot hand it its tiny batches")
    else:
        for i, p in enumerate(plan.problems):
            for n, where in top.dropped.items():
                if p.startswith(f"parameter `{n}` has no known role"):
                    plan.problems[i] = (f"`{n}` (bound by the top-level statement at {where}, which verify "
                                        f"does not run) has no known role; pass --arg {n}=...")
    return Target(f, plan, "run" if plan.ok else "unmapped", "; ".join(plan.problems))


def unused_overrides(discoveries: list[Discovery], overrides: dict[str, str]) -> list[str]:
    """``--arg`` names that no function verify runs (or was asked for) uses."""
    used: set[str] = set()
    for d in discoveries:
        for t in d.targets:
            if t.status in ("run", "unmapped"):
                used |= set(overrides) - set(getattr(t.plan, "unused_overrides", overrides))
    return sorted(set(overrides) - used)


def _with_optimizer(problem, loaded):
    """The fitted problem with the optimizer class and settings the script builds (read from its
    code; verify keeps them only if the reference passes every check with them)."""
    import dataclasses

    from amplint.runtime.optim_spec import read_optimizer

    if problem.unknown:
        return problem
    spec, why = read_optimizer(loaded.tree, loaded.namespace)
    return dataclasses.replace(problem, optimizer=spec, optimizer_note=why)
