"""The optimizer the script builds, read from its code (issue 32: the reference and the fp32
run use the user's optimizer settings where they can be built).

``read_optimizer(tree, namespace)`` finds the calls that construct a ``torch.optim`` optimizer
anywhere in the file (``torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)``,
``optim.SGD(params, 0.1, momentum=0.9)``, an imported ``AdamW(...)``), resolving the callee in
the loaded module's namespace, so aliases count and look-alikes do not. It keeps the settings
written as literals; a setting that is not a literal (``lr=args.lr``) is left at the harness's
choice and said so. The spec is used only when the file builds exactly one kind of optimizer
with one set of settings, of a class that updates each parameter on its own (so a split over
several optimizer parameters trains like one), and only when the reference loop itself passes
every check with it (verify tries that first; otherwise the harness's SGD, with the reason).

No torch import at module level: ``torch`` is reached through the namespace.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

# per-parameter optimizers (LBFGS and the sparse ones are not)
PER_PARAM = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"}
# settings that change the arithmetic; device or implementation switches (fused, foreach,
# capturable, differentiable) are the harness's to choose
SETTINGS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "amsgrad", "alpha",
            "centered", "maximize", "lr_decay", "initial_accumulator_value", "rho", "momentum_decay",
            "decoupled_weight_decay"}


@dataclass(frozen=True)
class OptSpec:
    name: str  # the torch.optim class name
    kwargs: tuple[tuple[str, Any], ...]
    line: int
    dropped: tuple[str, ...] = ()  # settings written but not literals (left to the harness)

    def describe(self) -> str:
        if not self.kwargs and not self.dropped:
            return f"{self.name}() (torch's defaults)"
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.kwargs)})"

    def key(self) -> tuple[Any, ...]:
        return (self.name, self.kwargs)

    def build(self, params: list[Any], default_lr: float) -> Any:
        import torch

        kw = dict(self.kwargs)
        if "lr" in self.dropped:  # lr=args.lr: the harness's learning rate
            kw["lr"] = default_lr
        return getattr(torch.optim, self.name)(params, **kw)


def _resolve(node: ast.AST, namespace: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _optimizer_class(call: ast.Call, namespace: dict[str, Any]) -> str | None:
    obj = _resolve(call.func, namespace)
    if not isinstance(obj, type):
        return None
    mod = getattr(obj, "__module__", "") or ""
    if not mod.startswith("torch.optim") or obj.__name__ not in PER_PARAM:
        return None
    return obj.__name__


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def read_optimizer(tree: ast.AST, namespace: dict[str, Any]) -> tuple[OptSpec | None, str | None]:
    """(the spec, None), or (None, why none is used; None when the file builds no optimizer)."""
    found: list[OptSpec] = []
    other: list[str] = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        name = _optimizer_class(n, namespace)
        if name is None:
            obj = _resolve(n.func, namespace)
            if isinstance(obj, type) and (getattr(obj, "__module__", "") or "").startswith("torch.optim") \
                    and any(c.__name__ == "Optimizer" for c in obj.__mro__[1:]):
                other.append(f"{obj.__name__} (line {n.lineno})")
            continue
        kw: list[tuple[str, Any]] = []
        dropped: list[str] = []
        if len(n.args) >= 2:  # SGD(params, 0.1): lr is the second positional argument
            ok, v = _literal(n.args[1])
            if ok:
                kw.append(("lr", v))
            else:
                dropped.append("lr")
        if len(n.args) > 2 or any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            return None, f"{name} (line {n.lineno}) is built with arguments the harness cannot read"
        for k in n.keywords:
            if k.arg not in SETTINGS:
                continue
            ok, v = _literal(k.value)
            if ok:
                kw.append((k.arg, v))
            else:
                dropped.append(k.arg)
        found.append(OptSpec(name, tuple(sorted(kw)), n.lineno, tuple(sorted(dropped))))
    if other:
        return None, f"the script builds {', '.join(other)}, which does not update each parameter on its own"
    if not found:
        return None, None
    kinds = {s.key() + (s.dropped,) for s in found}
    if len(kinds) > 1:
        return None, ("the script builds several optimizers ("
                      + ", ".join(f"{s.describe()} (line {s.line})" for s in found) + ")")
    return found[0], None
