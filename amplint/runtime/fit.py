"""Fit the harness's tiny seeded problem to the loop's loss and target contract (static part).

``amplint verify`` used to feed every loop the same regression data (``(64, 8)`` inputs,
``(64, 1)`` float targets, ``mse_loss``). A classifier that calls ``F.cross_entropy`` itself,
or a regression loop that does ``model(x).squeeze(-1)``, then failed on data it never accepts.
This module reads the loop's own code (the function, the same-file functions it calls, its
class when it is a method, and the module's top-level assignments) for the loss it computes
and the reshaping it applies, and returns a :class:`Problem` the harness builds its data,
model output and loss from:

=====================================================  =======================================
the loop calls                                          targets (per batch of 64)
=====================================================  =======================================
``cross_entropy`` / ``CrossEntropyLoss`` /              class indices, ``int64`` ``(64,)``,
``nll_loss`` / ``NLLLoss``                              4 classes (model output ``(64, 4)``)
``binary_cross_entropy_with_logits`` /                  0./1. floats of the output's shape
``BCEWithLogitsLoss``                                   ``(64, 1)``
``mse_loss`` / ``l1_loss`` / ``smooth_l1_loss`` /       floats of the output's shape ``(64, 1)``
``huber_loss`` and their modules, or nothing
=====================================================  =======================================

and when the loop squeezes the model output (``.squeeze(-1)``, ``.squeeze(1)``,
``.squeeze()``, ``.view(-1)``, ``.reshape(-1)``, ``.flatten()``) or unsqueezes its targets
(``.unsqueeze(1)``/``(-1)``), the float targets are 1-D ``(64,)``. Two different loss
families in one loop leave the problem unfitted (``Problem.unknown`` says why): verify then
says ``cannot verify`` instead of guessing.

No torch here: the harness turns the description into tensors.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["Problem", "fit_problem", "LOSS_KINDS"]

# loss call name (the last dotted part) -> target contract
LOSS_KINDS: dict[str, str] = {
    "cross_entropy": "classes", "CrossEntropyLoss": "classes",
    "nll_loss": "classes", "NLLLoss": "classes",
    "binary_cross_entropy_with_logits": "binary", "BCEWithLogitsLoss": "binary",
    "mse_loss": "regress", "MSELoss": "regress", "l1_loss": "regress", "L1Loss": "regress",
    "smooth_l1_loss": "regress", "SmoothL1Loss": "regress", "huber_loss": "regress",
    "HuberLoss": "regress",
}
_SQUEEZE_OUT = {"squeeze", "view", "reshape", "flatten"}
N_CLASSES = 4


@dataclass(frozen=True)
class Problem:
    """What the harness's data and loss look like (see the module docstring)."""

    target: str = "regress"  # regress | classes | binary
    squeeze: bool = False  # float targets are (N,) and the loop reshapes the output to match
    n_classes: int = N_CLASSES
    loss_name: str = "mse_loss"  # the loss the harness hands to a loss_fn parameter
    evidence: tuple[str, ...] = field(default=(), compare=False)  # what in the code chose it
    unknown: str | None = field(default=None, compare=False)  # why no problem could be fitted
    in_shape: tuple[int, ...] = (8,)  # one sample's input shape
    out_shape: tuple[int, ...] | None = None  # one sample's output shape (the user's model); None: bundled
    model_name: str | None = None  # the user's model class the harness builds, None: the bundled model
    model_factory: Any = field(default=None, compare=False, repr=False)  # () -> nn.Module
    optimizer: Any = None  # amplint.runtime.optim_spec.OptSpec: the script's optimizer, None: the harness's SGD
    optimizer_note: str | None = field(default=None, compare=False)  # why the script's optimizer is not used

    @property
    def out_dim(self) -> int:
        return self.n_classes if self.target == "classes" else 1

    def key(self) -> tuple[Any, ...]:
        return (self.target, self.squeeze, self.n_classes, self.in_shape, self.model_name,
                self.optimizer.key() if self.optimizer is not None else None)

    def describe(self) -> str:
        out = f"(64, {', '.join(map(str, self.out_shape))})" if self.out_shape is not None else None
        if self.target == "classes":
            t = (f"int64 class indices (64,) of {self.n_classes} classes, "
                 f"model output {out or f'(64, {self.n_classes})'}")
        else:
            kind = "0./1. float targets" if self.target == "binary" else "float targets"
            t = f"{kind} {'(64,)' if self.squeeze else '(64, 1)'}, model output {out or '(64, 1)'}"
        shape = ", ".join(map(str, (64, *self.in_shape)))
        s = f"inputs float32 ({shape}); {t}; loss_fn <- {self.loss_name}"
        if self.evidence:
            s += " (from " + ", ".join(self.evidence) + ")"
        return s


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _int_arg(call: ast.Call) -> int | None:
    if not call.args:
        return None
    a = call.args[0]
    if isinstance(a, ast.Constant) and isinstance(a.value, int):
        return a.value
    if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) and isinstance(a.operand, ast.Constant):
        v = a.operand.value
        return -v if isinstance(v, int) else None
    return None


def _scan(nodes: Iterable[ast.AST]) -> tuple[dict[str, list[str]], list[str]]:
    kinds: dict[str, list[str]] = {}
    squeezes: list[str] = []
    for root in nodes:
        for n in ast.walk(root):
            if not isinstance(n, ast.Call):
                continue
            name = _last_name(n.func)
            if name in LOSS_KINDS:
                kinds.setdefault(LOSS_KINDS[name], []).append(f"{name} (line {n.lineno})")
                continue
            if not isinstance(n.func, ast.Attribute):
                continue
            recv = n.func.value
            if name in _SQUEEZE_OUT and isinstance(recv, ast.Call):  # model(x).squeeze(-1)
                arg = _int_arg(n)
                if name == "squeeze" and (not n.args or arg in (-1, 1)) or \
                        name in ("view", "reshape") and arg == -1 and len(n.args) == 1 or \
                        name == "flatten" and not n.args:
                    squeezes.append(f".{name}({ast.unparse(n.args[0]) if n.args else ''}) on the output "
                                    f"(line {n.lineno})")
            elif name == "unsqueeze" and not isinstance(recv, ast.Call) and _int_arg(n) in (1, -1):
                squeezes.append(f"{ast.unparse(recv)}.unsqueeze({_int_arg(n)}) (line {n.lineno})")
    return kinds, squeezes


def fit_problem(nodes: Iterable[ast.AST]) -> Problem:
    """The :class:`Problem` that fits the loss and reshaping found in ``nodes`` (the loop's code)."""
    kinds, squeezes = _scan(nodes)
    if len(kinds) > 1:
        found = "; ".join(f"{k}: {', '.join(v[:2])}" for k, v in sorted(kinds.items()))
        return Problem(unknown=f"the loop uses losses with different target contracts ({found}); "
                               f"the harness cannot build one data set that fits them all")
    kind = next(iter(kinds), "regress")
    evidence = tuple(next(iter(kinds.values()), [])[:1])
    loss_name = {"classes": "cross_entropy", "binary": "binary_cross_entropy_with_logits"}.get(kind, "mse_loss")
    squeeze = bool(squeezes) and kind != "classes"
    if squeeze:
        evidence += (squeezes[0],)
    return Problem(target=kind, squeeze=squeeze, loss_name=loss_name, evidence=evidence)
