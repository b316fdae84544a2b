"""The semantic core (amplint/core): the control-flow graph and the scaler typestate."""

from __future__ import annotations

import ast
import textwrap

from amplint.core import cfg
from amplint.core.typestate import CLEAR, MORE, UNKNOWN, ScalerStates
from amplint.model import build_model


def _graph(src):
    tree = ast.parse(textwrap.dedent(src))
    return tree, cfg.build(tree.body[0])


def _at(tree, line):
    return next(n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line)


def test_loop_back_edge_break_and_continue():
    tree, g = _graph(
        """
        def f(xs):
            for x in xs:
                if x:
                    continue
                if x > 3:
                    break
                work(x)
            done()
        """
    )
    loop, cont, brk, work, done = (g.node_of[id(_at(tree, n))] for n in (3, 5, 7, 8, 9))
    assert cont.succ == [loop]  # continue goes back to the loop header
    assert brk.succ == [done]  # break leaves the loop
    assert work.succ == [loop]
    assert done in loop.succ and g.exit in done.succ
    assert g.loops_around(work.stmt) == [loop.stmt]


def test_while_true_leaves_only_by_break_and_return_runs_finally():
    tree, g = _graph(
        """
        def f(it):
            while True:
                try:
                    x = next(it)
                    if x is None:
                        return 1
                finally:
                    close()
            after()
        """
    )
    loop, ret, fin, after = (g.node_of[id(_at(tree, n))] for n in (3, 7, 9, 10))
    assert after not in loop.succ  # `while True:` has no exit edge of its own
    assert not after.pred  # nothing breaks out: unreachable
    assert ret.succ == [fin]  # the return runs the finally body first
    assert g.exit in fin.succ


def test_except_handler_is_entered_from_every_statement_of_the_try_body():
    tree, g = _graph(
        """
        def f():
            try:
                a()
                b()
            except ValueError:
                c()
            d()
        """
    )
    a, b, c = (g.node_of[id(_at(tree, n))] for n in (4, 5, 7))
    assert c in a.succ and c in b.succ


def _states(src, key_name="scaler"):
    text = textwrap.dedent(src)
    tree = ast.parse(text)
    m = build_model(text, tree, "t.py")
    f = next(fn for fn in m.funcs if fn.name == "train")
    key = next(k for k in m.scaler_keys() if k[-1] == key_name)
    return tree, ScalerStates(m, f, key)


def _show(v):
    if v == UNKNOWN:
        return "unknown"
    if v == CLEAR:
        return "clear"
    return ",".join([f"{e.kind}@{e.node.lineno}" for e in sorted((e for e in v if e is not MORE), key=lambda e: e.seq)]
                    + (["more"] if MORE in v else []))


def test_typestate_open_clear_and_unknown():
    tree, st = _states(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def train(loader, model, opt):
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(opt)
                log(x)
                if x:
                    scaler.update()
                tail(x)
                helper(scaler)
                end(x)
        """
    )
    log, tail, end = (_at(tree, n) for n in (8, 11, 13))
    # the previous iteration ended after a helper was handed the scaler: more may have run
    assert [_show(v) for v in st.on_entry(log).values()] == ["step@7,more"]
    assert st.open_on_entry(log).event.kind == "step"
    # updated under `x` only: clear when x holds, still open when it does not
    assert {tuple(sorted((x[0], x[1]) for x in a)): _show(v) for a, v in st.on_entry(tail).items()} == {
        (("x", True),): "clear", (("x", False),): "step@7,more"}
    assert st.open_on_entry(tail).event.kind == "step"
    assert [_show(v) for v in st.on_entry(end).values()] == ["unknown", "unknown"]  # a helper was handed the scaler


def test_typestate_keeps_paths_apart_under_the_scalers_own_branch_test():
    tree, st = _states(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def train(loader, model, opt, use_amp):
            for x in loader:
                if use_amp:
                    scaler.step(opt)
                else:
                    opt.step()
                mid(x)
                if use_amp:
                    scaler.update()
                last(x)
        """
    )
    mid, last = _at(tree, 10), _at(tree, 13)
    assert sorted(_show(v) for v in st.on_entry(mid).values()) == ["clear", "step@7"]
    # the second `if use_amp:` is correlated with the first: both paths are clear after it
    assert {_show(v) for v in st.on_entry(last).values()} == {"clear"}


def _imports(package):
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent / "amplint" / package
    for path in root.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Import):
                yield from ((path.name, a.name) for a in n.names)
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                yield path.name, n.module


def test_walls_between_the_layers():
    """The static core never imports torch or runtime/; the model and the core never import
    rules; rules never import the CLI or the reporters."""
    bad = []
    for package, banned in (
        ("core", ("torch", "amplint.runtime", "amplint.rules", "amplint.cli", "amplint.clickapp", "amplint.report")),
        ("model", ("torch", "amplint.runtime", "amplint.rules", "amplint.cli", "amplint.clickapp", "amplint.report")),
        ("rules", ("torch", "amplint.runtime", "amplint.cli", "amplint.clickapp", "amplint.report")),
    ):
        bad += [(package, f, m) for f, m in _imports(package) if any(m == b or m.startswith(b + ".") for b in banned)]
    assert bad == []


def test_describe_says_the_state_per_assumption_set():
    tree, st = _states(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def train(loader, model, opt, use_amp):
            for x in loader:
                if use_amp:
                    scaler.step(opt)
                else:
                    opt.step()
                mid(x)
                scaler.update()
        """
    )
    assert st.describe(_at(tree, 10)) == ["if not use_amp: clear (no step since the last update)", "if use_amp: open: step@7"]


def test_grads_scaled_until_unscale_and_fresh_backward_ends_a_zero_grad():
    from amplint.core.grads import GradStates

    src = textwrap.dedent(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        def f(loader, opt, model):
            for x in loader:
                opt.zero_grad()
                scaler.scale(model(x)).backward()
                if log:
                    n = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
        """
    )
    m = build_model(src, ast.parse(src), "t.py")
    f = next(g for g in m.funcs if g.name == "f")
    clips = [e for e in f.events if e.kind == "clip"]
    (zero,) = [e for e in f.events if e.kind == "zero_grad"]
    (step,) = [e for e in f.events if e.kind == "step"]
    s = GradStates(m, f, step.scaler, clips + [zero])
    assert s.scaled_at(clips[0]) and not s.scaled_at(clips[1])  # unscale_ ends "scaled"
    assert s.reaches(clips[0], step) and not s.reaches(clips[1], step)  # only a scaled read is followed
    assert not s.reaches(zero, step)  # the backward after the zero_grad writes fresh gradients
    # the zero_grad at the loop top sees the last iteration's gradients only after an update
    assert not any(fact[0] == "B" for st in s.facts_before(zero) for fact in st)


def test_avoidable_is_path_sensitive_on_repeated_tests_and_forgets_varying_ones_at_loop_heads():
    tree, g = _graph(
        """
        def f(xs, amp):
            for x in xs:
                if amp:
                    build()
                if amp:
                    use()
                if x:
                    build2()
                if x:
                    use2()
        """
    )
    build, use, build2, use2, loop = (_at(tree, n) for n in (5, 7, 9, 11, 3))
    # `amp` never changes in the loop: no pass reaches use() without build() first
    assert not cfg.avoidable(g, loop, use, build, loop)
    assert not cfg.avoidable(g, None, use, build)
    # `x` is the loop's target, but within one pass the two `if x:` agree
    assert not cfg.avoidable(g, loop, use2, build2, loop)
    # within a pass and round the head: `if x:` agree within a pass, and the next pass
    # through `if x:` that reaches use2() takes build2() too
    assert cfg.avoidable(g, use, use2, build2, loop) is False
    assert cfg.avoidable(g, use2, use, build, loop) is False
    assert cfg.avoidable(g, use, loop, build, loop)


def test_lifetime_follows_the_object_a_scaler_key_holds():
    from amplint.core.lifetime import Lifetime

    src = textwrap.dedent(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        if resume:
            scaler.load_state_dict(ckpt["scaler"])
        if scaler is None:
            scaler = torch.amp.GradScaler("cuda")
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(loss).backward()
        """
    )
    model = build_model(src, ast.parse(src), "t.py")
    key = ("G", "scaler")
    life = Lifetime(model, model.funcs[0], key)
    news = life.of_kind("new")
    assert [n.line for n in news] == [3, 7, 8]
    # the lazy construction under `if scaler is None:` replaces nothing; line 8 drops the restore
    assert life.discarded_restore(news[1]) is None
    assert life.discarded_restore(news[2]).line == 5
    assert {u.line for u in life.uses_of(news[2])} == {9} and life.uses_of(news[0]) == []
    assert not life.restored_later(news[2]) and life.restored_later(news[0])


def test_dict_flow_follows_a_checkpoint_dict_over_paths_and_stops_at_code_it_cannot_read():
    from amplint.core.containers import DictFlow

    src = textwrap.dedent(
        """
        import torch
        def save(model, optimizer, scaler, path, amp):
            opt_state = optimizer.state_dict()
            ckpt = {"model": model.state_dict(), "optimizer": opt_state}
            if amp:
                ckpt["scaler"] = scaler.state_dict()
            torch.save(ckpt, path)
            other = {"a": 1}
            log(other)
            torch.save(other, path)
        """
    )
    model = build_model(src, ast.parse(src), "t.py")
    f = next(f for f in model.funcs if f.name == "save")
    flow = DictFlow(model, f)
    first, second = (_at(model.tree, n) for n in (8, 11))
    got = flow.contents(first, "ckpt")
    # the alias is resolved to its call; the scaler entry is held on one path, so it may be there
    assert [ast.unparse(v) for v in got.values] == ["optimizer.state_dict()", "model.state_dict()", "scaler.state_dict()"]
    assert "'scaler' scaler.state_dict()" in got.text
    assert flow.contents(second, "other") is None  # handed to log() first: unknown


def test_persist_reads_what_a_checkpoint_holds_through_locals_nested_dicts_and_aliases():
    from amplint.core.persist import held

    src = textwrap.dedent(
        """
        import torch
        amp = torch.amp.GradScaler("cuda")
        def save(model, optimizer, path, other):
            opt_state = optimizer.state_dict()
            extra = {"a": amp.state_dict()}
            torch.save({"optimizer": opt_state, "extra": extra}, path)
            torch.save({"optimizer": opt_state, "epochs": [1, 2]}, path)
            torch.save({"optimizer": opt_state, "grad_scale": other.get_scale()}, path)
            ck = {"optimizer": opt_state}
            ck.update(other)
            torch.save(ck, path)
            torch.save(opt_state, path)
        """
    )
    model = build_model(src, ast.parse(src), "t.py")
    f = next(f for f in model.funcs if f.name == "save")
    saves = {c.node.lineno: c for c in f.calls if c.qualname == "torch.save"}

    def at(line):
        c = saves[line]
        return held(model, f, c.stmt, c.node.args[0])

    nested, plain, named, top, alias = at(7), at(8), at(9), at(12), at(13)
    assert nested.optimizer and nested.scaler  # the alias resolved, the nested dict followed to the scaler's state
    assert plain.optimizer and not plain.scaler and not plain.own_optimizer
    assert named.optimizer and named.scaler  # unresolved, but named for the scaler: taken to be it
    assert top is None  # updated from a dict it cannot read
    assert alias.optimizer and not alias.scaler
