from __future__ import annotations

import ast
import os
import re

from amplint.core.cfg import avoidable
from amplint.core.lifetime import Lifetime
from amplint.lazyre import lazy
from amplint.model.facts import MethodCall
from amplint.model.filemodel import OPTIMIZER_NAME
from amplint.model.names import qualify
from amplint.model.queries_extra import calls_in_loops, fresh_run_loop
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled

def _uses(model, key):
    """Events and method calls on the scaler ``key`` (what makes its state matter)."""
    out = [e for e in model.events() if e.scaler == key and e.kind in ("scale", "step", "update", "unscale", "backward")]
    return out


def _handed_on(model, key) -> bool:
    """Is the scaler passed to two calls or more (a restore, and the helpers that train with it)?"""
    return sum(1 for f in model.funcs for c in f.calls if any(k == key for _p, k in c.arg_keys)) >= 2


def _lifetime(model, func, key, direct: bool) -> Lifetime:
    """The core's lifetime analysis of ``key`` in ``func``, once per check."""
    memo = model.__dict__.setdefault("_amp302_lifetimes", {})
    hit = memo.get((id(func), key))
    if hit is None:
        hit = memo[(id(func), key)] = Lifetime(model, func, key, unknown_uses=direct)
    return hit


def _fresh_run_in(model, loop_node) -> bool:
    """Does the body of the loop build a new optimizer or model, or is the loop itself over
    runs (its target names folds, seeds, configs)?"""
    return fresh_run_loop(loop_node, model.module_scope, model.text)


def _fresh_run_func(model, g) -> bool:
    """Does ``g`` build its own optimizer (a whole run per call)?"""
    for n in ast.walk(g.node):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            for t in n.targets:
                for x in ast.walk(t):
                    name = x.id if isinstance(x, ast.Name) else x.attr if isinstance(x, ast.Attribute) else ""
                    if name and OPTIMIZER_NAME.search(name) and "sched" not in name.lower():
                        return True
    for c in g.calls:
        q = c.qualname or ""
        if q.startswith("torch.optim.") and "lr_scheduler" not in q and "swa_utils" not in q:
            return True
    for key, assigns in model.assigns.items():
        for a in assigns:
            if a.func is g and isinstance(a.value, ast.Call) and OPTIMIZER_NAME.search(str(key[-1])) and "sched" not in str(key[-1]).lower():
                return True
    return False


def _returns_key(model, g, key) -> bool:
    for n in ast.walk(g.node):
        if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None:
            for x in ast.walk(n.value):
                if isinstance(x, (ast.Name, ast.Attribute)) and model.key_of_expr(x, g) == key:
                    return True
    return False


def _disabled_ctor(a) -> bool:
    call = a.value
    return isinstance(call, ast.Call) and any(
        kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False for kw in call.keywords
    )


class ScalerStateDiscarded(Rule):
    code = "AMP302"
    severity = "error"
    name = "scaler-state-discarded"
    summary = "A GradScaler rebuilt every epoch/iteration, or built fresh after its state was restored"
    docs = """
## What it does
Checks for a GradScaler whose learned state is thrown away during training:

* `GradScaler(...)` built inside the epoch or iteration loop that uses it, so that no pass
  of that loop reaches the use again without building a new scaler first (before the use, or
  at the end of the pass); a use is a scaler call, a call handing the scaler to a project
  function that scales, steps or updates with it (`train_sample(..., scaler=scaler)`), or a
  method of the class that drives `self.scaler`;
* `GradScaler(...)` built on every path to a use inside a function (`train_one_epoch`) that
  this file calls from a loop, once per epoch, or (project mode) that another module imports
  by name and calls from a loop (`for epoch in ...: train_one_epoch(...)` in `main.py`, a file
  with no AMP code of its own); a loop over runs (its body builds an optimizer or a model, its
  target names a fold, seed or config) is not an epoch loop;
* `scaler = GradScaler(...)` where, on some path, the scaler's restored state is still held
  and unused: after `scaler.load_state_dict(...)`, after a project function that loads the
  scaler it is handed (`restore(path, scaler)`, assigned back or not), or, in a subclass's
  `__init__`, after `super().__init__(...)` ran a base `__init__` (this file or another
  module) that restored `self.scaler` (itself or through a method it calls on `self`);
* `scaler.state_dict()` saved in a checkpoint that the file resumes from (it restores the
  optimizer, or loads state under an `if` that names resuming), while nothing ever restores
  the scaler: no `load_state_dict` on it, it is handed to no other code, and the checkpoint
  key it is saved under is not read anywhere in the file.

## Why is this bad?
The scaler learns its loss scale: it starts at 65536, halves on every overflow and grows
only after 2000 clean steps. A fresh scaler forgets this. Measured (CPU, loss scale
equilibrium 512-1024, 5 epochs of 40 steps): a scaler rebuilt every epoch restarts at 65536
and skips 6-7 optimizer steps at the start of every epoch (31 of 200 steps skipped); one
scaler for the run skips 7, all in the first epoch. A scaler replaced after
`load_state_dict` restarts at 65536 with growth tracker 0 instead of the restored scale
(512 and 23 in the measurement). Nothing raises.

Not reported: a loop that starts a new run (its body builds a new optimizer or model, or
its target names folds, seeds, trials or configs), a loop that every pass leaves after the
use (`while True: ... break`), a function that builds its own optimizer or returns the
scaler, a construction some pass or call can skip on its way to the use (`if epoch == 0:`;
a test the use shares, `if use_amp:` around both, does not count as skipping), a lazy
construction on the arm where the scaler is missing (`if scaler is None:`, `if not
hasattr(self, "scaler"):`), a restored state that some path used before the new
construction (a second phase), a new scaler that is restored in its turn, a restore by code
that cannot be seen, and scalers constructed with `enabled=False`. For a saved state that is never restored: a scaler held in
an attribute (`self.scaler`: other code may restore it), a scaler passed to any call (a
restore helper may load it), a checkpoint key named again in the file (`ckpt["scaler"]`, a
generic `for k in ("model", "scaler")` restore), and files that only load weights outside a
resume branch (evaluation of the best model).

## Example
```python
for epoch in range(epochs):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        ...
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
```

Use instead:
```python
scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    for x, y in loader:
        ...
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
```

## Fix safety
No fix: moving the construction can need arguments defined in the loop, and a checkpoint
restore may have to move with it.
"""
    valid = [
        # the subclass builds its scaler after a base __init__ that restores only the model
        """
import torch
class TrainerTemplate:
    def __init__(self, model, cfg):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
        if cfg.resume:
            self.model.load_state_dict(torch.load(cfg.ckpt)["model"])
class Trainer(TrainerTemplate):
    def __init__(self, model, cfg):
        super().__init__(model, cfg)
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.amp)
    def step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        # built once, handed to the helper inside the loop
        """
import torch
def train_sample(model, optimizer, sample, scaler):
    scaler.scale(model(sample)).backward()
    scaler.step(optimizer)
    scaler.update()
def train(model, optimizer, loader, epochs):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for sample in loader:
            train_sample(model, optimizer, sample, scaler)
""",
        # built in the loop, handed to a helper that only saves it
        """
import torch
def save_scaler(scaler, path):
    torch.save(scaler.state_dict(), path)
def run(paths):
    for path in paths:
        scaler = torch.amp.GradScaler("cuda")
        save_scaler(scaler, path)
""",
        # the restore helper's scaler is kept; the new construction is the other branch
        """
import torch
class Trainer:
    def __init__(self, args):
        if args.restore_path:
            self.scaler = self.restore(args.restore_path, torch.amp.GradScaler("cuda"))
        else:
            self.scaler = torch.amp.GradScaler("cuda")
    def restore(self, path, scaler):
        scaler.load_state_dict(torch.load(path)["scaler"])
        return scaler
    def fit(self, loader):
        for x in loader:
            train_step(self.model, x, self.opt, self.scaler)
            log_scale(self.scaler)
""",
        # a helper that only reads the scaler it is given (no load_state_dict)
        """
import torch
class Trainer:
    def __init__(self, args):
        self.scaler = torch.amp.GradScaler("cuda")
        self.scaler = self.describe(self.scaler)
        self.scaler = torch.amp.GradScaler("cuda")
    def describe(self, scaler):
        print(scaler.get_scale())
        return scaler
    def fit(self, loader):
        for x in loader:
            train_step(self.model, x, self.opt, self.scaler)
            log_scale(self.scaler)
""",
        # a fresh run per fold builds its own optimizer
        """
import torch
for fold in range(5):
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
""",
        # lazy construction once
        """
import torch
scaler = None
for epoch in range(epochs):
    if scaler is None:
        scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
""",
        # restore after construction
        """
import torch
scaler = torch.amp.GradScaler("cuda")
if args.resume:
    scaler.load_state_dict(torch.load(args.resume)["scaler"])
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        # a function that runs a whole training (its own optimizer), called per config
        """
import torch
def run(cfg, loader):
    model = Net(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
for cfg in configs:
    run(cfg, loader)
""",
        # the saved scaler state is restored on resume
        """
import torch
if args.resume:
    ckpt = torch.load(args.resume)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
scaler = torch.amp.GradScaler("cuda")
if args.resume:
    scaler.load_state_dict(ckpt["scaler"])
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, "last.pt")
""",
        # a restore helper is given the scaler
        """
import torch
scaler = torch.amp.GradScaler("cuda")
if args.resume:
    optimizer.load_state_dict(torch.load(args.resume)["optimizer"])
    load_amp_state(args.resume, scaler)
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
torch.save({"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, "last.pt")
""",
        # a generic restore names the checkpoint key again
        """
import torch
scaler = torch.amp.GradScaler("cuda")
objs = {"model": model, "optimizer": optimizer}
if args.resume:
    ckpt = torch.load(args.resume)
    for k in ("model", "optimizer", "scaler"):
        if k in objs:
            objs[k].load_state_dict(ckpt[k])
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, "last.pt")
""",
        # the only load evaluates the best weights after training: no resume
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, "best.pt")
model.load_state_dict(torch.load("best.pt")["model"])
evaluate(model)
""",
    ]
    invalid = [
        # the base __init__ resumes self.scaler; the subclass then builds a new one
        Invalid(
            """
import torch
class TrainerTemplate:
    def __init__(self, model, cfg):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
        if cfg.resume:
            self.resume(cfg.ckpt)
    def resume(self, path):
        ckpt = torch.load(path)
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scaler.load_state_dict(ckpt["scaler"])
class Trainer(TrainerTemplate):
    def __init__(self, model, cfg):
        super().__init__(model, cfg)
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.amp)
    def step(self, loss):
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        ),
        # rebuilt every batch and handed to the helper that trains with it
        Invalid(
            """
import torch
def train_sample(model, optimizer, sample, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(sample)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
def train(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        for sample in loader:
            scaler = torch.amp.GradScaler("cuda")
            train_sample(model, optimizer, sample, scaler)
""",
        ),
        # the state is saved, the resume restores the weights only
        Invalid(
            """
import torch
if args.resume:
    checkpoint = torch.load(args.resume)
    net.load_state_dict(checkpoint["net"])
scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
for epoch in range(epochs):
    for x in loader:
        scaler.scale(net(x)).backward()
        scaler.step(optimizer)
        scaler.update()
    state = {"net": net.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}
    torch.save(state, "ckpt.pth")
""",
        ),
        Invalid(
            """
import torch
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(epochs):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
""",
        ),
        # built in the function called once per epoch
        Invalid(
            """
import torch
def train_one_epoch(model, loader, optimizer):
    scaler = torch.amp.GradScaler("cuda")
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

def main():
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    for epoch in range(10):
        train_one_epoch(model, loader, optimizer)
""",
        ),
        # restored, then replaced
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
if args.resume:
    ckpt = torch.load(args.resume)
    scaler.load_state_dict(ckpt["scaler"])
scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        ),
        # a restore helper loads the scaler it is given; a fresh one replaces it right after
        Invalid(
            """
import torch
class Trainer:
    def __init__(self, args):
        self.scaler = torch.amp.GradScaler("cuda")
        if args.restore_path:
            self.model, self.scaler = self.restore(args.restore_path, self.model, self.scaler)
            self.scaler = torch.amp.GradScaler("cuda")
    def restore(self, path, model, scaler):
        ckpt = torch.load(path)
        model.load_state_dict(ckpt["model"])
        scaler.load_state_dict(ckpt["scaler"])
        return model, scaler
    def fit(self, loader):
        for x in loader:
            train_step(self.model, x, self.opt, self.scaler)
            log_scale(self.scaler)
""",
        ),
    ]

    def check(self, model):
        yield from self._never_restored(model)
        seen = set()
        for key in model.scaler_keys():
            if scaler_disabled(model, key):
                continue
            direct = bool(_uses(model, key))
            for a in model.constructions(key):
                if a.func is None or _disabled_ctor(a) or id(a.node) in seen:
                    continue
                life = _lifetime(model, a.func, key, direct)
                new = life.new_item(a)
                if new is None:
                    continue
                uses = life.uses_of(new)
                d = (self._rebuilt_per_pass(model, a, uses, life) or self._rebuilt_per_call(model, key, a, uses, life)
                     or (self._replaces_restored(model, a, new, life) if direct or _handed_on(model, key) else None))
                if d is not None:
                    seen.add(id(a.node))
                    yield d

    def _ctor_text(self, model, a):
        return model.text(a.value) if a.value is not None else "GradScaler(...)"

    def _rebuilt_per_pass(self, model, a, uses, life):
        """A use in the loop around the construction that no pass of that loop reaches again
        without building the object first (``cfg.avoidable`` finds no path from the use through
        the loop's head back to it that skips the construction)."""
        if not a.ctx.loops:
            return None
        loop = a.ctx.loops[-1]
        cfg = life.cfg
        for u in uses:
            if u.stmt is a.stmt or loop.node not in cfg.loops_around(u.stmt):
                continue
            head = loop.node  # a pass of this loop, not of a loop inside it, runs between two uses
            if not avoidable(cfg, u.stmt, head, None, head) or (
                    avoidable(cfg, u.stmt, head, a.stmt, head) and avoidable(cfg, head, u.stmt, a.stmt, head)):
                continue
            if _fresh_run_in(model, loop.node):
                return None
            what = "epoch/iteration loop" if isinstance(loop.node, (ast.For, ast.AsyncFor, ast.While)) else "loop"
            return self.diagnostic(
                model, a.value if a.value is not None else a.node,
                f"`{self._ctor_text(model, a)}` is built inside the {what} (line {loop.node.lineno}): every pass restarts "
                f"at scale 65536 with no growth history and re-learns it by skipping steps on overflow; build the scaler "
                f"once, before the loop",
                None, a.stmt,
                why=((a.node.lineno, "a new GradScaler"), (u.line, "used by the same pass, every pass through it builds the scaler first")),
            )
        return None

    def _rebuilt_per_call(self, model, key, a, uses, life):
        """A function that builds the scaler before a use on every path (``cfg.avoidable`` from
        its entry), called from a loop: every call starts a fresh scaler."""
        g = a.func
        if a.ctx.loops or not isinstance(g.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        if key[0] == "L" and key[1] != g.fid:
            return None
        hit = next((u for u in uses if not avoidable(life.cfg, None, u.stmt, a.stmt)), None)
        if hit is None or g.name == "__init__" or _fresh_run_func(model, g) or _returns_key(model, g, key):
            return None
        if key[0] == "L" and model.escapes(key, g):
            return None
        caller = next((f"is called from a loop (line {call.lineno})"
                       for call, loop in calls_in_loops(model, g.name, g.cls is not None) if not _fresh_run_in(model, loop)), None)
        if (caller is None and g.cls is None and g.parent is not None and g.parent.node is model.tree
                and model.source.count(g.name + "(") == 1 and hasattr(model.index, "epoch_callers")):
            # project mode, a function its own file never calls: once per epoch from another module (main.py's epoch loop)
            callers = model.index.epoch_callers(model.path, g.qualname)
            if callers:
                path, line = callers[0]
                roots = getattr(model.index, "roots", None) or [os.path.dirname(path)]
                caller = f"`{os.path.relpath(path, roots[0])}` calls from a loop (line {line})"  # the same from any working directory
        if caller is None:
            return None
        return self.diagnostic(
            model, a.value if a.value is not None else a.node,
            f"`{self._ctor_text(model, a)}` is built in `{g.name}()`, which {caller}: every call restarts at scale "
            f"65536 with no growth history; build the scaler once and pass it in",
            None, a.stmt,
            why=((a.node.lineno, "a new GradScaler on every path into"), (hit.line, "this use")),
        )

    def _replaces_restored(self, model, a, new, life):
        """A restored state that nothing used since may still be held when the construction
        builds a fresh object in its place, and nothing restores the new one."""
        r = life.discarded_restore(new)
        if r is None or life.restored_later(new) or any(lp not in r.x.ctx.loops for lp in a.ctx.loops):
            return None
        if isinstance(r.x, MethodCall):
            how, advice = "restored by `load_state_dict`", "construct the scaler before restoring it"
        elif id(r.x) in life.restorers:
            how = f"that `{life.restorers[id(r.x)]}()` restored (called by `super().__init__`)"
            advice = "build the scaler before the base class restores it, or not at all"
        else:
            how, advice = f"that `{model.text(r.x.node.func)}(...)` restored", "drop the new construction"
        return self.diagnostic(
            model, a.value if a.value is not None else a.node,
            f"`{self._ctor_text(model, a)}` replaces the scaler {how} on line {r.line}: the restored scale and growth "
            f"tracker are lost (training restarts at 65536); {advice}",
            None, a.stmt,
            why=((r.line, "the scaler's state restored"), (a.node.lineno, "replaced, unused, by a new GradScaler on some path")),
        )

    def _never_restored(self, model):
        """The scaler's state is saved under a key of the checkpoint, the file resumes from a
        checkpoint (a restore of the optimizer, or a ``load_state_dict`` under an ``if`` that
        names resuming), and nothing can ever load the scaler: no ``load_state_dict`` on it,
        it is handed to no other code, and the checkpoint key is read nowhere in the file."""
        resumes = _resume_loads(model)
        if not resumes:
            return
        for key in model.scaler_keys():
            if key[0] not in ("L", "G") or scaler_disabled(model, key) or not _uses(model, key):
                continue
            saves = [e for e in model.events("scaler_state") if e.scaler == key]
            if not saves or model.escapes(key, None):
                continue
            if any(m.attr == "load_state_dict" and m.receiver == key for f in model.funcs for m in f.methods):
                continue
            under = [_saved_under(e) for e in saves]
            if None in under:
                continue
            names = [k.value if isinstance(k, ast.Constant) else k.arg for k in under]
            if _read_elsewhere(model, set(names), {id(k) for k in under}):
                continue
            r = resumes[0]
            name = str(key[-1])
            yield self.diagnostic(
                model, saves[0].node,
                f"`{name}.state_dict()` is saved in the checkpoint (key {names[0]!r}) but never restored: the "
                f"resume on line {r.node.lineno} loads `{model.text(r.receiver_node)}` and not the scaler, so a resumed "
                f"run restarts the loss scale at 65536 and skips steps while it re-learns it; call "
                f"`{name}.load_state_dict(checkpoint[{names[0]!r}])` after building the scaler",
                None, saves[0].stmt,
            )
            return




RESUME = lazy(r"resum|restor|restart|continu|load_from|from_ckpt|start_epoch|load_ckpt|load_checkpoint", re.IGNORECASE)


def _resume_loads(model) -> list:
    """``load_state_dict`` calls that resume training: into an optimizer, or under an ``if``
    whose test names resuming (``if args.resume:``)."""
    out = []
    for f in model.funcs:
        for m in f.methods:
            if not m.called or m.attr != "load_state_dict" or m.receiver_node is None:
                continue
            if model.is_optimizer(m.receiver_node, f) or any(lit.key and RESUME.search(lit.key) for lit in m.ctx.lits):
                out.append(m)
    out.sort(key=lambda m: m.node.lineno)
    return out


def _saved_under(e):
    """The key under which the ``scaler.state_dict()`` call of event ``e`` is stored: the
    string constant of ``{"scaler": scaler.state_dict()}`` or ``ckpt["scaler"] = ...``, or the
    keyword of ``dict(scaler=...)``; None when it is not stored under a string key."""
    call = e.node
    for n in ast.walk(e.stmt):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                if v is call:
                    return k if isinstance(k, ast.Constant) and isinstance(k.value, str) else None
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict":
            for kw in n.keywords:
                if kw.value is call:
                    return kw if kw.arg else None
        elif isinstance(n, ast.Assign) and n.value is call and len(n.targets) == 1:
            t = n.targets[0]
            if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                return t.slice
    return None


def _read_elsewhere(model, names: set, keys: set) -> bool:
    """May the file read a checkpoint key in ``names`` back: a string constant of that value
    anywhere but the save's own keys (``keys``: ``ckpt["scaler"]``, ``ckpt.get("scaler")``, a
    generic ``for k in ("model", "scaler"): ...``)? A comment that names it reads nothing."""
    for n in ast.walk(model.tree):
        if isinstance(n, ast.Constant) and n.value in names and id(n) not in keys:
            return True
    return False
