from __future__ import annotations

import ast
import re

from amplint.diagnostics import Fix, InsertStatement
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled, scaler_text, simple_stmt, stmt_anchor

GRAD_READ = {"norm", "abs", "max"}
CLIP_HELPER = re.compile(r"clip|grad_?norm|norm_?grad", re.IGNORECASE)


class ClipBeforeUnscale(Rule):
    code = "AMP006"
    severity = "error"
    name = "clip-before-unscale"
    summary = "Gradient clipping (or a gradient norm) between a scaled backward and `scaler.step()` without `scaler.unscale_()`"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for `clip_grad_norm_`, `clip_grad_value_`, `get_total_norm` or a gradient norm read
(`p.grad.norm()`) between `scaler.scale(loss).backward()` and `scaler.step(optimizer)`
with no `scaler.unscale_(optimizer)` before it. A project helper named for clipping or a
gradient norm that calls one (`utils.clip_gradients(model, max_norm)`, same file or another
module) counts as the clip, unless it unscales itself; no fix is offered there.

## Why is this bad?
Until `unscale_` the gradients are multiplied by the loss scale (65536 at the start). The
clip threshold is then effectively `max_norm / scale`: with `max_norm=1.0`,
`clip_grad_norm_` measures a total norm of 75142 instead of 1.147, clips the scaled
gradients, and after `scaler.step` unscales them the update is 1.5e-06 instead of 0.1
(measured). Training stalls silently; a logged gradient norm is 65536x too large.
`clip_grad_value_` clips at `clip_value / scale` in the same way.

## Example
```python
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

Use instead:
```python
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
```

## Fix safety
The fix inserts `scaler.unscale_(optimizer)` right before the clip, for the optimizer the
scaler steps in that iteration. It is safe: `scaler.step` does not unscale again. It is
offered only when one optimizer is stepped, the clip runs exactly as often as the step (the
same loops, and no condition on the step that the clip lacks: a clip on every micro-batch
with the step under `if (i + 1) % accum == 0:` would unscale twice per step and raise), the
clip is not a `return` statement, no `unscale_` follows the clip (a second `unscale_`
would raise), and the norm the clip returns is not divided by the scale later (it would then be
unscaled twice). A norm divided by `scaler.get_scale()` by hand is not reported, in the same
statement or, for a norm that is only read (`p.grad.norm()`, `get_total_norm`, a clip with an
infinite threshold), in a later statement of the function (`gn = gn / scaler.get_scale()`). A
real clip is reported whatever is done with the norm it returns.
"""
    valid = [
        # a norm read on the scaled gradients, divided by the scale in a later statement
        """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        gn = torch.norm(torch.stack([p.grad.norm(2) for p in model.parameters()]), 2)
        gn = gn / scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        log(gn)
""",
        # the same through a name bound to the scale, and an in-place division
        """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        scale = scaler.get_scale()
        total /= scale
        scaler.step(optimizer)
        scaler.update()
        log(total)
""",
        # the clip helper unscales the gradients itself
        """
import torch
def clip_gradients(scaler, optimizer, model, max_norm):
    scaler.unscale_(optimizer)
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        clip_gradients(scaler, optimizer, model, 1.0)
        scaler.step(optimizer)
        scaler.update()
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        # clipping after the step (of the next iteration's grads? no: zeroed) / no scaler in the loop
        """
import torch
from torch.nn.utils import clip_grad_norm_
for x in loader:
    model(x).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
""",
        # unscale_ in a helper
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def unscale_all(s, opts):
    for o in opts:
        s.unscale_(o)
for x in loader:
    scaler.scale(model(x)).backward()
    unscale_all(scaler, [optimizer])
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        # exclusive branches
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    if use_amp:
        scaler.scale(model(x)).backward()
        scaler.unscale_(optimizer)
    else:
        model(x).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
    ]
    invalid = [
        # a real clip of the scaled gradients: dividing the norm it returns does not undo the
        # clip (no fix: the later division would then unscale the logged norm twice)
        Invalid(
            """
import torch
def train(model, loader, optimizer, scaler, log):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        gn = gn / scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        log(gn)
""",
        ),
        # a helper that clips, called before unscale_
        Invalid(
            """
import torch
def clip_all(model, max_norm):
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        clip_all(model, 1.0)
        scaler.step(optimizer)
        scaler.update()
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # clip under a condition and an accumulation guard, attribute scaler
        Invalid(
            """
from torch.nn.utils import clip_grad_value_
from torch.amp import GradScaler
class T:
    def __init__(self):
        self.scaler = GradScaler("cuda")
    def fit(self, loader):
        for i, x in enumerate(loader):
            self.scaler.scale(self.model(x) / 2).backward()
            if (i + 1) % 2 == 0:
                if self.clip:
                    clip_grad_value_(self.model.parameters(), self.clip)
                self.scaler.step(self.opt)
                self.scaler.update()
""",
            fixed="""
from torch.nn.utils import clip_grad_value_
from torch.amp import GradScaler
class T:
    def __init__(self):
        self.scaler = GradScaler("cuda")
    def fit(self, loader):
        for i, x in enumerate(loader):
            self.scaler.scale(self.model(x) / 2).backward()
            if (i + 1) % 2 == 0:
                if self.clip:
                    self.scaler.unscale_(self.opt)
                    clip_grad_value_(self.model.parameters(), self.clip)
                self.scaler.step(self.opt)
                self.scaler.update()
""",
        ),
        # a logged gradient norm, read per parameter: flagged, not fixed (inside a loop)
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    for p in model.parameters():
        log(p.grad.norm())
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # unscale_ after the clip
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
""",
        ),
    ]

    def check(self, model):
        for f in model.funcs:
            backs = [e for e in f.events if e.kind == "backward" and e.scaled]
            if not backs:
                continue
            steps = [e for e in f.events if e.kind == "step"]
            if not steps:
                continue
            for c, label in self._grad_reads(model, f):
                b = self._source_backward(c, backs)
                if b is None:
                    continue
                s_list = [
                    s for s in steps
                    if s.scaler == b.scaler and s.seq > c.seq and s.co_occurs(c) and s.co_occurs(b)
                    and set(map(id, s.loops)) <= set(map(id, b.loops))
                ]
                if not s_list or scaler_disabled(model, b.scaler):
                    continue
                s = s_list[0]
                if self._unscaled_before(model, f, b, c) or _divided_by_scale(c, f):
                    continue
                st = scaler_text(model, f, b.scaler)
                opts = {x.optimizer for x in s_list if x.loops == s.loops}
                fix = None
                later_unscale = any(
                    u.kind == "unscale" and u.scaler == b.scaler and c.seq < u.seq < s.seq for u in f.events
                )
                loop_opt = any(
                    s.optimizer and s.optimizer in loop.targets for loop in s.loops
                )
                # the unscale_ goes right before the clip, so the clip must run exactly as often as
                # the step: same loops and no guard on the step that the clip lacks (a clip on every
                # micro-batch with the step under `if (i + 1) % accum == 0:` would unscale twice)
                if (
                    len(opts) == 1 and s.optimizer and not later_unscale and not loop_opt and not getattr(c, "helper", False)
                    and c.loops == s.loops and not (s.ctx.lits - c.ctx.lits) and simple_stmt(c)
                    and not isinstance(c.stmt, ast.Return) and not _divided_later(c, f)
                ):
                    fix = Fix(
                        "safe",
                        f"Insert `{st}.unscale_({s.optimizer})` before the clip",
                        (InsertStatement(stmt_anchor(model, c.stmt), f"{st}.unscale_({s.optimizer})", "before"),),
                    )
                opt = s.optimizer or "optimizer"
                yield self.diagnostic(
                    model,
                    c.node,
                    f"{label} sees gradients still multiplied by the loss scale; call `{st}.unscale_({opt})` "
                    f"before it (otherwise the threshold is effectively divided by the scale, 65536)",
                    fix,
                    c.stmt,
                )

    @staticmethod
    def _grad_reads(model, f):
        for e in f.events:
            if e.kind == "clip":
                name = model.text(e.node.func).rsplit(".", 1)[-1]
                yield e, f"`{name}`"
        for c in f.calls:  # a project helper that clips (same file or another module)
            if not CLIP_HELPER.search(model.text(c.node.func).rsplit(".", 1)[-1]):
                continue
            hit = model.project_callee(c)
            if hit is None or not hit[2].clips or any("unscale" in ops for ops in hit[2].scaler_ops.values()):
                continue
            read = _Read(c)
            read.helper = True  # no fix: the shapes of helpers are not proved safe to rewrite
            yield read, f"`{model.text(c.node.func)}()` (it calls `clip_grad_norm_`)"
        for mc in f.methods:
            if mc.called and mc.attr in GRAD_READ and isinstance(mc.receiver_node, ast.Attribute):
                r = mc.receiver_node
                if r.attr == "data" and isinstance(r.value, ast.Attribute):
                    r = r.value
                if r.attr == "grad":
                    yield _Read(mc), f"`{model.text(mc.receiver_node)}.{mc.attr}()`"

    @staticmethod
    def _source_backward(c, backs):
        c_loops = set(map(id, c.loops))
        cands = [
            b for b in backs
            if b.seq < c.seq and b.co_occurs(c)
            and (c_loops <= set(map(id, b.loops)) or set(map(id, b.loops)) <= c_loops)
        ]
        return cands[-1] if cands else None

    @staticmethod
    def _unscaled_before(model, f, b, c) -> bool:
        for u in f.events:
            if u.kind == "unscale" and u.scaler == b.scaler and u.seq < c.seq and u.co_occurs(c):
                return True
        # a helper called between backward and clip that may unscale
        inside = {id(x) for x in ast.walk(c.node)} if c.node is not None else set()
        for call in f.calls:
            if not (b.seq < call.seq < c.seq) or id(call.node) in inside:
                continue  # `clip_grad_norm_(self.parameters(), ...)`: the clip's own argument
            if _module_reader(call.callee):
                continue
            callee = model.resolve_callee(call)
            if callee is not None:
                if not callee.walked:
                    if model.mentions(callee, "unscale_"):
                        return True
                elif any(e.kind == "unscale" for e in callee.events):
                    return True
            elif any(k == b.scaler for _p, k in call.arg_keys):
                return True
            elif b.scaler and b.scaler[0] == "A" and model.calls_self_unknown(call):
                return True
        return False


_MODULE_READERS = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children", "buffers", "state_dict"})


def _module_reader(callee) -> bool:
    """``self.parameters()``, ``model.named_parameters()``: an ``nn.Module`` method that reads, never unscales."""
    return isinstance(callee, ast.Attribute) and callee.attr in _MODULE_READERS


def _divided_by_scale(c, f=None) -> bool:
    """A norm unscaled by hand: ``total_norm(...) / scaler.get_scale()``, or a name bound to
    the norm and divided by the scale in a later statement of the function (``gn = ...norm...``;
    ``gn = gn / scaler.get_scale()``, ``gn /= scale`` where ``scale = scaler.get_scale()``)."""
    for n in ast.walk(c.stmt):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and any(x is c.node for x in ast.walk(n.left)):
            if _is_scale(n.right, ()):
                return True
    return f is not None and _only_reads(c) and _divided_later(c, f)


def _divided_later(c, f) -> bool:
    """The name the statement binds to the norm is divided by the scale in a later statement."""
    stmt = c.stmt
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return False
    name = stmt.targets[0].id
    scales = {  # names bound to the scale: `scale = scaler.get_scale()`
        t.id for n in ast.walk(f.node) if isinstance(n, ast.Assign) and _is_scale(n.value, ())
        for t in n.targets if isinstance(t, ast.Name)
    }
    for n in ast.walk(f.node):
        if getattr(n, "lineno", 0) <= stmt.lineno:
            continue
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Div) and isinstance(n.target, ast.Name) and n.target.id == name:
            if _is_scale(n.value, scales):
                return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and isinstance(n.left, ast.Name) and n.left.id == name:
            if _is_scale(n.right, scales):
                return True
    return False


def _only_reads(c) -> bool:
    """The gradients are only read (a norm), not clipped: ``p.grad.norm()``, ``get_total_norm``,
    or a clip with an infinite threshold. A real clip of scaled gradients is wrong whatever is
    done with the norm it returns."""
    if c.kind == "grad_read":
        return not getattr(c, "helper", False)
    node = c.node
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name == "get_total_norm":
        return True
    limit = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "max_norm"), None)
    return limit is not None and _infinite(limit)


def _infinite(expr) -> bool:
    """``float("inf")``, ``math.inf``, ``torch.inf``, ``np.inf``."""
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "float" and expr.args:
        a = expr.args[0]
        return isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.strip().lower() in ("inf", "+inf", "infinity")
    return isinstance(expr, ast.Attribute) and expr.attr == "inf"


def _is_scale(expr, scales) -> bool:
    """``scaler.get_scale()`` (anywhere in ``expr``) or a name bound to it."""
    return any(
        (isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "get_scale")
        or (isinstance(x, ast.Name) and x.id in scales)
        for x in ast.walk(expr)
    )


class _Read:
    """A gradient-norm read, shaped like an Event for the checks above."""

    kind = "grad_read"
    helper = False

    def __init__(self, mc):
        self.node = mc.node
        self.stmt = mc.stmt
        self.seq = mc.seq
        self.ctx = mc.ctx
        self.func = mc.func

    @property
    def loops(self):
        return self.ctx.loops

    def co_occurs(self, other) -> bool:
        from amplint.model import exclusive

        return not exclusive(self.ctx.lits, other.ctx.lits)
