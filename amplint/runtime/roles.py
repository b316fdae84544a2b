"""Map a training function's parameters (and a method's ``self`` attributes, and the
module-level names it needs) to the harness objects, by role.

Roles and what the harness passes:

=============  =====================================================================
model          the harness model (``Linear(8,32)-ReLU-Linear(32,1)``; ``Linear(32,4)`` last for
               a classification loss, see :mod:`amplint.runtime.fit`)
optimizer      an ``SGD(lr=0.05, momentum=0.9)``; with several optimizer parameters the
               model's parameters are split between them (first layer, second layer)
optimizers     a list of two such optimizers
scaler         ``torch.amp.GradScaler(device)``
loader         one epoch of harness batches: 50 ``(x, y)`` pairs of 64 samples
batch          one ``(x, y)`` pair per call (the function is called once per batch)
inputs/targets ``x`` / ``y`` of the batch (called once per batch)
loss_fn        the fitted problem's loss: ``mse_loss``, ``cross_entropy`` or
               ``binary_cross_entropy_with_logits``
device         the harness device (``"cpu"``/``"cuda"``; a ``torch.device`` when the
               function reads ``.type``); device_type: the device string
dtype          the autocast dtype (``--dtype``)
amp flag       ``True`` (``use_amp``, ``enabled``; ``fp16``/``bf16`` say whether the dtype is theirs)
accumulation   its default, else 2
epochs         1 (one epoch of the harness batches); steps: the number of batches
index          the batch index (per-batch functions); epoch, rank: 0; world size: 1
clip           its default, else 1.0
scheduler      its default when it has one, else a constant ``LambdaLR`` (factor 1.0)
path           a file or directory in a temporary directory
=============  =====================================================================

A role comes from (in this order) ``--arg NAME=VALUE``, the annotation, what the static model
saw the function do with it (the scaler it scales/steps, the optimizer it steps, a name
iterated by a ``for`` loop, unpacked, called with two arguments, passed to ``autocast``, used
after ``%`` in an accumulation guard), and its name. A parameter with no role keeps its
default; without one the function cannot be verified ("parameter `cfg` has no known role;
pass --arg cfg=...").
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

from amplint.runtime.loader import Loaded, is_simple_expr
from amplint.runtime.static_info import FileInfo, FuncInfo

__all__ = ["Slot", "Plan", "build_plan", "infer_role", "parse_arg_value", "ROLE_NAMES"]

ROLE_NAMES: list[tuple[str, re.Pattern[str]]] = [(r, re.compile(p, re.IGNORECASE)) for r, p in [
    ("scaler", r"^_?(grad_?|amp_?|loss_?)?scaler$"),
    ("optimizers", r"^(optimizers|optimisers|opts|optims)$"),
    ("optimizer", r"^_?(opt|optim|optimizer|optimiser)(_\w+)?$|^\w+_(opt|optim|optimizer|optimiser)$"),
    ("scheduler", r"^(\w+_)?(scheduler|sched)$"),
    ("loader", r"^(\w+_)?(loader|dataloader|dl|batches|batch_list|data_iter|iterator|train_iter|data_loader|iterable)$"),
    ("ambiguous_data", r"^(data|dataset|train_data|samples|train_set)$"),
    ("batch", r"^(batch|minibatch|mini_batch|sample|batch_data|data_batch|micro_batch)$"),
    ("inputs", r"^(x|xb|x_batch|inputs?|images?|imgs?|features|src|input_ids|source)$"),
    ("targets", r"^(y|yb|y_batch|targets?|labels?|tgt|gt|ground_truth)$"),
    ("loss_fn", r"^(loss_fn|loss_func|lossfn|loss_function|criterion|criteria|compute_loss|loss_module|objective|loss_fcn)$"),
    ("model", r"^(model|net|network|module|mdl|ddp_model|classifier|regressor)$|^\w+_model$|^model_\w+$"),
    ("device_type", r"^(device_type|dev_type|autocast_device|amp_device)$"),
    ("device", r"^(device|dev)$"),
    ("dtype", r"^(dtype|amp_dtype|autocast_dtype|half_dtype|mp_dtype|torch_dtype|compute_dtype)$"),
    ("fp16_flag", r"^(fp16|use_fp16|half|use_half)$"),
    ("bf16_flag", r"^(bf16|use_bf16)$"),
    ("amp_flag", r"^(use_amp|amp|enable_amp|amp_enabled|use_mixed_precision|mixed_precision|use_autocast|enabled)$"),
    ("accum", r"^(accum\w*|grad_accum\w*|gradient_accumulation\w*|accumulation\w*|accumulate\w*|n_accum\w*|update_freq|num_micro_batches|iters_to_accumulate)$"),
    ("epochs", r"^(epochs|num_epochs|n_epochs|max_epochs|nepochs|num_epoch|total_epochs)$"),
    ("steps", r"^(steps|num_steps|n_steps|max_steps|total_steps|iters|max_iters|num_iters|n_iters|iterations|num_iterations|steps_per_epoch|max_iterations|num_batches|max_batches)$"),
    ("epoch", r"^(epoch|cur_epoch|current_epoch|epoch_idx|start_epoch)$"),
    ("index", r"^(i|it|idx|step|step_idx|iteration|batch_idx|batch_index|global_step|micro_step|micro_index|batch_i|step_i|itr|start_step)$"),
    ("clip", r"^(clip|max_norm|grad_clip|clip_grad|max_grad_norm|clip_norm|grad_norm_clip|clip_value|gradient_clip_val|clip_grad_norm)$"),
    ("rank", r"^(rank|local_rank|global_rank)$"),
    ("world_size", r"^(world_size|num_replicas|nprocs)$"),
    ("path", r"^(\w+_)?(path|dir|directory|filename|ckpt|checkpoint|folder)$"),
]]

_KEEPS_DEFAULT = {"accum", "clip", "scheduler", "epoch", "rank", "world_size"}


# the harness's optimizer (harness.LR, harness.MOMENTUM), as the mapping names it
HARNESS_SGD = "SGD(lr=0.05, momentum=0.9)"

class Slot:
    """One thing verify sets: a parameter, a ``self`` attribute or a module-level name."""

    def __init__(self, where: str, name: str, role: str | None, source: str, describe: str,
                 value: Callable[[Any], Any] | None, kind: str = "positional") -> None:
        self.where = where  # param | attr | global
        self.name = name
        self.role = role
        self.source = source  # role | default | --arg | init
        self.describe = describe
        self.value = value  # env -> value; None: leave the parameter to its default
        self.kind = kind

    @property
    def label(self) -> str:
        return {"param": self.name, "attr": f"self.{self.name}", "global": f"{self.name} (module-level)"}[self.where]

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "name": self.name, "role": self.role, "source": self.source,
                "value": self.describe}


def parse_arg_value(raw: str, namespace: dict[str, Any] | None = None) -> Any:
    """``--arg`` values: a Python literal, else an expression evaluated in the script's
    namespace (its definitions and imports, plus ``argparse``, ``types`` and ``torch``), else
    the text itself (``--arg mode=train``)."""
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    import argparse
    import types

    env: dict[str, Any] = {"argparse": argparse, "types": types}
    try:
        import torch

        env["torch"] = torch
    except ImportError:  # pragma: no cover - verify needs torch
        pass
    env.update(namespace or {})
    try:
        return eval(compile(raw, "<--arg>", "eval"), env)  # noqa: S307 - the user's own input
    except Exception:
        return raw


# ---------------------------------------------------------------------- inference


def infer_role(name: str, annotation: str | None, tags: set[str]) -> str | None:
    ann = annotation or ""
    if "GradScaler" in ann:
        return "scaler"
    if "Optimizer" in ann:
        return "optimizers" if re.search(r"\b(list|List|Sequence|tuple|Tuple|Iterable)\b", ann) else "optimizer"
    if re.search(r"\bDataLoader\b|\bIterable\b|\bIterator\b", ann):
        return "loader"
    if re.search(r"\bModule\b", ann):
        return "model"
    if re.search(r"\bdevice\b", ann):
        return "device"
    if re.search(r"\bdtype\b", ann):
        return "dtype"
    if "scaler" in tags:
        return "scaler"
    if "optimizer" in tags or "stepped" in tags:
        return "optimizer"
    if tags & {"elem:optimizer", "elem:stepped", "elem:m:zero_grad"}:
        return "optimizers"
    for role, pat in ROLE_NAMES:
        if pat.match(name):
            if role == "ambiguous_data":
                if "iter" in tags:
                    return "loader"
                if tags & {"unpack", "index", "key", "star"}:
                    return "batch"
                return "inputs"
            if role == "scheduler" and "scaler" in tags:
                continue
            return role
    if "iter" in tags:
        return "loader"
    if tags & {"unpack", "index", "star"}:
        return "batch"
    if tags & {"m:parameters", "m:train", "m:eval", "m:named_parameters"}:
        return "model"
    if "autocast_device" in tags or "scaler_device" in tags:
        return "device_type"
    if "device_arg" in tags:
        return "device"
    if "dtype_arg" in tags:
        return "dtype"
    if "accum_guard" in tags:
        return "accum"
    if "clip_arg" in tags:
        return "clip"
    if "call2" in tags:
        return "loss_fn"
    return None


def _default_value(node: ast.expr | None, ns: dict[str, Any]) -> tuple[bool, Any]:
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    try:
        return True, eval(compile(ast.Expression(node), "<default>", "eval"), dict(ns))  # noqa: S307
    except Exception:
        return False, None


class Plan:
    """How to call one training function on the harness objects."""

    def __init__(self, func: FuncInfo, display: str) -> None:
        self.func = func
        self.display = display  # path:qualname
        self.kind = "loop"
        self.slots: list[Slot] = []
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.n_optimizers = 1
        self.namespace: dict[str, Any] = {}
        self.target: Any = None  # function or class
        self.problem: Any = None  # amplint.runtime.fit.Problem the harness's data fits (set by discover)
        self.model_class: Any = None  # the file's one nn.Module subclass, when it has one
        self.model_note: str | None = None  # why the bundled model is used instead of model_class
        self.guards: list[tuple[int, str, str]] = []
        for line, g, kind in func.guards:  # a step and an update under one guard: show it once
            if g not in [t for _, t, _ in self.guards]:
                self.guards.append((line, g, kind))

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def n_scalers(self) -> int:
        return sum(1 for s in self.slots if s.role == "scaler")

    def describe(self) -> list[str]:
        how = ("called once with one epoch of harness batches" if self.kind == "loop"
               else "called once per harness batch")
        lines = [f"{self.display} ({how})"]
        width = max((len(s.label) for s in self.slots), default=0)
        for s in self.slots:
            arrow = "<-" if s.source in ("role", "--arg") else "= "
            arrow = arrow.rstrip()
            why = {"role": "", "default": "  (its default)", "--arg": "  (--arg)", "init": "  (set by __init__)"}[s.source]
            what = s.describe
            if self.problem is not None and self.problem.unknown is None:  # the fitted problem's model/loss
                if self.problem.model_name and what.startswith("the harness model"):
                    what = f"the loop's own {self.problem.model_name}() (seeded, built by the harness)"
                what = what.replace("Linear(32,1)", f"Linear(32,{self.problem.out_dim})")
                if s.role == "loss_fn" and what == "mse_loss":
                    what = self.problem.loss_name
                if self.problem.optimizer is not None:  # the script's optimizer in place of the harness's
                    opt = self.problem.optimizer
                    what = what.replace(HARNESS_SGD, opt.describe()).replace("SGD #", f"{opt.name} #")
            lines.append(f"  {s.label.ljust(width)} {arrow} {what}{why}")
        for line, g, kind in self.guards[:2]:
            what = {"opt_step": "optimizer.step"}.get(kind, f"scaler.{kind}")
            lines.append(f"  guard: {what} (line {line}) runs only when {g}")
        if self.problem is not None and self.problem.unknown is None:
            lines.append(f"  data: {self.problem.describe()}")
            opt = self.problem.optimizer
            if opt is not None:
                left = ("; not literals, left to the harness: "
                        + ", ".join("lr=0.05" if d == "lr" else f"{d} (torch's default)" for d in opt.dropped)) if opt.dropped else ""
                lines.append(f"  optimizer: the script's {opt.describe()} (line {opt.line}; reference and fp32 runs too{left})")
            elif self.problem.optimizer_note:
                lines.append(f"  optimizer: the harness's {HARNESS_SGD}: {self.problem.optimizer_note}")
            if self.problem.model_name:
                lines.append(f"  model: the loop's own {self.problem.model_name} (reference and fp32 runs too)")
            elif self.model_note:
                lines.append(f"  model: the bundled tiny model, not the loop's own: {self.model_note}")
        for n in self.notes:
            lines.append(f"  top level: {n}" if getattr(self, "toplevel", None) is not None else f"  note: {n}")
        return lines

    # -- calling
    def instance(self, env: Any) -> Any:
        cache = env.cache
        key = id(self)
        if key not in cache:
            cls = self.target
            try:
                inst = cls.__new__(cls)
            except TypeError:
                inst = object.__new__(cls)
            for s in self.slots:
                if s.where == "attr" and s.value is not None:
                    setattr(inst, s.name, s.value(env))
            cache[key] = inst
        return cache[key]

    def __call__(self, env: Any, batch: Any = None, index: int | None = None) -> Any:
        env.current_batch, env.current_index = batch, index
        ns = self.namespace
        saved: dict[str, Any] = {}
        missing = object()
        for s in self.slots:
            if s.where == "global" and s.value is not None:
                saved[s.name] = ns.get(s.name, missing)
                ns[s.name] = s.value(env)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        gap = False
        for s in self.slots:
            if s.where != "param":
                continue
            if s.value is None:
                gap = True
                continue
            v = s.value(env)
            if s.kind == "positional" and not gap:
                args.append(v)
            else:
                kwargs[s.name] = v
        try:
            if self.func.cls:
                fn = getattr(self.instance(env), self.func.name)
            else:
                fn = self.target
            return fn(*args, **kwargs)
        finally:
            for k, v in saved.items():
                if v is missing:
                    ns.pop(k, None)
                else:
                    ns[k] = v


# ---------------------------------------------------------------------- values


def _role_value(role: str, name: str, tags: set[str], opt_index: int, default: tuple[bool, Any],
                env_dtype_name: str) -> tuple[str, Callable[[Any], Any] | None] | None:
    """(description, env -> value) for a role; None value keeps the default."""
    has_default, dval = default
    if role in _KEEPS_DEFAULT and has_default:
        return f"{dval!r}", None
    if role == "model":
        return "the harness model: Linear(8,32)-ReLU-Linear(32,1)", lambda env: env.model
    if role == "optimizer":
        return (f"{HARNESS_SGD} #{opt_index + 1}",
                lambda env, i=opt_index: env.optimizers[min(i, len(env.optimizers) - 1)])
    if role == "optimizers":
        return "[SGD #1 (first layer), SGD #2 (second layer)]", lambda env: list(env.optimizers)
    if role == "scaler":
        return "torch.amp.GradScaler(device)", lambda env: env.scaler
    if role == "loader":
        return "one epoch of harness batches: (x, y) pairs of 64 samples", lambda env: env.batches
    if role == "batch":
        return "one harness batch (x, y) per call", lambda env: env.current_batch
    if role == "inputs":
        return "x of the harness batch", lambda env: env.current_batch[0]
    if role == "targets":
        return "y of the harness batch", lambda env: env.current_batch[1]
    if role == "loss_fn":
        return "mse_loss", lambda env: env.loss_fn
    if role == "device":
        if "a:type" in tags:
            return "torch.device(harness device)", lambda env: __import__("torch").device(env.device)
        return "the harness device", lambda env: env.device
    if role == "device_type":
        return "the harness device", lambda env: env.device
    if role == "dtype":
        return "the autocast dtype (--dtype)", lambda env: env.dtype
    if role == "amp_flag":
        return "True", lambda env: True
    if role == "fp16_flag":
        return f"{env_dtype_name == 'float16'}", lambda env: str(env.dtype) == "torch.float16"
    if role == "bf16_flag":
        return f"{env_dtype_name == 'bfloat16'}", lambda env: str(env.dtype) == "torch.bfloat16"
    if role == "accum":
        return "2", lambda env: 2
    if role == "epochs":
        return "1 (one epoch)", lambda env: 1
    if role == "steps":
        return "the number of harness batches (one epoch)", lambda env: len(env.batches)
    if role == "epoch":
        return "0", lambda env: 0
    if role == "index":
        return "the batch index", lambda env: env.current_index if env.current_index is not None else 0
    if role == "clip":
        return "1.0", lambda env: 1.0
    if role == "rank":
        return "0", lambda env: 0
    if role == "world_size":
        return "1", lambda env: 1
    if role == "scheduler":
        return "LambdaLR(optimizer, lambda _: 1.0) (lr unchanged)", lambda env: env.constant_scheduler()
    if role == "path":
        is_dir = bool(re.search(r"dir|directory|folder", name, re.IGNORECASE))
        return ("a temporary directory" if is_dir else "a file in a temporary directory"), (
            lambda env, d=is_dir, n=name: env.temp_path(n, d))
    return None


# ---------------------------------------------------------------------- building


def _attrs_used(info: FileInfo, func: FuncInfo) -> tuple[list[str], dict[str, set[str]]]:
    """``self`` attributes read by a method and the methods of its class it calls."""
    names: list[str] = []
    tags: dict[str, set[str]] = {}
    for f in info.callees_closure(func.qualname):
        if f.cls != func.cls:
            continue
        for a in sorted(f.attrs_read):
            if a not in names:
                names.append(a)
        for k, v in f.uses.items():
            if k.startswith("self."):
                tags.setdefault(k[5:], set()).update(v)
    return names, tags


def _globals_used(info: FileInfo, func: FuncInfo) -> tuple[list[str], dict[str, set[str]]]:
    names: list[str] = []
    tags: dict[str, set[str]] = {}
    for f in info.callees_closure(func.qualname):
        for g in sorted(f.globals_read):
            if g not in names:
                names.append(g)
            tags.setdefault(g, set()).update(f.uses.get(g, ()))
    return names, tags


def build_plan(info: FileInfo, func: FuncInfo, loaded: Loaded, display: str,
               overrides: dict[str, str] | None = None, dtype_name: str = "float16") -> Plan:
    """The role mapping for ``func`` (problems, if any, say why it cannot be called)."""
    overrides = dict(overrides or {})
    plan = Plan(func, display)
    ns = loaded.namespace
    plan.namespace = ns
    used_overrides: set[str] = set()
    opt_count = 0

    def from_override(key: str, *alts: str) -> tuple[bool, Any]:
        for k in (key, *alts):
            if k in overrides:
                used_overrides.add(k)
                return True, parse_arg_value(overrides[k], ns)
        return False, None

    def add(where: str, name: str, role: str | None, tags: set[str], default: tuple[bool, Any],
            kind: str = "positional") -> bool:
        nonlocal opt_count
        if role in ("optimizer",):
            idx = opt_count
            opt_count += 1
        else:
            idx = 0
        rv = _role_value(role, name, tags, idx, default, dtype_name) if role else None
        if rv is None:
            return False
        describe, value = rv
        if value is None:
            plan.slots.append(Slot(where, name, role, "default", describe, None, kind))
        else:
            plan.slots.append(Slot(where, name, role, "role", describe, value, kind))
        return True

    # the target object
    if func.cls:
        cls_name = func.cls.split(".")[-1]
        plan.target = ns.get(cls_name)
        if plan.target is None:
            plan.problems.append(f"class {func.cls} is not defined after loading the definitions")
            return plan
        try:
            import torch

            if isinstance(plan.target, type) and issubclass(plan.target, torch.nn.Module):
                plan.problems.append(f"{func.cls} is a torch.nn.Module: verify trains its own harness model, "
                                     f"so it cannot stand in for this class's model")
                return plan
        except ImportError:  # pragma: no cover - verify needs torch anyway
            pass
        if func.is_static or func.is_classmethod:
            plan.problems.append(f"{func.qualname} is a static/class method (verify calls instance methods)")
            return plan
    else:
        plan.target = ns.get(func.name)
        if plan.target is None:
            plan.problems.append(f"{func.qualname} is not defined after loading the definitions")
            return plan

    # parameters
    for p in func.call_params:
        if p.kind in ("varargs", "varkw"):
            continue
        tags = func.uses.get(p.name, set())
        found, val = from_override(p.name)
        if found:
            plan.slots.append(Slot("param", p.name, None, "--arg", repr(val), lambda env, v=val: v, p.kind))
            continue
        role = infer_role(p.name, p.annotation, tags)
        default = _default_value(p.default, ns)
        if role and add("param", p.name, role, tags, default, p.kind):
            continue
        if p.has_default:
            plan.slots.append(Slot("param", p.name, None, "default",
                                   ast.unparse(p.default) if p.default is not None else "", None, p.kind))
            continue
        plan.problems.append(f"parameter `{p.name}` has no known role; pass --arg {p.name}=...")

    # self attributes
    if func.cls:
        cd = info.classes.get(func.cls)
        cls_obj = plan.target
        attrs, atags = _attrs_used(info, func)
        for a in attrs:
            if cd is not None and (a in cd.methods or a in cd.class_attrs):
                continue
            if hasattr(cls_obj, a):  # inherited methods, properties, class attributes
                continue
            tags = atags.get(a, set())
            found, val = from_override(f"self.{a}", a)
            if found:
                plan.slots.append(Slot("attr", a, None, "--arg", repr(val), lambda env, v=val: v))
                continue
            role = infer_role(a, None, tags)
            init_val = _init_value(cd, a, ns) if cd is not None else (False, None)
            if role and role in _KEEPS_DEFAULT and init_val[0]:
                v = init_val[1]
                plan.slots.append(Slot("attr", a, role, "init", repr(v), lambda env, v=v: _fresh(v)))
                continue
            if role and add("attr", a, role, tags, (False, None)):
                continue
            if init_val[0]:
                v = init_val[1]
                plan.slots.append(Slot("attr", a, role, "init", repr(v), lambda env, v=v: _fresh(v)))
                continue
            plan.problems.append(f"attribute `self.{a}` has no known role; pass --arg self.{a}=...")

    # module-level names that only a skipped statement defines
    gnames, gtags = _globals_used(info, func)
    for g in gnames:
        if g in ns:
            continue
        sk = loaded.skipped_defs.get(g)
        failed = loaded.failed.get(g)
        if sk is None and failed is None:
            continue  # defined nowhere at the top level: Python will say so if it runs
        found, val = from_override(g)
        if found:
            plan.slots.append(Slot("global", g, None, "--arg", repr(val), lambda env, v=val: v))
            continue
        tags = gtags.get(g, set())
        role = infer_role(g, None, tags)
        if role and role not in ("index", "path", "rank", "world_size", "epoch") and add(
                "global", g, role, tags, (False, None)):
            continue
        if sk is not None:
            plan.problems.append(
                f"it uses `{g}`, which only line {sk.line} defines (`{sk.text}`, {sk.why}); verify runs "
                f"no top-level statement of that kind: pass --arg {g}=... or make it a parameter")
        else:
            plan.problems.append(f"it uses `{g}`, whose top-level assignment failed: {failed}; pass --arg {g}=...")

    roles = [s.role for s in plan.slots]
    if roles.count("model") > 1:
        names = ", ".join(s.label for s in plan.slots if s.role == "model")
        plan.problems.append(f"several things take a model ({names}); verify runs one harness model")
    if roles.count("scaler") > 1:
        names = ", ".join(s.label for s in plan.slots if s.role == "scaler")
        plan.problems.append(f"several GradScaler slots ({names}); verify passes one GradScaler")
    if "loader" in roles:
        plan.kind = "loop"
    elif {"batch", "inputs", "targets"} & set(roles):
        plan.kind = "step"
    elif not plan.problems:
        plan.problems.append("nothing takes the training batches (a loader/iterable of (x, y), or one batch)")
    if plan.kind == "loop":  # a loop keeps its own start index (step=0, global_step=0)
        for s in plan.slots:
            if s.role == "index" and s.where == "param":
                p = next(p for p in func.call_params if p.name == s.name)
                if p.has_default:
                    s.source, s.value, s.describe = "default", None, ast.unparse(p.default)
                else:
                    s.describe = "0"
    n_opt = roles.count("optimizer")
    plan.n_optimizers = 2 if "optimizers" in roles else max(1, min(n_opt, 4))
    plan.unused_overrides = sorted(set(overrides) - used_overrides)  # type: ignore[attr-defined]
    return plan


def _fresh(v: Any) -> Any:
    """A new copy of a mutable literal (each run gets its own list/dict)."""
    if isinstance(v, (list, dict, set)):
        return type(v)(v)
    return v


def _init_value(cd: Any, attr: str, ns: dict[str, Any]) -> tuple[bool, Any]:
    """The value ``__init__`` gives ``self.<attr>`` when it is a constant, a parameter with a
    default, or a simple expression of those."""
    node = cd.init_assigns.get(attr)
    if node is None:
        return False, None
    if isinstance(node, ast.Name) and node.id in cd.init_params:
        p = cd.init_params[node.id]
        return _default_value(p.default, ns) if p.default is not None else (False, None)
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if not is_simple_expr(node):
        return False, None
    env = dict(ns)
    for name, p in cd.init_params.items():
        ok, v = _default_value(p.default, ns)
        if ok:
            env[name] = v
    try:
        return True, eval(compile(ast.Expression(node), "<__init__>", "eval"), env)  # noqa: S307
    except Exception:
        return False, None
