"""``amplint explain PATH[:FUNCTION]``: the facts the model and the project index hold for a
function (or every analysed function of the file), so a user can see why amplint spoke or
stayed silent: the scalers in scope and where they were built, the AMP events in order with
their loops, branch guards and autocast regions, and each call with the project function it
resolves to and that function's composed summary."""

from __future__ import annotations

import ast
import os

from amplint.model.facts import Func


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
    if wanted and not funcs:
        return f"{path}: no analysed function `{wanted}` (functions without AMP code are not walked)\n"
    for f in ([model.funcs[0]] if not wanted else []) + funcs:
        out.append("")
        out.extend(_function(model, index, f))
    return "\n".join(out) + "\n"


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
    calls = []
    for c in f.calls:
        hit = model.project_callee(c)
        if hit is None:
            continue
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
        calls.append(f"    L{c.node.lineno} {model.text(c.node.func)}() -> {rel}:{cs.qualname}: {'; '.join(what) or 'nothing AMP'}  [{_ctx(c.ctx)}]")
    if calls:
        out.append("  calls into the project:")
        out.extend(calls)
    return out
