from __future__ import annotations

import ast
import re

from amplint.core.persist import held, resumable, script_never_resumes
from amplint.lazyre import lazy
from amplint.fspath import absolute
from amplint.model.names import dotted, literal_dict, qualify, state_owner

from amplint.model import CERTAIN, LIKELY
from amplint.rules import Invalid, Rule
from amplint.rules._util import scaler_disabled

REGISTERS = lazy(r"save|checkpoint|ckpt|regist|track|state|persist", re.IGNORECASE)
_FVCORE_CHECKPOINTERS = {
    "fvcore.common.checkpoint.Checkpointer", "detectron2.checkpoint.DetectionCheckpointer",
    "detectron2.checkpoint.Checkpointer", "detectron2.checkpoint.detection_checkpoint.DetectionCheckpointer",
}
_TRAINER_CHECKPOINT = lazy(r"Checkpointer\(\s*[^()]*(?:\([^()]*\)[^()]*)*\btrainer\s*=")
_D2_SIMPLE_TRAINERS = {"detectron2.engine.SimpleTrainer", "detectron2.engine.train_loop.SimpleTrainer"}


class CheckpointMissingScalerState(Rule):
    code = "AMP301"
    severity = "error"
    name = "checkpoint-missing-scaler-state"
    summary = "A training checkpoint with the optimizer state but no `scaler.state_dict()`"
    docs = """
## What it does
Checks for `torch.save({...})` of a checkpoint that holds `optimizer.state_dict()` but not
`scaler.state_dict()`, in a function (or class) that trains with an enabled `GradScaler`,
in a save helper it calls (same file or another module; a method of an object the class
made once in `self.<attr>`, `self.ckpt = CheckpointManager(...)`; a helper handed the object
itself, `save_checkpoint(self, path)`, that saves `trainer.optimizer`), in a method of the same object
that saves `self.optimizer` (`self.save(path)` while the scaler is local to the caller),
in a dict a project helper returns (`state = make_state(model, optimizer, epoch)`,
`torch.save(self.state_dict(), path)` with the class's own `state_dict()`), or in a method of
a base class that a subclass in another module inherits while it trains with
`self.<scaler>` or a loss-scaler wrapper in `self.<attr>` (project mode).

The helper's object may also be known from a type annotation alone: a parameter
`saver: Saver` (`saver.save(model, optimizer)`), or `self.model` assigned once from a
parameter `model: LanguageModel` or as `self.model: LanguageModel = model`
(`self.model.save_checkpoint(path, optimizer)`). An annotation declares a type, not the
object's class, so such a call counts only while no project class derived from the declared
one defines the same method (a `FullSaver(Saver)` whose `save` keeps the scaler): otherwise
it is unknown and silent.

A scaler attribute that nothing uses is not one whose state matters (project mode): the file's
code names `self.grad_scaler` only where it assigns it (a use left in a comment does not count)
and no other project file calls or reads anything on it (`x.grad_scaler.scale(...)`).

A subclass whose scaler a project base class builds (`class Trainer(BaseTrainer)`, with
`self.scaler = GradScaler(...)` in `BaseTrainer.__init__`, in another module too) is judged by
the same checkpoint rules, unless a class of that chain saves or loads the scaler's state.

A class that trains with `self.<scaler>` and checkpoints itself through a pair of methods
counts too (project mode): one returns a dict holding `self.optimizer.state_dict()` and nothing
scaler-like (`state_dict()`, `save()`; a literal, or a local dict filled key by key), another
restores it (`self.optimizer.load_state_dict(...)`). Whoever writes that dict to
disk (a mixin's `save`, an engine in another module), the resume restores the optimizer and not
the loss scale. A subclass that replaces only the method returning the dict, and inherits the
scaler and a `load...` method from a project base class, counts too. Silent when the dict is
handed to other code before the return, or when another file of the project (but those of the
base classes) may save or load a scaler state (`trainer.scaler.state_dict()` in a caller).

In project mode, a class handed its scaler (`self.scaler = scaler` from a parameter) that
trains with it (`scale`/`step`/`update`) counts too, when no other file of the project saves
or loads a scaler state (a caller's `trainer.scaler.state_dict()` would keep it).

What the checkpoint holds is read by the core's persistence query (`core/persist.py`): the
values of a `{...}` or `dict(...)` literal, of lists, tuples and conditional values in it, of
a local dict as the container flow says it holds at the save (built key by key, `ckpt = {}`;
`ckpt["optimizer"] = opt_state` with `opt_state = optimizer.state_dict()`, `ckpt.update({...})`,
a `**kwargs` parameter, a nested dict), and of the dict a project function returns, whose
parameters are typed by the arguments the call hands it (`make_state(o, epoch)` with `o` an
optimizer). The scaler's state counts when the value is its `state_dict()` or the scaler
object itself (a pickled GradScaler keeps its state); a value it cannot resolve counts as the
scaler's when it or its key names one (`"scaler": None`, `amp_state`). A dict handed to other
code before the save, or updated from something not written out, is unknown and not reported.

A loss-scaler wrapper counts as the scaler it holds: timm's `NativeScaler()`, or a project
class with `Scaler` in its name that builds an enabled `GradScaler` in `self.<attr>` and
defines `state_dict()` (MAE's `NativeScalerWithGradNormCount`); its `state_dict()` belongs in
the checkpoint.

Framework checkpointers: an fvcore/detectron2 `Checkpointer(model, dir, optimizer=...)`
without the scaler among its checkpointables, and a detectron2 `SimpleTrainer` subclass
that trains with a GradScaler of its own but keeps SimpleTrainer's `state_dict()` (iteration
and optimizer only; detectron2's `AMPTrainer` adds `"grad_scaler"`) while the file passes
`trainer=` to a checkpointer. `checkpointer.resume_or_load(...)` counts as resuming.

## Why is this bad?
The loss scale the scaler has learned (and its growth tracker) is lost on resume: the
resumed run starts again at 65536 and re-learns the scale by skipping steps. Measured: a
scale learned down to 256 over 30 fp16 iterations gave **9 skipped optimizer steps in the
next 20** after resuming without the scaler state, and 1 with `scaler.load_state_dict(...)`.
If the learned scale was above 65536 the resume under-scales instead, and each doubling
takes `growth_interval` (2000) clean steps.

Not reported: model-only exports (no optimizer state), `"optimizer": None`, checkpoints
whose scaler state is added elsewhere in the file (`ckpt["scaler"] = scaler.state_dict()`),
scalers handed to a checkpoint helper (`Checkpointer(..., scaler=scaler)`), and any
checkpoint of a project none of whose files restores an optimizer state
(`optimizer.load_state_dict(...)`): nothing resumes from it, so the scaler state would never
be read. Nor is one saved by a class that reads its checkpoints back itself (a method
calling `torch.load`) in a file that restores no optimizer state, nor one written by a
script that nothing it runs can resume: a notebook, or a file that no other project file
names and whose top level trains, saves or calls its own code, when neither it nor any
project module it imports (directly or through others, in any `import` statement) may
restore an optimizer state; a research repository's `train_v2.py` that only keeps its
best weights is not judged by the `--resume` of its sibling `train_v3.py`. In a project that
resumes, a checkpoint written once after the training loop of
the same function is still taken for an export of the trained model; a periodic save, a
save helper or method makes it a training checkpoint. A file checked outside a project is
taken to resume.

## Example
```python
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
```

Use instead:
```python
torch.save(
    {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()},
    path,
)
# on resume: scaler.load_state_dict(ckpt["scaler"])
```
"""
    valid = [
        # the wrapper's state is saved
        """
import torch
from timm.utils import NativeScaler
def main(model, optimizer, loader):
    loss_scaler = NativeScaler()
    for epoch in range(10):
        for x in loader:
            loss_scaler(model(x), optimizer)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": loss_scaler.state_dict()}, "ckpt.pth")
""",
        # detectron2: the subclass saves its scaler in its own state_dict; fvcore given the scaler
        """
import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.engine import SimpleTrainer
from fvcore.common.checkpoint import Checkpointer
class Trainer(SimpleTrainer):
    def __init__(self, model, loader, optimizer):
        super().__init__(model, loader, optimizer)
        self.grad_scaler = torch.amp.GradScaler("cuda")
    def run_step(self):
        loss = self.model(next(self._data_loader_iter))
        self.grad_scaler.scale(loss).backward()
        self.grad_scaler.step(self.optimizer)
        self.grad_scaler.update()
    def state_dict(self):
        ret = super().state_dict()
        ret["grad_scaler"] = self.grad_scaler.state_dict()
        return ret
def do_train(model, loader, optimizer, out):
    trainer = Trainer(model, loader, optimizer)
    DetectionCheckpointer(model, out, trainer=trainer).resume_or_load("", resume=True)
def train(model, optimizer, loader, out):
    scaler = torch.amp.GradScaler("cuda")
    checkpointer = Checkpointer(model, out, optimizer=optimizer, scaler=scaler)
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
    checkpointer.save("last")
""",
        # the method saves the scaler it is given
        """
import torch
class Model(torch.nn.Module):
    def fit(self, loader, path):
        scaler = torch.amp.GradScaler("cuda")
        for x in loader:
            scaler.scale(self(x)).backward()
            scaler.step(self.optimizer)
            scaler.update()
        self.save(path, scaler)
    def save(self, path, scaler):
        torch.save({"optimizer": self.optimizer.state_dict(), "scaler": scaler.state_dict()}, path)
""",
        # dict(...) with the scaler state
        """
import torch
scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
    torch.save(dict(model=model.state_dict(), optimizer=optimizer.state_dict(), scaler=scaler.state_dict()), "ckpt.pth")
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def save(path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, path)
""",
        # model-only export
        """
import torch
scaler = torch.amp.GradScaler("cuda")
def export(path):
    torch.save({"model": model.state_dict(), "optimizer": None}, path)
""",
        # scaler state added to the dict later
        """
import torch
class T:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")
    def save(self, path):
        ckpt = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        ckpt["scaler"] = self.scaler.state_dict()
        torch.save(ckpt, path)
""",
        # a disabled scaler / a scaler registered with a checkpointer
        """
import torch
scaler = torch.amp.GradScaler("cuda", enabled=False)
torch.save({"optimizer": optimizer.state_dict()}, path)
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda")
checkpointer = Checkpointer(model, optimizer, scaler=scaler)
torch.save({"optimizer": optimizer.state_dict()}, path)
""",
        # the sibling save helper is given the scaler state too
    """
import torch
def main(args):
    def save_ckp(state, path):
        torch.save(state, path)
    def train(loader, scaler):
        for step, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
            if step % 100 == 0:
                save_ckp({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, "ckpt.pt")
    scaler = torch.amp.GradScaler("cuda")
    train(loader, scaler)
""",
        # the class reads its checkpoints back itself and restores no optimizer: not a resume
    """
import torch
class Model(torch.nn.Module):
    def fit(self, loader, epochs, path):
        self.optimizer = torch.optim.AdamW(self.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
        for epoch in range(epochs):
            for x in loader:
                self.scaler.scale(self(x)).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            self.save(path)
    def save(self, path):
        state = {}
        state["state_dict"] = self.state_dict()
        state["optimizer"] = self.optimizer.state_dict()
        torch.save(state, path)
    def load(self, path):
        self.load_state_dict(torch.load(path)["state_dict"])
""",
        # update() with the scaler state, or the dict handed to other code first
    """
import torch
class Experiment:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def save_model(self, path, **save_kwargs):
        save_kwargs.update({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()})
        save_kwargs.update({"grad_scaler": self.scaler.state_dict()})
        torch.save(save_kwargs, path)
    def save_other(self, path):
        state = {"optimizer": self.optimizer.state_dict()}
        add_extras(state)
        torch.save(state, path)
""",
        # the helper handed the trainer saves its scaler too
    """
import torch
def save_checkpoint(trainer, path):
    torch.save({"optimizer": trainer.optimizer.state_dict(), "scaler": trainer.scaler.state_dict()}, path)
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x in loader:
                self.scaler.scale(self.model(x)).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            save_checkpoint(self, "last.pt")
""",
        # the helper returns the scaler state too
    """
import torch
def make_state(model, optimizer, scaler, epoch):
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(), "epoch": epoch}
def train(model, optimizer, loader, epochs):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
        torch.save(make_state(model, optimizer, scaler, epoch), "last.pt")
""",
        # a factory whose returns disagree on where the scaler is: unknown
    """
import torch
from torch.amp import GradScaler
class Trainer:
    def __init__(self, model, swap):
        self.model, self.scaler = self.build(model, swap)
        self.optimizer = torch.optim.AdamW(self.model.parameters())
    def build(self, model, swap):
        scaler = GradScaler("cuda")
        if swap:
            return scaler, model
        return model, scaler
    def checkpoint(self, epoch):
        torch.save(dict(epoch=epoch, model=self.model.state_dict(), optimizer=self.optimizer.state_dict()), "model.pth")
""",
        # the scaler is built but only handed to a method that ignores it
    """
import torch
class Trainer:
    def train(self, optimizer, scheduler, scaler=None, epoch=0):
        raise NotImplementedError
    def run(self, optimizer, scheduler, epochs):
        scaler = torch.amp.GradScaler("cuda") if self.amp else None
        if self.resume:
            optimizer.load_state_dict(torch.load("last.pt")["optimizer"])
        for epoch in range(epochs):
            self.train(optimizer, scheduler, scaler, epoch=epoch)
            torch.save({"model": self.model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
""",
    # AMP switched off in the code itself
    """
import torch
def main(model, optimizer, loader, resume):
    amp = False
    scaler = torch.amp.GradScaler("cuda") if amp else None
    if resume:
        optimizer.load_state_dict(torch.load(resume)["optimizer"])
    for epoch in range(10):
        train_one_epoch(model, optimizer, loader, scaler=scaler)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
""",
    ]
    invalid = [
        # a loss-scaler wrapper (timm's NativeScaler, MAE's NativeScalerWithGradNormCount)
        Invalid(
            """
import torch
from timm.utils import NativeScaler
def main(model, optimizer, loader):
    loss_scaler = NativeScaler()
    for epoch in range(10):
        for x in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x)
            loss_scaler(loss, optimizer, parameters=model.parameters())
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pth")
""",
        ),
        Invalid(
            """
import torch
class ScalerWithNorm:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cuda")
    def __call__(self, loss, optimizer):
        self._scaler.scale(loss).backward()
        self._scaler.step(optimizer)
        self._scaler.update()
    def state_dict(self):
        return self._scaler.state_dict()
def main(model, optimizer, loader):
    loss_scaler = ScalerWithNorm()
    for epoch in range(10):
        for x in loader:
            loss_scaler(model(x), optimizer)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pth")
""",
        ),
        # the scaler comes out of a factory that returns it in a tuple; dict(...) in both arms of an if
        Invalid(
            """
import torch
from torch.amp import GradScaler
class Trainer:
    def __init__(self, model):
        self.model, self.scaler = self.create_model_and_scaler(model)
        self.optimizer = torch.optim.AdamW(self.model.parameters())
    def create_model_and_scaler(self, model):
        scaler = GradScaler("cuda")
        return model.cuda(), scaler
    def train_step(self, x):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = self.model(x)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
    def checkpoint(self, epoch, probes_only):
        if probes_only:
            state = dict(epoch=epoch)
        else:
            state = dict(epoch=epoch, model=self.model.state_dict(), optimizer=self.optimizer.state_dict())
        torch.save(state, "model.pth")
""",
        ),
        # a save helper handed the trainer object reads its optimizer, not its scaler
        Invalid(
            """
import torch
def save_checkpoint(trainer, path):
    torch.save({"model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict()}, path)
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x in loader:
                self.scaler.scale(self.model(x)).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            save_checkpoint(self, "last.pt")
""",
        ),
        # the dict is built key by key (the optimizer state through a local), or through update()
        Invalid(
            """
import torch
def main(model, optimizer, loader, epochs):
    scaler = torch.amp.GradScaler("cuda")
    def save(path):
        optimizer_state = optimizer.state_dict()
        state = {}
        state["model"] = model.state_dict()
        state["optimizer"] = optimizer_state
        torch.save(state, path)
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
        save("last.pt")
""",
        ),
        Invalid(
            """
import torch
class Experiment:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def save_model(self, path, **save_kwargs):
        save_kwargs.update({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()})
        torch.save(save_kwargs, path)
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x in loader:
                self.scaler.scale(self.model(x)).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            self.save_model("last.ckpt", epoch=epoch)
""",
        ),
        # the checkpoint dict comes from a helper that returns it without the scaler state
        Invalid(
            """
import torch
def make_state(model, optimizer, epoch):
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
def train(model, optimizer, loader, epochs):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
        state = make_state(model, optimizer, epoch)
        torch.save(state, "last.pt")
""",
        ),
        # the object's own state_dict() leaves its scaler out
        Invalid(
            """
import torch
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def state_dict(self):
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x in loader:
                self.scaler.scale(self.model(x)).backward()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            torch.save(self.state_dict(), "last.pt")
""",
        ),
        # a method of the object saves self.optimizer; the scaler is local to the caller
        Invalid(
            """
import torch
class Model(torch.nn.Module):
    def fit(self, loader, epochs, path):
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(epochs):
            for x in loader:
                scaler.scale(self(x)).backward()
                scaler.step(self.optimizer)
                scaler.update()
            self.save(path)
    def save(self, path):
        torch.save({"model": self.state_dict(), "optimizer": self.optimizer.state_dict()}, path)
    def load(self, path):
        self.optimizer.load_state_dict(torch.load(path)["optimizer"])
""",
        ),
        # detectron2: a SimpleTrainer subclass with its own scaler and SimpleTrainer's state_dict
        Invalid(
            """
import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.engine import SimpleTrainer
class Trainer(SimpleTrainer):
    def __init__(self, model, loader, optimizer):
        super().__init__(model, loader, optimizer)
        self.grad_scaler = torch.amp.GradScaler("cuda")
    def run_step(self):
        loss = self.model(next(self._data_loader_iter))
        self.optimizer.zero_grad()
        self.grad_scaler.scale(loss).backward()
        self.grad_scaler.step(self.optimizer)
        self.grad_scaler.update()
def do_train(model, loader, optimizer, out, resume):
    trainer = Trainer(model, loader, optimizer)
    checkpointer = DetectionCheckpointer(model, out, trainer=trainer)
    checkpointer.resume_or_load("", resume=resume)
    trainer.train(0, 1000)
""",
        ),
        # fvcore: the optimizer is a checkpointable, the scaler is not
        Invalid(
            """
import torch
from fvcore.common.checkpoint import Checkpointer
def train(model, optimizer, loader, out):
    scaler = torch.amp.GradScaler("cuda")
    checkpointer = Checkpointer(model, out, optimizer=optimizer)
    checkpointer.resume_or_load(out, resume=True)
    for i, x in enumerate(loader):
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
        if i % 1000 == 0:
            checkpointer.save(f"model_{i}")
""",
        ),
        # a save helper defined beside the training function, inside main (closures)
        Invalid(
            """
import torch
def main(args):
    def save_ckp(state, path):
        torch.save(state, path)
    def train(loader, scaler):
        for step, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
            if step % 100 == 0:
                checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                save_ckp(checkpoint, "ckpt.pt")
    scaler = torch.amp.GradScaler("cuda")
    train(loader, scaler)
""",
        ),
        # the same save after training, and the file resumes from it
        Invalid(
            """
import torch
def train(model, loader, optimizer, epochs, resume=None):
    scaler = torch.amp.GradScaler("cuda")
    if resume:
        ckpt = torch.load(resume)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    for epoch in range(epochs):
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.step(optimizer)
            scaler.update()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
""",
        ),
        # the checkpoint built with dict(...)
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for epoch in range(start_epoch, epochs):
    for x in loader:
        scaler.scale(model(x)).backward()
        scaler.step(optimizer)
        scaler.update()
    state = dict(epoch=epoch + 1, model=model.state_dict(), optimizer=optimizer.state_dict())
    torch.save(state, "checkpoint.pth")
""",
        ),
        Invalid(
            """
import torch
scaler = torch.amp.GradScaler("cuda")
for epoch in range(10):
    train_one_epoch(model, loader, optimizer, scaler)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, "ckpt.pt")
""",
        ),
        Invalid(
            """
import torch
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = torch.amp.GradScaler("cuda")
    def save(self, path):
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        torch.save(state, path)
""",
        ),
    ]

    def check(self, model):
        yield from self._inherited(model)
        keys = [k for k in model.scaler_keys() if model.scaler_status(k) == CERTAIN and not scaler_disabled(model, k) and _trains(model, k)]
        keys += [k for k in _wrapper_keys(model) if k not in keys]
        keys += [k for k in _injected_keys(model) if k not in keys]
        keys += [k for k in _inherited_keys(model) if k not in keys]
        if not keys:
            return
        saved = {e.scaler for e in model.events("scaler_state")}
        yield from self._through_helpers(model, keys, saved)
        yield from self._framework_checkpoints(model, keys, saved)
        reported: set[str] = set()  # classes whose torch.save is reported: the round trip would say it again
        yield from self._saves(model, keys, saved, reported)
        yield from self._round_trip(model, keys, saved, reported)

    def _saves(self, model, keys, saved, reported):
        seen: set[int] = set()
        for c in model.qual_calls:
            if c.qualname != "torch.save" or not c.node.args:
                continue
            f = c.func
            h = held(model, f, c.stmt, c.node.args[0], keys)
            if h is None or h.identity in seen:
                continue
            seen.add(h.identity)  # one finding per checkpoint, at its first save
            if not h.optimizer or h.scaler:
                continue
            in_scope = [k for k in keys if self._in_scope(model, k, f) and k not in saved]
            if not in_scope or any(self._registered(model, k) for k in in_scope) or not resumable(model, c):
                continue
            name = str(in_scope[0][-1])
            g = f
            while g is not None and g.cls is None:
                g = g.parent
            if g is not None:
                reported.add(g.cls.qualname)
            yield self.diagnostic(
                model,
                c.node,
                f"Checkpoint saves the optimizer state but not `{name}.state_dict()`: a resumed run restarts the loss "
                f"scale at 65536 and skips steps while it re-learns it; save and load the scaler state too",
                None,
                c.stmt,
            )

    def _framework_checkpoints(self, model, keys, saved):
        """fvcore/detectron2 checkpointers: the scaler left out of the checkpointables, or a
        detectron2 trainer whose ``state_dict()`` cannot hold it."""
        if getattr(model.index, "restores_optimizer", None) is False or script_never_resumes(model):
            return
        yield from self._fvcore_checkpointer(model, keys, saved)
        yield from self._d2_trainer(model, keys, saved)

    def _fvcore_checkpointer(self, model, keys, saved):
        """``Checkpointer(model, dir, optimizer=optimizer)``: fvcore saves the
        ``state_dict()`` of each keyword object, and the scaler is not one of them."""
        for c in model.qual_calls:
            if c.qualname not in _FVCORE_CHECKPOINTERS:
                continue
            kws = [kw for kw in c.node.keywords if kw.arg]
            if any(kw.arg is None for kw in c.node.keywords) or len(c.node.args) > 2:
                continue  # **checkpointables: what is registered is unknown
            if not any(isinstance(kw.value, (ast.Name, ast.Attribute)) and model.is_optimizer(kw.value, c.func) for kw in kws):
                continue
            if any(re.search(r"scal", model.text(kw.value), re.I) or re.search(r"scal", kw.arg, re.I) for kw in kws):
                continue
            in_scope = [k for k in keys if self._in_scope(model, k, c.func) and k not in saved]
            if not in_scope or any(self._registered(model, k, resolved=False) for k in in_scope):
                continue
            name = str(in_scope[0][-1])
            yield self.diagnostic(
                model, c.node,
                f"`{model.text(c.node.func)}` checkpoints the optimizer but not `{name}` (pass it as `scaler={name}`: "
                f"fvcore saves each keyword's `state_dict()`): a resumed run restarts the loss scale at 65536 and "
                f"skips steps while it re-learns it",
                None, c.stmt,
            )
    def _d2_trainer(self, model, keys, saved):
        """detectron2: a ``SimpleTrainer`` subclass that trains with a GradScaler of its own,
        checkpointed as ``DetectionCheckpointer(model, dir, trainer=trainer)`` in the same
        file. The checkpointer saves ``trainer.state_dict()``; SimpleTrainer's holds the
        iteration and the optimizer state only (detectron2's ``AMPTrainer`` adds
        ``"grad_scaler"``), so the scaler state is lost unless the class defines its own."""
        if not _TRAINER_CHECKPOINT.search(model.source):
            return  # the trainer is not a checkpointable here (the call may sit in code without AMP tokens)
        for qual, info in model.classes.items():
            node = info.node
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {qualify(b, [model.module_scope]) for b in node.bases}
            if not bases & _D2_SIMPLE_TRAINERS:
                continue
            own = [k for k in keys if k[0] == "A" and k[1] == qual and k not in saved]
            if not own:
                continue
            if any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == "state_dict" for m in node.body):
                continue  # its own state_dict: the main path judges what it holds
            made = next((a for a in model.assigns.get(own[0], ()) if a.stmt is not None), None)
            at = made.stmt if made is not None else node
            yield self.diagnostic(
                model, at,
                f"`{node.name}` (a detectron2 `SimpleTrainer`) trains with `self.{own[0][-1]}`, but the checkpointer "
                f"saves `trainer.state_dict()`, which holds only the iteration and the optimizer state: a resumed run "
                f"restarts the loss scale at 65536 and skips steps while it re-learns it; add `state_dict()`/"
                f"`load_state_dict()` that save and load `self.{own[0][-1]}.state_dict()` (as `AMPTrainer` does)",
                None, at,
            )

    def _inherited(self, model):
        """A method of a base class saves the checkpoint for a subclass in another module that
        trains with ``self.<scaler>`` (``class LTRTrainer(BaseTrainer)`` builds the GradScaler;
        ``BaseTrainer.save_checkpoint`` writes ``self.optimizer.state_dict()`` only), and the
        subclass does not replace the method. Known only in project mode."""
        index = model.index
        if getattr(index, "restores_optimizer", None) is None or not hasattr(index, "scaled_subclasses"):
            return
        for qual, info in model.classes.items():
            subs = [x for x in index.scaled_subclasses(model.path, qual) if absolute(x[0]) != absolute(model.path)]
            if not subs or any(e.scaler and e.scaler[0] == "A" and e.scaler[1] == qual for e in model.events()):
                continue  # the class has a scaler of its own: the rule's main path judges it
            for c in model.qual_calls:
                if c.qualname != "torch.save" or not c.node.args or c.func.cls is not info:
                    continue
                users = [x for x in subs if c.func.name not in x[3]]
                h = held(model, c.func, c.stmt, c.node.args[0]) if users else None
                if h is None or not h.optimizer or h.scaler:
                    continue
                if not resumable(model, c):
                    continue
                spath, squal, attrs, _over = users[0]
                where = index.module_of.get(absolute(spath), "another module")
                yield self.diagnostic(
                    model, c.node,
                    f"Checkpoint saves the optimizer state but not the scaler state: `{squal}` (in {where}) "
                    f"inherits `{c.func.name}()` and trains with `self.{attrs[0]}`; a resumed run restarts the loss "
                    f"scale at 65536 and skips steps while it re-learns it; save and load `self.{attrs[0]}.state_dict()` too",
                    None, c.stmt,
                )
                break

    def _round_trip(self, model, keys, saved, reported=frozenset()):
        """A class that trains with ``self.<scaler>`` and checkpoints itself through a pair of
        methods: one returns a dict holding ``self.<optimizer>.state_dict()`` and nothing
        scaler-like (``state_dict()``, ``save()``), another restores the optimizer
        (``self.optimizer.load_state_dict(state["optim"])``). Whoever writes that
        dict to disk (a mixin's ``save``, an engine), the resume restores the optimizer and
        not the scale. Also for a subclass that inherits the scaler and the ``load...`` method
        from a project base class and replaces the method that returns the dict. Project mode
        only, and only when no other file of the project (but those of the base classes, which
        save none of this attribute's state) may save or load a scaler state (a caller's
        ``trainer.scaler.state_dict()`` would keep it)."""
        files = getattr(model.index, "scaler_state_files", None)
        if files is None or script_never_resumes(model):
            return
        query = getattr(model.index, "inherited_scaler_attrs", None)
        for qual, info in model.classes.items():
            own = [k for k in keys if k[0] == "A" and k[1] == qual and k not in saved]
            if not own or qual in reported or not isinstance(info.node, ast.ClassDef) or any(self._registered(model, k) for k in own):
                continue
            chain = {absolute(bp) for _a, bp, _q in (query(model.path, qual) if query is not None else ())}
            if files - {absolute(model.path)} - chain:
                continue  # another file may keep the scaler's state (the chain's own files save none of this attr's)
            funcs = {id(f.node): f for f in (*model.funcs, *info.methods.values()) if f.cls is info}  # walked or declared
            methods = [(m, funcs.get(id(m))) for m in info.node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not any(f is not None and _restores_own_optimizer(model, m, f) for m, f in methods) and not _base_restores(
                    model, qual, {m.name for m, _f in methods}, {k[-1] for k in own}):
                continue
            for m, f in methods:
                ret = _returned_checkpoint(model, m, f) if f is not None else None
                if ret is None:
                    continue
                name = str(own[0][-1])
                yield self.diagnostic(
                    model, ret,
                    f"`{m.name}()` returns the optimizer state but not `self.{name}.state_dict()`, and the class "
                    f"restores its optimizer from that dict: a resumed run restarts the loss scale at 65536 and "
                    f"skips steps while it re-learns it; save and load the scaler state too",
                    None, ret,
                )
                break

    def _through_helpers(self, model, keys, saved):
        """A checkpoint written by a helper (same file or another module, resolved through
        the project index): the training function hands it a dict without the scaler state,
        or calls a helper that builds the dict itself and cannot save the scaler, or leaves
        out the scaler argument a helper saves when given."""
        for c in model.qual_calls:
            if c.qualname == "torch.save" or (c.qualname is None and not isinstance(c.node.func, ast.Attribute)) or not c.node.args and not c.node.keywords:
                continue
            in_scope = [k for k in keys if self._in_scope(model, k, c.func) and k not in saved]
            hands = self._hands_state(model, c)
            selfs = self._hands_self(c)
            if not hands:  # self.save(path): only a scaler local to the caller is out of the method's reach
                in_scope = [k for k in in_scope if k[0] == "L" or (selfs and k[0] == "A")] if self._own_method(c) or selfs else []
            if not in_scope:
                continue
            hit = model.project_callee(c)
            if hit is None:
                continue
            if not hands and not any(
                d.has_opt and (any(p.startswith("self.") for p in d.opt_params) or any(hit[1].param_at(pos) in d.owner_params for pos in selfs))
                for d in hit[2].dict_saves
            ):
                continue  # a method given nothing of the checkpoint: it must save self.<optimizer>
            _path, callee, facts = hit
            if any(self._registered(model, k, resolved=False) for k in in_scope):
                continue
            why = self._helper_verdict(model, c, callee, facts, keys)
            if why is None or not resumable(model, c):
                continue
            name = str(in_scope[0][-1])
            helper = model.text(c.node.func)
            yield self.diagnostic(
                model, c.node,
                f"`{helper}()` {why.format(scaler=name)}: a resumed run restarts the loss scale at "
                f"65536 and skips steps while it re-learns it; save and load the scaler state too",
                None, c.stmt,
            )

    @staticmethod
    def _own_method(c) -> bool:
        """``self.save(path)`` from a method: the object's own save method, which may write
        ``self.optimizer.state_dict()`` but cannot reach a scaler local to the caller."""
        fn = c.node.func
        return (isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name)
                and c.func.self_name is not None and fn.value.id == c.func.self_name)

    @staticmethod
    def _hands_self(c) -> list:
        """The argument positions where a method passes its own object (``save_checkpoint(self, path)``)."""
        me = c.func.self_name
        if me is None:
            return []
        args = list(enumerate(c.node.args)) + [(kw.arg, kw.value) for kw in c.node.keywords if kw.arg]
        return [pos for pos, a in args if isinstance(a, ast.Name) and a.id == me]

    @staticmethod
    def _hands_state(model, c) -> bool:
        """Does the call hand over what a checkpoint is made of: a dict, an optimizer, a scaler?"""
        for a in [*c.node.args, *(kw.value for kw in c.node.keywords)]:
            if literal_dict(a) is not None:
                return True
            if isinstance(a, (ast.Name, ast.Attribute)):
                if model.is_optimizer(a, c.func) or model.is_scaler(model.key_of_expr(a, c.func)):
                    return True
                if isinstance(a, ast.Name) and any(literal_dict(x.value) is not None for x in model.assigns.get(model.key_of_expr(a, c.func), ())):
                    return True
        return False

    def _helper_verdict(self, model, c, callee, facts, keys) -> str | None:
        args = list(enumerate(c.node.args)) + [(kw.arg, kw.value) for kw in c.node.keywords if kw.arg]
        for pos in self._hands_self(c):
            p = callee.param_at(pos)
            if p is not None and any(d.has_opt and not d.has_scaler and p in d.owner_params for d in facts.dict_saves):
                return f"is given this object and saves `{p}.<optimizer>`'s state but not `{{scaler}}.state_dict()`"
        for pos, a in args:
            p = callee.param_at(pos)
            if p is None or p not in facts.saves_param:
                continue
            h = held(model, c.func, c.stmt, a, keys)
            if h is not None and h.optimizer and not h.scaler:
                return "saves a checkpoint with the optimizer state but not `{scaler}.state_dict()`"
        passed = {callee.param_at(pos) for pos, a in args if not (isinstance(a, ast.Constant) and a.value is None)}
        handed = [(callee.param_at(pos), a) for pos, a in args if isinstance(a, (ast.Name, ast.Attribute))]
        optimizers = {p for p, a in handed if model.is_optimizer(a, c.func)}
        scalers = {p for p, a in handed if (k := model.key_of_expr(a, c.func)) is not None and (k in keys or model.is_scaler(k))}
        for d in facts.dict_saves:
            # the summary names what it can; the parameters whose state the dict holds are typed by this call's arguments
            has_opt = d.has_opt or bool(optimizers & set(d.state_params))
            if not has_opt or not (optimizers or d.opt_params):
                continue
            if scalers & set(d.state_params):
                continue  # the scaler handed to a parameter whose state is saved, whatever its name
            if not d.has_scaler and not callee.varkw and not any("scal" in p.lower() for p in callee.params):
                return "writes a checkpoint with the optimizer state and has no parameter for the scaler, so `{scaler}.state_dict()` is never saved"
            if d.scaler_params and not any(p in passed for p in d.scaler_params) and not callee.varkw:
                return (f"saves the scaler state only when given `{d.scaler_params[0]}=`, and this call leaves it out "
                        "(the checkpoint has the optimizer state but not `{scaler}.state_dict()`)")
        return None

    @staticmethod
    def _in_scope(model, key, f) -> bool:
        if key[0] == "L":
            g = f
            while g is not None:
                if g.fid == key[1]:
                    return True
                g = g.parent
            return False
        if key[0] == "A":
            g = f
            while g is not None:
                if g.cls is not None and g.cls.qualname == key[1]:
                    return True
                g = g.parent
            return False
        if key[0] == "G":
            return f.node is model.tree or model.mentions(f, str(key[1]))
        return False

    @staticmethod
    def _registered(model, key, resolved=True) -> bool:
        """The scaler is handed to something that saves or tracks it: a project helper whose
        summary saves that argument's state (``resolved``: helpers judged call by call are
        not asked), or (unresolved) a callee named like a saver."""
        for c in model.qual_calls:
            positions = [p for p, k in c.arg_keys if k == key]
            if not positions:
                continue
            hit = model.project_callee(c)
            if hit is not None:
                _path, callee, facts = hit
                if not resolved:
                    continue
                for pos in positions:
                    p = callee.param_at(pos)
                    if p is not None and ("state_dict" in facts.scaler_ops.get(p, ()) or p in facts.saves_param
                                          or any(p in d.scaler_params for d in facts.dict_saves)):
                        return True
                continue
            if REGISTERS.search(model.text(c.callee)):
                return True
        return False


def _restores_own_optimizer(model, m, f) -> bool:
    """Does method ``m`` restore ``self.<optimizer>`` (``self.optimizer.load_state_dict(...)``,
    from its argument or from a file it reads)?"""
    for n in _own_nodes(m):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load_state_dict"
                and isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name)
                and n.func.value.value.id == f.self_name and model.is_optimizer(n.func.value, f)):
            return True
    return False


def _base_restores(model, qual, defined, attrs) -> bool:
    """For a scaler class ``qual`` inherits (``attrs``): does the project base class that
    builds it define a ``load...`` method this class does not replace, in a file that
    restores an optimizer state (``TorchModelPipline.load`` for a DDP subclass that
    overrides only ``save``)?"""
    index = model.index
    query = getattr(index, "inherited_scaler_attrs", None)
    restoring = getattr(index, "restoring_files", None)
    if query is None or not restoring:
        return False
    for attr, bpath, bqual in query(model.path, qual):
        if attr not in attrs or absolute(bpath) not in restoring:
            continue
        summ = index.summary(bpath)
        fact = summ.classes.get(bqual) if summ is not None else None
        if fact is not None and any(m.startswith("load") and m not in defined for m in fact.methods):
            return True
    return False


def _returned_checkpoint(model, m, f):
    """The first ``return`` of method ``m`` (the model function ``f``) that hands back a
    checkpoint dict of the object (the persistence query's reading of it) holding
    ``self.<optimizer>.state_dict()`` and nothing of the scaler; None when the method returns
    a dict that may hold the scaler first."""
    for r in sorted((n for n in _own_nodes(m) if isinstance(n, ast.Return) and n.value is not None), key=lambda n: n.lineno):
        h = held(model, f, r, r.value) if state_owner(r.value) is None else None
        if h is not None and h.scaler:
            return None
        if h is not None and h.own_optimizer:
            return r
    return None


_TRAINING_OPS = {"scale", "step", "update", "unscale", "update_value"}


def _trains(model, key) -> bool:
    """Does the scaler train (so its state matters)? It scales or steps here, or is handed to
    code that may: an unresolved call, a project function whose summary uses that argument,
    or a store/return we cannot follow. A local handed only to project functions that ignore
    it (an abstract ``train(optimizer, scheduler, scaler)`` overridden without AMP) does not."""
    if any(e.scaler == key and e.kind in ("scale", "step", "update", "unscale", "backward") for e in model.events()):
        return True
    if key[0] == "A":
        return not _idle_attr(model, key)
    if key[0] != "L" and key[0] != "G":
        return True
    args: set[int] = set()
    for f in model.funcs:
        for c in f.calls:
            positions = [p for p, k in c.arg_keys if k == key]
            if not positions:
                continue
            args.update(id(a) for a in [*c.node.args, *(kw.value for kw in c.node.keywords)])
            hit = model.project_callee(c)
            if hit is None:
                return True
            _path, callee, facts = hit
            if callee.varkw or any(facts.scaler_ops.get(callee.param_at(p) or "", set()) & _TRAINING_OPS for p in positions):
                return True
    return any(k == key and id(n) not in args for f in model.funcs for k, n, _c, _s in f.bare_uses)


def _idle_attr(model, key) -> bool:
    """``self.<attr> = GradScaler()`` that nothing uses: the file's code reads the name only
    where it assigns it (no load of an attribute or name of that name, no parameter, keyword
    or string constant equal to it: ``getattr(self, "grad_scaler")``; a comment or a message
    that mentions it reads nothing), and no other file of the project calls or reads anything
    on it (``x.grad_scaler.scale(...)`` in a subclass or a caller). Project mode only."""
    index = model.index
    if not getattr(index, "project_files", None) or not hasattr(index, "mentioned"):
        return False
    attr = str(key[-1])
    for n in ast.walk(model.tree):
        if ((isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load))
                or (isinstance(n, ast.Name) and n.id == attr and isinstance(n.ctx, ast.Load))
                or (isinstance(n, (ast.arg, ast.keyword)) and n.arg == attr)
                or (isinstance(n, ast.Constant) and n.value == attr)):
            return False  # read somewhere: it may train
    return not index.mentioned([f"{attr}."], absolute(model.path))  # `trainer.grad_scaler.scale(...)` elsewhere


def _wrapper_keys(model) -> list:
    """Names made by a loss-scaler wrapper: timm's ``NativeScaler()`` or a project class
    named ``...Scaler...`` that builds an enabled ``GradScaler`` in ``self.<attr>`` and defines ``state_dict()``
    (MAE's ``NativeScalerWithGradNormCount``). Their state is the scaler's; only this rule
    treats them as scalers (they have no ``update()`` of their own to check)."""
    index = model.index
    out = []
    if not hasattr(index, "is_scaler_wrapper"):
        return out
    for key, assigns in model.assigns.items():
        if key[0] not in ("L", "A", "G"):
            continue
        calls = [a for a in assigns if isinstance(a.value, ast.Call) and a.func is not None]
        if not calls or len(calls) != len([a for a in assigns if a.value is not None]):
            continue
        if not all("Scaler" in ((dotted(a.value.func) or [""])[-1]) for a in calls):
            continue  # a class named for what it is (NativeScaler, ...WithGradNormCount): resolve only those
        qs = [qualify(a.value.func, a.func.scopes()) for a in calls]
        if all(q is not None and not q.startswith("torch.") and index.is_scaler_wrapper(model.path, q) for q in qs):
            out.append(key)
    return out


def _inherited_keys(model) -> list:
    """``self.<scaler>`` of a class that inherits it: a project base class (another module
    too) builds the enabled GradScaler in its ``__init__`` and the subclass trains and saves
    checkpoints with it (``class Trainer(BaseTrainer)``). Project mode only; an attribute
    whose state any class of the chain saves or loads, or whose ``.state_dict()`` or
    ``.load_state_dict()`` the class's code calls (a comment does not), is left out."""
    index = model.index
    query = getattr(index, "inherited_scaler_attrs", None)
    if query is None or getattr(index, "restores_optimizer", None) is None:
        return []
    out = []
    for qual, info in model.classes.items():
        if not isinstance(info.node, ast.ClassDef):
            continue
        handled = None
        for attr, _bp, _bq in query(model.path, qual):
            key = ("A", qual, attr)
            if key in model.assigns:
                continue  # the class makes its own
            if handled is None:  # whose state the class's code takes or restores: `<...>.scaler.state_dict()`
                handled = {(b.attr if isinstance(b, ast.Attribute) else b.id) for n in ast.walk(info.node)
                           if isinstance(n, ast.Attribute) and n.attr in ("state_dict", "load_state_dict")
                           and isinstance(b := n.value, (ast.Attribute, ast.Name))}
            if attr in handled:
                continue  # the class handles its state
            out.append(key)
    return out


def _injected_keys(model) -> list:
    """``self.scaler = scaler`` (a parameter): a class handed the scaler it trains with
    (``scale``/``step``/``update`` on it), in project mode, when no other file of the project
    can save or load a scaler state (``trainer.scaler.state_dict()`` in the caller would keep
    it). The caller's GradScaler is not followed; its name and use stand for it."""
    files = getattr(model.index, "scaler_state_files", None)
    if files is None or files - {absolute(model.path)}:
        return []
    out = []
    for key, assigns in model.assigns.items():
        if key[0] != "A" or model.scaler_status(key) != LIKELY or scaler_disabled(model, key):
            continue
        if not all(isinstance(a.value, ast.Name) and a.func is not None and a.value.id in a.func.params for a in assigns):
            continue
        kinds = {e.kind for e in model.events() if e.scaler == key}
        if {"scale", "step", "update"} <= kinds:
            out.append(key)
    return out


def _own_nodes(fnode):
    """The nodes of a function's body, not of functions or classes defined in it."""
    todo = list(fnode.body)
    while todo:
        n = todo.pop()
        yield n
        for ch in ast.iter_child_nodes(n):
            if not isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.append(ch)
