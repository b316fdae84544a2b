"""``amplint explain PATH[:FUNCTION]``: the facts the model and the project index hold for a
function (or every analysed function of the file), so a user can see why amplint spoke or
stayed silent: the scalers in scope and where they were built, the AMP events in order with
their loops, branch guards and autocast regions, and each call with the project function it
resolves to and that function's composed summary. First come the findings (those of
``amplint check`` on the file, in the same project), each with the facts behind it: the events
of its function at that line and the other events on the same scaler or optimizer."""

from __future__ import annotations

import ast
import os

from amplint.model.facts import Func


class UnknownFunction(Exception):
    """PATH:FUNCTION names no function of the file (the message lists the ones it has)."""


def explain(target: str, settings) -> str:
    from amplint.discover import discover, project_root
    from amplint.model import build_model
    from amplint.model.index import ProjectIndex
    from amplint.source import read_source

    path, _, wanted = target.rpartition(":") if not os.path.exists(target) else (target, "", "")
    text = read_source(path).text
    tree = ast.parse(text, filename=path)
    root = project_root(settings, [path])
    roots = [os.path.normpath(os.path.join(root, s)) for s in settings.src]
    files = discover([root], settings, suffixes=(".py",)).files
    index = ProjectIndex(roots, [*files, path], texts={path: text})
    model = build_model(text, tree, path, index)
    out = [f"{path}: module {index.module_of.get(os.path.abspath(path), '?')} (project root {root})"]
    keys = model.scaler_keys()
    if keys:
        out.append("scalers:")
        for k in keys:
            built = [f"line {a.node.lineno}" for a in model.constructions(k) if hasattr(a.node, "lineno")]
            out.append(f"  {_key(k)}: {model.scaler_status(k)}" + (f", built at {', '.join(built)}" if built else ""))
    funcs = [f for f in model.funcs if f.node is not tree and (not wanted or wanted in (f.name, f.qualname))]
    defined = _defined(tree)
    if wanted and not funcs:
        if not any(wanted in names for names in defined):
            known = ", ".join(q for q, _ in defined) or "none"
            raise UnknownFunction(f"no function `{wanted}` in {path}; its functions: {known}")
        out.append("")
        out.append(f"function {wanted}: no AMP events (a function without AMP code, or only reached through calls, is not walked)")
    span = None
    if wanted and funcs:
        span = (min(f.node.lineno for f in funcs), max(f.node.end_lineno or f.node.lineno for f in funcs))
    out.extend(_findings(model, path, settings, span))
    for f in ([model.funcs[0]] if not wanted else []) + funcs:
        out.append("")
        out.extend(_function(model, index, f))
    return "\n".join(out) + "\n"


def _defined(tree) -> list[tuple[str, tuple[str, str]]]:
    """Every function of the file: (qualname, (name, qualname))."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((q, (child.name, q)))
                walk(child, q + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def _findings(model, path: str, settings, span) -> list[str]:
    """The findings ``amplint check`` reports on the file (within ``span``, lines, if given),
    each with its rule, severity and the facts of its function behind it."""
    from amplint.pipeline import Options, _analyse, file_messages
    from amplint.report import display_path
    from amplint.selection import Filter, enabled_codes

    enabled = enabled_codes(settings)
    opts = Options(paths=(path,), no_cache=True, cache_dir=None, jobs=1, per_file_timeout=None)
    results = _analyse([path], opts, settings, enabled)
    messages, why = [], {}
    for r in results:
        r.path = display_path(path)
        messages += file_messages(r, Filter(settings, enabled), False, {})
        why.update({(d.code, d.row, d.col): d.why for d in r.diagnostics if d.why})
    if span is not None:
        messages = [m for m in messages if span[0] <= m.row <= span[1]]
    out = ["", f"findings: {len(messages) or 'none'}"]
    for m in sorted(messages, key=lambda m: (m.row, m.col, m.code)):
        out.append(f"  {m.path}:{m.row}:{m.col + 1}: {m.code} [{m.severity}] {m.name or ''}: {m.message}".replace(" : ", ": "))
        if (path_ := why.get((m.code, m.row, m.col))):
            out.append("    path (the core's analysis):")
            out.extend(f"      L{row} {text}" for row, text in path_)
        out.extend(_facts_of(model, m.row))
    return out


def _facts_of(model, row: int) -> list[str]:
    """The events behind a finding at ``row``: in the innermost analysed function holding it,
    the events on that line (marked ``>``) and the others on the same scaler or optimizer."""
    holding = [f for f in model.funcs if f.events and getattr(f.node, "lineno", 1) <= row <= (getattr(f.node, "end_lineno", None) or 10**9)]
    if not holding:
        return ["    facts: no AMP events in the function holding this line"]
    f = max(holding, key=lambda f: getattr(f.node, "lineno", 0))
    here = [e for e in f.events if e.node.lineno <= row <= (getattr(e.node, "end_lineno", None) or e.node.lineno)]
    scalers = {e.scaler for e in here if e.scaler}
    optims = {e.optimizer for e in here if e.optimizer}
    related = [e for e in f.events if e in here or (e.scaler and e.scaler in scalers) or (e.optimizer and e.optimizer in optims)]
    if not scalers and not optims:  # a clip, an autocast, a call: every event of the function
        related = f.events
    where = "module body" if isinstance(f.node, ast.Module) else f"function {f.qualname}"
    out = [f"    facts ({where}):"]
    for e in related:
        mark = ">" if e in here else " "
        who = " ".join(x for x in (f"scaler={_key(e.scaler)}" if e.scaler else "", f"optimizer={e.optimizer}" if e.optimizer else "",
                                   "scaled" if e.scaled else "") if x)
        out.append(f"     {mark} L{e.node.lineno} {e.kind} {who}  [{_ctx(e.ctx)}]".rstrip())
    for c in f.calls:
        if c.node.lineno <= row <= (getattr(c.node, "end_lineno", None) or c.node.lineno) and (line := _call(model, c)) is not None:
            out.append("     > " + line.lstrip())
    return out


def _key(k) -> str:
    if k[0] == "A":
        return f"self.{k[2]} (attribute of {k[1]})"
    if k[0] == "G":
        return f"{k[1]} (module global)"
    return f"{k[-1]} (local)"


def _ctx(ctx) -> str:
    parts = []
    for loop in ctx.loops:
        parts.append(f"loop@{loop.node.lineno}")
    for lit in sorted(ctx.lits, key=lambda x: x.group):
        parts.append(f"if[{lit.key or 'try'}{'' if lit.pol else ' is false'}]" if lit.key else "in-except/else")
    for a in ctx.autocasts:
        parts.append(f"autocast@{a.with_node.lineno}({a.enabled}{', ' + a.dtype if a.dtype else ''})")
    if ctx.in_finally:
        parts.append("finally")
    return " ".join(parts)


def _function(model, index, f: Func) -> list[str]:
    line = getattr(f.node, "lineno", 1)
    out = [f"{'module body' if isinstance(f.node, ast.Module) else 'function ' + f.qualname} (line {line})"]
    if f.params:
        out.append(f"  params: {', '.join(f.params)}")
    if f.events:
        out.append("  events:")
        for e in f.events:
            who = " ".join(x for x in (
                f"scaler={_key(e.scaler)}" if e.scaler else "",
                f"optimizer={e.optimizer}" if e.optimizer else "",
                "scaled" if e.scaled else "",
                "new_scale" if e.extra.get("value") else "",
            ) if x)
            out.append(f"    L{e.node.lineno} {e.kind} {who}  [{_ctx(e.ctx)}]".rstrip())
    calls = [line for c in f.calls if (line := _call(model, c)) is not None]
    if calls:
        out.append("  calls into the project:")
        out.extend(calls)
    return out


def _call(model, c) -> str | None:
    """A call that resolves into the project, with the summary of its callee."""
    hit = model.project_callee(c)
    if hit is None:
        return None
    cpath, cs, facts = hit
    what = []
    if facts.scaler_ops:
        what.append("scaler ops " + ", ".join(f"{p}: {'/'.join(sorted(v))}" for p, v in sorted(facts.scaler_ops.items())))
    if facts.backward:
        what.append("runs backward")
    if facts.saves_param:
        what.append("saves " + ", ".join(sorted(facts.saves_param)))
    for d in facts.dict_saves:
        what.append(f"writes a checkpoint (optimizer state: {d.has_opt}, scaler state: {d.has_scaler or bool(d.scaler_params)})")
    if facts.returns:
        what.append(f"returns {facts.returns}" + (f" ({facts.returns_dtype})" if facts.returns_dtype else ""))
    rel = os.path.relpath(cpath)
    return f"    L{c.node.lineno} {model.text(c.node.func)}() -> {rel}:{cs.qualname}: {'; '.join(what) or 'nothing AMP'}  [{_ctx(c.ctx)}]"
