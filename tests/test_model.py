"""The loop model: name resolution through imports/aliases and scaler tracking."""

from __future__ import annotations

import ast
import textwrap

import pytest

from amplint.model import CERTAIN, LIKELY, NOT, build_model


def model(src: str):
    src = textwrap.dedent(src)
    return build_model(src, ast.parse(src))


@pytest.mark.parametrize(
    "imports,ctor",
    [
        ("import torch", "torch.amp.GradScaler('cuda')"),
        ("import torch", "torch.GradScaler('cuda')"),
        ("import torch", "torch.cuda.amp.GradScaler()"),
        ("import torch", "torch.cpu.amp.GradScaler()"),
        ("import torch as th", "th.amp.GradScaler('cuda')"),
        ("from torch.cuda import amp", "amp.GradScaler()"),
        ("import torch.cuda.amp as amp", "amp.GradScaler()"),
        ("from torch.amp import GradScaler", "GradScaler('cuda')"),
        ("from torch.cuda.amp import GradScaler as GS", "GS()"),
        ("from torch.amp.grad_scaler import GradScaler", "GradScaler('cuda')"),
        ("from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler", "ShardedGradScaler()"),
        ("import torch\nGS = torch.cuda.amp.GradScaler", "GS()"),
    ],
)
def test_scaler_constructions_in_every_spelling(imports, ctor):
    m = model(f"{imports}\ns = {ctor}\n")
    assert m.scaler_status(("G", "s")) == CERTAIN


def test_function_local_import():
    m = model(
        """
        def train():
            from torch.cuda.amp import GradScaler
            s = GradScaler()
            s.update()
        """
    )
    f = m.toplevel["train"]
    assert m.scaler_status(("L", f.fid, "s")) == CERTAIN
    assert [e.kind for e in f.events] == ["update"]


def test_self_attribute_set_in_one_method_used_in_another():
    m = model(
        """
        import torch
        class T:
            def __init__(self):
                self.gs = torch.amp.GradScaler("cuda")
            def step(self):
                self.gs.step(self.opt)
                self.gs.update()
        """
    )
    assert m.scaler_status(("A", "T", "gs")) == CERTAIN
    kinds = [e.kind for e in m.classes["T"].methods["step"].events]
    assert kinds == ["step", "update"]


@pytest.mark.parametrize("factory,typed", [
    # the instance a classmethod builds with cls(...) and sets up is the class's own object
    ("optimizer = cls(opt)\n        optimizer._scaler = GradScaler()", True),
    ("optimizer = cls(opt)\n        if fp16:\n            optimizer._scaler = GradScaler()", True),
    # assigned something else too, or built by another class, or outside a classmethod: not known
    ("optimizer = cls(opt)\n        optimizer = wrap(optimizer)\n        optimizer._scaler = GradScaler()", False),
    ("optimizer = Other(opt)\n        optimizer._scaler = GradScaler()", False),
], ids=["cls_call", "under_if", "reassigned", "other_class"])
def test_an_instance_a_classmethod_builds_is_the_class(factory, typed):
    src = (
        "from torch.amp import GradScaler\n"
        "class Optimizer:\n"
        "    def __init__(self, opt):\n"
        "        self._optimizer = opt\n"
        "        self._scaler = None\n"
        "    @classmethod\n"
        "    def from_opt(cls, opt, fp16=True):\n"
        f"        {factory}\n"
        "        return optimizer\n"
        "    def step(self):\n"
        "        self._scaler.step(self._optimizer)\n"
        "        self._scaler.update()\n"
    )
    m = build_model(src, ast.parse(src))
    assert (m.scaler_status(("A", "Optimizer", "_scaler")) == CERTAIN) is typed


def test_the_factory_made_scaler_is_a_class_fact_of_the_summary():
    from amplint.model.summary import summarise

    src = textwrap.dedent(
        """
        class Optimizer:
            @classmethod
            def from_opt(cls, opt):
                optimizer = cls(opt)
                from torch.cuda.amp import GradScaler
                optimizer._scaler = GradScaler()
                return optimizer
        """
    )
    assert summarise(ast.parse(src), source=src).classes["Optimizer"].scaler_attrs == ("_scaler",)


def test_parameter_receives_scaler_from_call_site_and_annotation():
    m = model(
        """
        import torch
        def helper(s, opt):
            s.step(opt)
        def annotated(x: torch.amp.GradScaler):
            x.update()
        scaler = torch.amp.GradScaler("cuda")
        helper(scaler, opt)
        """
    )
    assert m.scaler_status(("L", m.toplevel["helper"].fid, "s")) == CERTAIN
    assert m.scaler_status(("L", m.toplevel["annotated"].fid, "x")) == CERTAIN


def test_other_libraries_scalers_are_not_torch():
    m = model(
        """
        import torch
        from fairseq.optim import DynamicLossScaler
        scaler = DynamicLossScaler()
        def f(scaler):
            scaler(loss, opt)
        """
    )
    assert m.scaler_status(("G", "scaler")) == NOT
    assert m.scaler_status(("L", m.toplevel["f"].fid, "scaler")) == NOT


def test_parameter_named_scaler_is_likely_in_amp_file():
    m = model(
        """
        import torch
        def f(scaler, opt, loss):
            with torch.autocast("cuda"):
                pass
            scaler.scale(loss).backward()
            scaler.step(opt)
        """
    )
    assert m.scaler_status(("L", m.toplevel["f"].fid, "scaler")) == LIKELY


def test_scaled_loss_variable_and_branch_literals():
    m = model(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        if use_amp:
            loss = scaler.scale(loss)
            loss.backward()
        else:
            loss.backward()
        if not use_amp:
            opt.step()
        """
    )
    evs = [e for e in m.events() if e.kind in ("backward", "opt_step")]
    scaled, unscaled, plain = evs
    assert scaled.scaled and not unscaled.scaled
    assert not scaled.co_occurs(unscaled)
    assert not scaled.co_occurs(plain)  # `if use_amp` vs `if not use_amp`
    assert unscaled.co_occurs(plain)


def test_early_return_makes_later_code_exclusive():
    m = model(
        """
        import torch
        def step(model, opt, scaler=None):
            with torch.autocast("cuda"):
                loss = model()
            if scaler is not None:
                scaler.scale(loss).backward()
                return
            loss.backward()
            opt.step()
        """
    )
    evs = {e.kind + str(e.scaled): e for e in m.events()}
    assert not evs["backwardTrue"].co_occurs(evs["opt_stepFalse"])


def test_autocast_regions_and_enabled_state():
    m = model(
        """
        import torch
        from functools import partial
        from contextlib import nullcontext
        amp_ctx = partial(torch.autocast, device_type="cuda")
        ctx = torch.autocast("cuda") if amp else nullcontext()
        with torch.autocast("cuda", enabled=False):
            a.backward()
        with amp_ctx():
            b.backward()
        with ctx:
            c.backward()
        with torch.cuda.amp.autocast(enabled=flag):
            d.backward()
        """
    )
    states = [e.ctx.autocasts[-1].enabled for e in m.events("backward")]
    assert states == ["no", "yes", "maybe", "maybe"]


def test_loops_over_optimizers_are_not_iterations():
    m = model(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            for opt in optimizers:
                scaler.step(opt)
        """
    )
    (step,) = list(m.events("step"))
    assert m.iteration_loop(step).node.iter.id == "loader"


@pytest.mark.parametrize(
    "annotation, expected",
    [
        ("Saver", "pkg.saving.Saver"),
        ("saving.Saver", "pkg.saving.Saver"),
        ("'Saver'", "pkg.saving.Saver"),
        ("Optional[Saver]", "pkg.saving.Saver"),
        ("Saver | None", "pkg.saving.Saver"),
        ("Saver | Other", None),  # either: not one class
        ("list[Saver]", None),
        ("int", None),
        ("torch.optim.Optimizer", None),
        ("'not valid('", None),
    ],
)
def test_declared_class_of_an_annotation(annotation, expected):
    from amplint.model.names import declared_class

    scope = {"Saver": "pkg.saving.Saver", "saving": "pkg.saving", "Optional": "typing.Optional", "torch": "torch"}
    assert declared_class(ast.parse(annotation, mode="eval").body, scope) == expected


def test_summary_marks_calls_through_declared_types():
    """`saver: Saver` and `self.model: LM = model` give the callee's class, flagged as only
    declared (a derived class may redefine the method); a rebound parameter gives nothing."""
    from amplint.model.summary import summarise

    src = textwrap.dedent('''
        from pkg.saving import Saver
        from pkg.lm import LM
        def train(saver: Saver, other: Saver):
            saver.save(1)
            other = make()
            other.save(2)
        class T:
            def __init__(self, model: LM, made):
                self.model = model
                self.made = Saver()
            def fit(self):
                self.model.save_checkpoint(3)
                self.made.save(4)
    ''')
    s = summarise(ast.parse(src), source=src)
    calls = {c.line: (c.callee, c.declared) for f in s.functions.values() for c in f.calls}
    assert calls[5] == ("pkg.saving.Saver.save", True)
    assert 7 not in calls or calls[7][0] != "pkg.saving.Saver.save"
    assert calls[13] == ("pkg.lm.LM.save_checkpoint", True)
    assert calls[14] == ("pkg.saving.Saver.save", False)
