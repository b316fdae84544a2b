"""Compose random but valid AMP training loops from parts (issue 11's generator).

``compose(choose)`` builds one program in the corpus format (``# fixsafety:`` header, the loop,
then the marker and the hand-derived ``expected_loop``). ``choose(label, options)`` picks one of
``options``; ``compose_seeded(seed)`` makes every choice with ``random.Random(seed)`` (the
hypothesis test draws the seed; run_baseline.py counts seeds up).

Parts:

* contract and loop shape: ``train_step`` per batch; ``train_loop`` as a flat ``enumerate`` loop,
  epochs x batches, or a ``while`` loop with a counter;
* guards: gradient accumulation (``if (i + 1) % accum == 0:``), an AMP switch (``use_amp`` with a
  scaler built ``enabled=use_amp``, or an optional scaler ``GradScaler(dev) if use_amp else
  None`` with ``is not None`` guards), a hand-written LR warm-up block;
* clipping (none, ``clip_grad_norm_``, ``clip_grad_value_``; attribute or from-import);
* one or two optimizers (SGD and Adam over disjoint layers), varied names;
* the optimizer tail inline or in a helper function of the same file;
* statement layout: one per line, semicolon-joined runs of simple statements, one-line suites;
* comments: own-line, trailing, and inside multi-line calls;
* misuse injections (at most two, compatible): a missing update (AMP001), a backward inside
  autocast (AMP002), a plain ``optimizer.step()`` (AMP004), an unscaled backward (AMP005), a clip
  before ``unscale_`` (AMP006), a repeated update or an update between two optimizers' steps
  (AMP007), ``zero_grad`` between the backward and the step (AMP009), the legacy
  ``torch.cpu.amp.autocast`` (AMP101).

The expected loop is the same plan without the injections (``zero_grad`` moved after the update
where the injection put it before the step), rendered plainly: what a correct fix computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import oracle

Choose = Callable[[str, Sequence[Any]], Any]

INJECTIONS = {
    "no_update": "AMP001",
    "backward_in_autocast": "AMP002",
    "plain_step": "AMP004",
    "unscaled_backward": "AMP005",
    "clip_before_unscale": "AMP006",
    "double_update": "AMP007",
    "update_between": "AMP007",
    "zero_grad_between": "AMP009",
    "legacy_autocast": "AMP101",
}

# (first, second) pairs allowed together; "legacy_autocast" combines with every other one
PAIRS = {
    ("clip_before_unscale", "no_update"), ("clip_before_unscale", "plain_step"),
    ("clip_before_unscale", "double_update"), ("backward_in_autocast", "no_update"),
    ("unscaled_backward", "no_update"),
}

COMMENTS = ("# keep the order: see the AMP recipe", "# TODO: revisit once we move to bf16",
            "# the loss scale starts at 65536", "# NOTE(amp): scaled from here on", "# see ticket 1234")


# ============================================================================ a tiny statement tree


@dataclass
class Stmt:
    text: str  # one logical line, or several lines (a multi-line call) joined with "\n"
    comment: str | None = None  # trailing comment
    before: list[str] = field(default_factory=list)  # own-line comments above

    @property
    def single(self) -> bool:
        return "\n" not in self.text


@dataclass
class Block:
    header: str  # e.g. "if (i + 1) % accum == 0:"
    body: list[Any]
    before: list[str] = field(default_factory=list)


@dataclass
class Layout:
    join: list[bool]  # consumed in order: join this simple statement to the previous one?
    suite: list[bool]  # consumed in order: render this block as a one-line suite when possible?

    def take_join(self) -> bool:
        return self.join.pop(0) if self.join else False

    def take_suite(self) -> bool:
        return self.suite.pop(0) if self.suite else False


PLAIN = Layout([], [])


def render(nodes: list[Any], indent: int, layout: Layout) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    group: list[Stmt] = []  # simple single-line statements joined with "; "

    def flush() -> None:
        if not group:
            return
        text = "; ".join(s.text for s in group)
        tail = group[-1].comment
        for s in group:
            for c in s.before:
                out.append(pad + c)
        out.append(pad + text + (f"  {tail}" if tail else ""))
        group.clear()

    for node in nodes:
        if isinstance(node, Stmt):
            if node.single and group and not group[-1].comment and not node.before and layout.take_join():
                group.append(node)
                continue
            flush()
            if node.single:
                group.append(node)
                continue
            for c in node.before:
                out.append(pad + c)
            lines = node.text.split("\n")
            out.append(pad + lines[0])
            out.extend(pad + ln for ln in lines[1:-1])
            out.append(pad + lines[-1] + (f"  {node.comment}" if node.comment else ""))
        else:
            flush()
            for c in node.before:
                out.append(pad + c)
            simple = "\n" not in node.header and all(
                isinstance(n, Stmt) and n.single and not n.before for n in node.body)
            no_inner_comments = all(not n.comment for n in node.body[:-1]) if simple else False
            if simple and no_inner_comments and layout.take_suite():
                last = node.body[-1].comment
                out.append(pad + node.header + " " + "; ".join(n.text for n in node.body)
                           + (f"  {last}" if last else ""))
            else:
                out.extend(pad + ln for ln in node.header.split("\n"))
                out.extend(render(node.body, indent + 4, layout))
    flush()
    return out


# ============================================================================ plans


@dataclass
class Plan:
    contract: str = "loop"  # loop | step
    shape: str = "flat"  # flat | epoch | while
    accum: int = 1
    amp: str = "harness"  # harness | flag | optional
    warmup: bool = False
    clip: str | None = None  # norm | value
    clip_import: bool = False
    opts: tuple[str, ...] = ("optimizer",)
    two_kinds: str = "sgd"  # sgd | adam: the second optimizer's kind
    scaler: str = "scaler"
    accum_name: str = "accum"
    counter: str = "i"
    helper: bool = False
    split_forward: bool = False
    zero_grad: str = "top"  # top | end
    set_to_none: bool = True
    legacy_from_import: bool = False
    multiline_calls: bool = False
    inject: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "misuse" if self.inject else "correct"

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted({INJECTIONS[i] for i in self.inject}))

    def expected(self) -> "Plan":
        p = Plan(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        if "zero_grad_between" in self.inject:
            p.zero_grad = "end"
        p.inject = ()
        p.legacy_from_import = False
        p.multiline_calls = False
        return p


def _mc(call: str, args: list[str], multiline: bool, comment: str | None) -> str:
    """A call, on one line or spread over several with a comment after the first argument."""
    if not multiline:
        return f"{call}({', '.join(args)})"
    lines = [f"{call}("]
    for k, a in enumerate(args):
        lines.append(f"    {a}," + (f"  {comment}" if k == 0 and comment else ""))
    lines.append(")")
    return "\n".join(lines)


def build(plan: Plan, fn_name: str, prefix: str = "", decorate: Choose | None = None) -> tuple[list[str], list[str]]:
    """(module-level lines for helpers, function lines) for ``plan``."""
    inj = set(plan.inject)
    sc, opts = plan.scaler, list(plan.opts)
    density = decorate("comments", ("none", "some", "many")) if decorate else "none"
    empties = {"none": 0, "some": 12, "many": 2}[density]

    def comment(label: str) -> str | None:
        if density == "none" or decorate is None:
            return None
        return decorate(label, (None,) * empties + COMMENTS)

    zg_arg = "set_to_none=True" if plan.set_to_none else ""
    amp_kw = ", enabled=use_amp" if plan.amp in ("flag", "optional") else ""

    def st(text: str, label: str) -> Stmt:
        s = Stmt(text, comment=comment(label + ":trail"))
        c = comment(label + ":own")
        if c:
            s.before.append(c)
        return s

    def zero_grads() -> list[Stmt]:
        return [st(f"{o}.zero_grad({zg_arg})", "zero_grad") for o in opts]

    # ---------------------------------------------------------------- the optimizer tail (AMP arm)
    clip_call = ("clip_grad_norm_" if plan.clip == "norm" else "clip_grad_value_")
    clip_fn = clip_call if plan.clip_import else f"torch.nn.utils.{clip_call}"
    clip_args = ["model.parameters()", "1.0" if plan.clip == "norm" else "0.5"]

    def clip_stmt() -> Stmt:
        return st(_mc(clip_fn, clip_args, plan.multiline_calls, comment("clip:inner") or "# all parameters"), "clip")

    amp_arm: list[Any] = []
    if "zero_grad_between" in inj:
        amp_arm += zero_grads()
    if plan.clip:
        if "clip_before_unscale" not in inj:
            amp_arm += [st(f"{sc}.unscale_({o})", "unscale") for o in opts]
        amp_arm.append(clip_stmt())
    for k, o in enumerate(opts):
        if "plain_step" in inj and k == len(opts) - 1:
            amp_arm.append(st(f"{o}.step()", "step"))
        else:
            amp_arm.append(st(_mc(f"{sc}.step", [o], plan.multiline_calls and k == 0, comment("step:inner")), "step"))
        if "update_between" in inj and k < len(opts) - 1:
            amp_arm.append(st(f"{sc}.update()", "update"))
    if "no_update" not in inj:
        amp_arm.append(st(f"{sc}.update()", "update"))
        if "double_update" in inj:
            amp_arm.append(st(f"{sc}.update()", "update2"))
    tail: list[Any]
    if plan.amp == "optional":
        plain_arm: list[Any] = ([clip_stmt()] if plan.clip else []) + [st(f"{o}.step()", "pstep") for o in opts]
        tail = [Block(f"if {sc} is not None:", amp_arm), Block("else:", plain_arm)]
    else:
        tail = amp_arm
    end_zero = plan.zero_grad == "end" or plan.accum > 1
    if end_zero and "zero_grad_between" not in inj:
        tail += zero_grads()

    helpers: list[str] = []
    if plan.helper:
        hname = f"{prefix}apply_updates"
        params = ", ".join([sc, *opts, "model"])
        helpers += [f"def {hname}({params}):"] + render(tail, 4, decorate_layout(decorate, "helper")) + ["", ""]
        tail = [st(f"{hname}({params})", "helper_call")]

    # ---------------------------------------------------------------- the iteration body
    body: list[Any] = []
    ctr = plan.counter
    if plan.warmup:
        body.append(Block(f"if {ctr} < warmup:", [
            Block(f"for group in {o}.param_groups:", [st(f'group["lr"] = base_lr * ({ctr} + 1) / warmup', "warmup")])
            for o in opts]))
    if not end_zero and "zero_grad_between" not in inj:  # the injection moves it, it does not copy it
        body += zero_grads()
    if plan.legacy_from_import and "legacy_autocast" in inj:
        ac = f"cpu_autocast(dtype=dtype{amp_kw})"
    elif "legacy_autocast" in inj:
        ac = f"torch.cpu.amp.autocast(dtype=dtype{amp_kw})"
    else:
        ac = _mc("torch.autocast", ["device_type", f"dtype=dtype{amp_kw}"], plan.multiline_calls, comment("autocast:inner"))
    div = f" / {plan.accum_name}" if plan.accum > 1 else ""
    fwd: list[Any]
    if plan.split_forward:
        fwd = [st("pred = model(x)", "fwd"), st(f"loss = loss_fn(pred, y){div}", "loss")]
    else:
        fwd = [st(f"loss = loss_fn(model(x), y){div}", "loss")]
    scaled = f"{sc}.scale(loss).backward()" if "unscaled_backward" not in inj else "loss.backward()"
    if plan.amp == "optional":
        backward: list[Any] = [Block(f"if {sc} is not None:", [st(scaled, "backward")]),
                               Block("else:", [st("loss.backward()", "pbackward")])]
    else:
        backward = [st(scaled, "backward")]
    if "backward_in_autocast" in inj:
        fwd += backward
        backward = []
    body.append(Block(f"with {ac}:", fwd))
    body += backward
    if plan.accum > 1:
        body.append(Block(f"if ({ctr} + 1) % {plan.accum_name} == 0:", tail))
    else:
        body += tail

    # ---------------------------------------------------------------- the function
    lines: list[str] = []
    if plan.contract == "step":
        lines.append(f"def {fn_name}(model, batch, loss_fn, optimizer, scaler, *, device_type, dtype):")
        setup = [st("x, y = batch", "unpack")]
        body.append(st("return loss.item()", "return"))
        lines += render(setup + body, 4, decorate_layout(decorate, "body"))
        return helpers, lines
    lines.append(f"def {fn_name}(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):")
    setup = []
    if len(opts) == 2:
        second = ("torch.optim.Adam(model[2].parameters(), lr=1e-3)" if plan.two_kinds == "adam"
                  else "torch.optim.SGD(model[2].parameters(), lr=0.05, momentum=0.9)")
        setup += [st(f"{opts[0]} = torch.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9)", "opt_a"),
                  st(f"{opts[1]} = {second}", "opt_b")]
    elif opts[0] != "optimizer":
        setup.append(st(f"{opts[0]} = optimizer", "opt_alias"))
    if plan.amp in ("flag", "optional"):
        setup.append(st("use_amp = dtype == torch.float16", "use_amp"))
        if plan.amp == "flag":
            setup.append(st(f"{sc} = torch.amp.GradScaler(device_type, enabled=use_amp)", "scaler"))
        else:
            setup.append(st(f"{sc} = torch.amp.GradScaler(device_type) if use_amp else None", "scaler"))
    elif sc != "scaler":
        setup.append(st(f"{sc} = scaler", "scaler_alias"))
    if plan.accum > 1:
        setup.append(st(f"{plan.accum_name} = {plan.accum}", "accum"))
    if plan.warmup:
        setup += [st("warmup = 3", "warmup_n"), st(f'base_lr = {opts[0]}.param_groups[0]["lr"]', "base_lr")]
    if plan.accum > 1:
        setup += [st(f"{o}.zero_grad({zg_arg})", "zero_first") for o in opts]
    setup.append(st("losses = []", "losses"))
    body.append(st("losses.append(loss.item())", "log"))
    if plan.shape == "flat":
        loop = [Block(f"for {ctr}, (x, y) in enumerate(batches):", body)]
    elif plan.shape == "epoch":
        setup.append(st("per_epoch = len(batches) // 2", "per_epoch"))
        inner = [st(f"{ctr} = epoch * per_epoch + j", "ctr"), st(f"x, y = batches[{ctr}]", "fetch")] + body
        loop = [Block("for epoch in range(2):", [Block("for j in range(per_epoch):", inner)])]
    else:
        setup.append(st(f"{ctr} = 0", "ctr0"))
        inner = [st(f"x, y = batches[{ctr}]", "fetch")] + body + [st(f"{ctr} += 1", "incr")]
        loop = [Block(f"while {ctr} < len(batches):", inner)]
    lines += render(setup + loop + [st("return losses", "return")], 4, decorate_layout(decorate, "body"))
    return helpers, lines


def decorate_layout(decorate: Choose | None, label: str) -> Layout:
    if decorate is None:
        return PLAIN
    style = decorate(f"{label}:layout", ("lines", "semicolons", "suites", "both"))
    n = 40
    join = [decorate(f"{label}:join{k}", (False, True)) for k in range(n)] if style in ("semicolons", "both") else []
    suite = [decorate(f"{label}:suite{k}", (False, True)) for k in range(8)] if style in ("suites", "both") else []
    return Layout(join, suite)


# ============================================================================ whole programs


@dataclass
class Program:
    plan: Plan
    text: str

    @property
    def kind(self) -> str:
        return self.plan.kind


def choose_plan(choose: Choose) -> Plan:
    p = Plan()
    p.contract = choose("contract", ("loop", "loop", "loop", "step"))
    if p.contract == "loop":
        p.shape = choose("shape", ("flat", "epoch", "while"))
        p.accum = choose("accum", (1, 1, 2, 3))
        p.amp = choose("amp", ("harness", "flag", "optional"))
        p.warmup = choose("warmup", (False, True))
        n_opts = choose("n_opts", (1, 2))
        if n_opts == 2:
            p.opts = choose("opt_names", (("opt_a", "opt_b"), ("enc_opt", "head_opt"), ("body_optimizer", "head_optimizer")))
            p.two_kinds = choose("second_kind", ("sgd", "adam"))
        else:
            p.opts = (choose("opt_name", ("optimizer", "optimizer", "opt")),)
        p.scaler = choose("scaler_name", ("scaler", "scaler", "grad_scaler", "amp_scaler"))
        p.accum_name = choose("accum_name", ("accum", "accum_steps", "grad_accum"))
        p.counter = choose("counter", ("i", "step", "it"))
    p.clip = choose("clip", (None, None, "norm", "value"))
    p.clip_import = choose("clip_import", (False, True))
    p.helper = choose("helper", (False, False, True))
    p.split_forward = choose("split_forward", (False, True))
    p.zero_grad = choose("zero_grad", ("top", "end"))
    p.set_to_none = choose("set_to_none", (True, False))
    p.legacy_from_import = choose("legacy_from_import", (False, True))
    p.multiline_calls = choose("multiline_calls", (False, False, True))
    # ------------------------------------------------------------- injections
    possible = ["no_update", "backward_in_autocast", "plain_step", "unscaled_backward", "double_update",
                "legacy_autocast"]
    if p.clip and len(p.opts) == 1:
        possible.append("clip_before_unscale")
    if len(p.opts) == 2:
        possible.append("update_between")
    if p.amp != "optional":
        possible.append("zero_grad_between")
    n = choose("n_inject", (0, 0, 1, 1, 1, 2))
    inject: list[str] = []
    if n >= 1:
        inject.append(choose("inject1", tuple(possible)))
    if n == 2:
        first = inject[0]
        seconds = [s for s in possible if s != first and (
            "legacy_autocast" in (first, s) or (first, s) in PAIRS or (s, first) in PAIRS)]
        if seconds:
            inject.append(choose("inject2", tuple(seconds)))
    p.inject = tuple(inject)
    return p


def render_program(plan: Plan, choose: Choose | None) -> str:
    fn = "train_step" if plan.contract == "step" else "train_loop"
    helpers, lines = build(plan, fn, decorate=choose)
    exp = plan.expected()
    ehelpers, elines = build(exp, "expected_step" if plan.contract == "step" else "expected_loop", prefix="_expected_")
    header = f"# fixsafety: kind={plan.kind}" + (f" codes={','.join(plan.codes)}" if plan.codes else "")
    imports = ["import torch"]
    if plan.clip and plan.clip_import:
        imports.append(f"from torch.nn.utils import {'clip_grad_norm_' if plan.clip == 'norm' else 'clip_grad_value_'}")
    if plan.legacy_from_import and "legacy_autocast" in plan.inject:
        imports.append("from torch.cpu.amp import autocast as cpu_autocast")
    doc = f'"""Generated: {describe_plan(plan)}."""'
    parts = [header, doc, "", *imports, "", "", *helpers, *lines, ""]
    if plan.kind == "misuse":
        parts += ["", oracle.EXPECTED_MARKER, "", "", *ehelpers, *elines, ""]
    return "\n".join(parts)


def describe_plan(p: Plan) -> str:
    bits = [p.contract]
    if p.contract == "loop":
        bits += [p.shape, f"accum={p.accum}", f"amp={p.amp}", f"opts={len(p.opts)}"]
        if p.warmup:
            bits.append("warmup")
    if p.clip:
        bits.append(f"clip={p.clip}")
    if p.helper:
        bits.append("helper")
    bits.append(f"zero_grad={p.zero_grad}")
    bits.append("inject=" + ("+".join(p.inject) or "none"))
    return ", ".join(bits)


def compose(choose: Choose) -> Program:
    plan = choose_plan(choose)
    return Program(plan, render_program(plan, choose))


def compose_seeded(seed: int) -> Program:
    """The program for ``seed`` (every choice uniform among its options)."""
    import random

    rng = random.Random(seed)
    return compose(lambda label, opts: rng.choice(list(opts)))
