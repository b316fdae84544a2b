"""Framework facts: where a file hands AMP to accelerate, Lightning, the HF Trainer or
DeepSpeed, which precision it asks for, and the ordered framework calls of every function.

``facts(model)`` computes them once per ``FileModel`` (cached on the model) for the AMP4xx
rules. The precision of each framework object is a fact with a provenance:

* ``literal``: ``Accelerator(mixed_precision="fp16")``, ``Trainer(precision="16-mixed")``,
  ``TrainingArguments(fp16=True)``, a DeepSpeed config dict literal ``{"fp16": {"enabled": True}}``;
* ``config``: a name, subscript or ``.get`` read whose key is set to a literal in a dict
  literal of the same file;
* ``cli-default``: ``args.mixed_precision`` where ``add_argument("--mixed_precision",
  default="fp16")`` is in the same file;
* ``param-default``: a parameter of the enclosing function whose default is the literal
  (``def __init__(self, mixed_precision_type="fp16")``);
* ``branch``: one arm of ``"fp16" if args.fp16 else "no"``, a flag passed as ``fp16=args.fp16``,
  or an otherwise unknown setting in a file whose code branches on fp16 explicitly
  (``if accelerator.mixed_precision == "fp16":``, ``if training_args.fp16:``);
* ``unknown``: anything else (``Accelerator()`` configured by ``accelerate launch``, a YAML
  file, ``HfArgumentParser``). Rules stay silent on unknown.

Why not read FileModel's events: the loop model walks only functions holding a torch AMP
token (``scaler``, ``autocast``, ``amp``), and the parser masks the other top-level
definitions of long files; framework code usually holds none of these tokens
(``accelerator.backward(loss)`` is the whole AMP protocol). This module therefore parses the
file's full text itself, once, and only when the text names a framework. It imports nothing
from the rules and never changes the FileModel.
"""

from __future__ import annotations

import ast
import bisect
import re
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms of start-up
    from typing import Iterator

from amplint.lazyre import lazy
from amplint.model.names import CLIP_FUNCS, SCALER_CTORS, add_import, dotted, qualify
from amplint.tokens import match_rows

FP16 = "fp16"
BF16 = "bf16"
NO = "no"
UNKNOWN = "unknown"

ACCELERATOR_CTORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
LIGHTNING_TRAINERS = frozenset(
    {
        "lightning.Trainer", "lightning.pytorch.Trainer", "lightning.pytorch.trainer.Trainer",
        "lightning.pytorch.trainer.trainer.Trainer", "pytorch_lightning.Trainer",
        "pytorch_lightning.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer",
    }
)
LIGHTNING_MODULES = frozenset(
    {
        "lightning.LightningModule", "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
        "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.lightning.LightningModule", "pytorch_lightning.core.module.LightningModule",
    }
)
HF_ARGS = frozenset(
    {
        "transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args.TrainingArguments", "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)
HF_TRAINERS = frozenset(
    {"transformers.Trainer", "transformers.Seq2SeqTrainer", "transformers.trainer.Trainer", "transformers.trainer_seq2seq.Seq2SeqTrainer"}
)
DEEPSPEED_INIT = frozenset({"deepspeed.initialize"})
HALF_DTYPES = frozenset({"torch.float16", "torch.half"})
FP32_DTYPES = frozenset({"torch.float32", "torch.float"})

# The file must name one of these for any framework fact to exist (cheap byte test first).
_TOKENS = ("ccelerat", "lightning", "TrainingArguments", "deepspeed", "manual_backward")
# every rule here needs an fp16 setting the file shows (unknown is silent): no such token, no facts
_FP16_TOKENS = ("fp16", "float16", "16-mixed", "16_mixed", "half", "precision=16", "precision = 16", "'16'", '"16"', "16-true")
ACCEL_NAME = lazy(r"(?:^|_)accel(?:erator)?s?$|^acc$", re.IGNORECASE)

_ACCEL_VOCAB = {"fp16": FP16, "bf16": BF16, "no": NO, "fp8": NO}
_LIGHTNING_VOCAB = {
    "16-mixed": FP16, "16": FP16, 16: FP16, "bf16-mixed": BF16, "bf16": BF16, "32": NO, 32: NO,
    "32-true": NO, "64": NO, 64: NO, "64-true": NO, "16-true": NO, "bf16-true": NO, "transformer-engine": NO,
}


class Setting:
    """One framework object's precision. ``framework``: accelerate | lightning | hf | deepspeed;
    ``precision``: fp16 | bf16 | no | unknown; ``how``: literal | config | cli-default |
    param-default | branch | unknown."""

    def __init__(self, framework, node, target, precision, how, cls=None):
        self.framework = framework
        self.node = node  # the constructor / initialize call
        self.target = target  # the text it is assigned to ("accelerator", "self.accelerator") or None
        self.precision = precision
        self.how = how
        self.cls = cls  # ClassDef holding a ``self.x = ...`` construction
        self.accumulation = True  # accelerate: gradient accumulation may be > 1

    @property
    def fp16(self) -> bool:
        return self.precision == FP16

    def describe(self) -> str:
        arg, val = {
            "accelerate": ("mixed_precision", '"fp16"'), "lightning": ("precision", "16-mixed"),
            "hf": ("fp16", "True"), "deepspeed": ("fp16.enabled", "True"),
        }[self.framework]
        if self.how == "literal":
            return f"`{arg}` is {val} here"
        if self.how == "config":
            return f"`{arg}` is {val} in a config dict of this file"
        if self.how == "cli-default":
            return f"the command-line default of `{arg}` is {val}"
        if self.how == "param-default":
            return f"`{arg}` is {val} by a parameter default"
        return f"this file has an explicit fp16 branch for `{arg}`"


class Site:
    """A call, in evaluation order, with its context: enclosing ``if`` arms (``(If node,
    True/False)``), ``with`` items (context expressions) and loops."""

    def __init__(self, node, stmt, seq, fn, ifs, withs, loops):
        self.node = node
        self.stmt = stmt
        self.seq = seq
        self.fn = fn
        self.ifs = ifs
        self.withs = withs
        self.loops = loops

    @property
    def attr(self) -> str | None:
        f = self.node.func
        return f.attr if isinstance(f, ast.Attribute) else None

    @property
    def receiver(self) -> ast.expr | None:
        f = self.node.func
        return f.value if isinstance(f, ast.Attribute) else None

    def exclusive_with(self, other: "Site") -> bool:
        """Do the two sit in different arms of one ``if``?"""
        mine = dict((id(n), arm) for n, arm in self.ifs)
        return any(id(n) in mine and mine[id(n)] != arm for n, arm in other.ifs)


class Fn:
    """A function or method (or the module body)."""

    def __init__(self, node, cls, self_name):
        self.node = node
        self.cls = cls
        self.self_name = self_name
        self.sites: list[Site] = []
        self.assigns: list[tuple[ast.stmt, ast.expr, int]] = []  # (stmt, value, seq) for Assign/AnnAssign
        self.grad_names: set[str] | None = None  # locals assigned from `.grad` reads (norm_of_grads), made once

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<module>")


class Facts:
    def __init__(self, model, tree):
        self.model = model
        self.tree = tree
        self.scope: dict[str, str] = {}
        self.fns: list[Fn] = []
        self.settings: list[Setting] = []
        self.classes: dict[str, ast.ClassDef] = {}
        self._seq = 0
        self._defaults: dict[str, ast.expr | None] | None = None
        self._dict_values: dict[str, list[ast.expr]] | None = None
        self._fp16_branch: dict[str, bool] = {}
        self._buckets: dict[type, list] | None = None

    # ------------------------------------------------------------------ names
    def qual(self, node: ast.AST) -> str | None:
        return qualify(node, [self.scope])

    def callee(self, call: ast.Call) -> str | None:
        return self.qual(call.func)

    def text(self, node: ast.AST) -> str:
        return self.model.text(node)

    def is_clip(self, call: ast.Call) -> bool:
        return (self.callee(call) or "") in CLIP_FUNCS

    def is_scaler_ctor(self, call: ast.Call) -> bool:
        return (self.callee(call) or "") in SCALER_CTORS

    # ------------------------------------------------------------------ settings
    def accelerator_setting(self, fn: Fn, receiver: ast.expr | None) -> Setting | None:
        """The Accelerator ``receiver`` denotes: the construction assigned to the same text
        (``self.accelerator`` in the same class), else the file's only Accelerator when the
        receiver is named like one."""
        if receiver is None:
            return None
        text = self.text(receiver)
        accs = [s for s in self.settings if s.framework == "accelerate"]
        same = [s for s in accs if s.target == text and (not text.startswith("self.") or s.cls is fn.cls)]
        if same:
            return _merge(same)
        parts = dotted(receiver)
        if parts is None or not ACCEL_NAME.search(parts[-1]):
            return None
        if len(accs) == 1 or (accs and len({(s.precision, s.how) for s in accs}) == 1):
            return accs[0]
        return None

    def lightning_setting(self) -> Setting | None:
        pl = [s for s in self.settings if s.framework == "lightning"]
        return _merge(pl) if pl else None

    def hf_setting(self, args_expr: ast.expr | None = None) -> Setting | None:
        hf = [s for s in self.settings if s.framework == "hf"]
        if args_expr is not None:
            text = self.text(args_expr)
            named = [s for s in hf if s.target == text]
            if named:
                return _merge(named)
        return _merge(hf) if hf else None

    def deepspeed_setting(self, receiver: ast.expr | None) -> Setting | None:
        if receiver is None:
            return None
        text = self.text(receiver)
        same = [s for s in self.settings if s.framework == "deepspeed" and s.target == text]
        return _merge(same) if same else None

    # ------------------------------------------------------------------ queries
    def sites(self, fn: Fn, attr: str | None = None) -> Iterator[Site]:
        for s in fn.sites:
            if attr is None or s.attr == attr:
                yield s

    def lightning_classes(self) -> list[ast.ClassDef]:
        out = []
        for c in self.classes.values():
            for b in c.bases:
                q = self.qual(b) or ""
                if q in LIGHTNING_MODULES or q.endswith("LightningModule"):
                    out.append(c)
                    break
        return out

    def trainer_subclasses(self) -> list[ast.ClassDef]:
        out = []
        for c in self.classes.values():
            for b in c.bases:
                q = self.qual(b) or ""
                if q in HF_TRAINERS or q.startswith("trl.") and q.endswith("Trainer"):
                    out.append(c)
                    break
        return out

    def methods_of(self, cls: ast.ClassDef) -> list[Fn]:
        return [f for f in self.fns if f.cls is cls]

    def manual_optimization(self, cls: ast.ClassDef) -> bool:
        """``self.automatic_optimization = False`` in a method, or the property overridden
        to return False."""
        for n in ast.walk(cls):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is False:
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and t.attr == "automatic_optimization":
                        return True
            if isinstance(n, ast.FunctionDef) and n.name == "automatic_optimization":
                for r in ast.walk(n):
                    if isinstance(r, ast.Return) and isinstance(r.value, ast.Constant) and r.value.value is False:
                        return True
        return False

    def scaler_names(self) -> set[str]:
        """Texts assigned a torch GradScaler construction anywhere in the file (``scaler``,
        ``self.scaler``)."""
        out = set()
        for fn in self.fns:
            for stmt, value, _seq in fn.assigns:
                if isinstance(value, ast.Call) and self.is_scaler_ctor(value):
                    for t in _targets(stmt):
                        out.add(self.text(t))
        return out

    def scaled_expr(self, expr: ast.expr, fn: Fn, before_seq: int, scalers: set[str]) -> ast.Call | None:
        """``scaler.scale(loss)`` inside ``expr``, or a name assigned one earlier in ``fn``."""
        for n in ast.walk(expr):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "scale":
                if self.text(n.func.value) in scalers:
                    return n
        if isinstance(expr, ast.Name):
            prior = [
                (stmt, v) for stmt, v, seq in fn.assigns
                if seq < before_seq and any(isinstance(t, ast.Name) and t.id == expr.id for t in _targets(stmt))
            ]
            if prior:
                v = prior[-1][1]
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "scale":
                    if self.text(v.func.value) in scalers:
                        return v
        return None

    # ------------------------------------------------------------------ precision values
    def resolve(self, value: ast.expr | None, vocab: dict, fn: Fn | None, depth: int = 0) -> tuple[str, str]:
        """(precision, how) of an expression, through names, dict literals and CLI defaults."""
        if value is None or depth > 4:
            return UNKNOWN, "unknown"
        if isinstance(value, ast.Constant):
            v = value.value
            if isinstance(v, str):
                v = v.strip().lower()
            if v in vocab:
                return vocab[v], "literal"
            return UNKNOWN, "unknown"
        if isinstance(value, ast.IfExp):
            a = self.resolve(value.body, vocab, fn, depth + 1)[0]
            b = self.resolve(value.orelse, vocab, fn, depth + 1)[0]
            if a == b:
                return a, "literal" if a != UNKNOWN else "unknown"
            if FP16 in (a, b):
                return FP16, "branch"
            return UNKNOWN, "unknown"
        if isinstance(value, ast.Name) and fn is not None:
            # every assignment of the name in the function (else the module): one value, or
            # fp16 as one of several (an explicit branch), else unknown
            for pool in (fn.assigns, self.fns[0].assigns if fn is not self.fns[0] else []):
                vals = [v for stmt, v, _seq in pool if any(isinstance(t, ast.Name) and t.id == value.id for t in _targets(stmt))]
                if not vals:
                    continue
                res = [self.resolve(v, vocab, fn, depth + 1) for v in vals]
                precs = {p for p, _h in res}
                if len(precs) == 1:
                    return res[0]
                if FP16 in precs:
                    return FP16, "branch"
                return UNKNOWN, "unknown"
            default = _param_default(fn.node, value.id)
            if default is not None:
                prec, how = self.resolve(default, vocab, None, depth + 1)
                return (prec, "param-default") if how == "literal" else (prec, how)
        key = _key_of(value)
        if key is not None:
            defaults = self.cli_defaults()
            if isinstance(value, ast.Attribute) and key in defaults:
                d = defaults[key]
                prec, how = self.resolve(d, vocab, None, depth + 1) if d is not None else (UNKNOWN, "unknown")
                return (prec, "cli-default") if how == "literal" else (prec, how)
            vals = self.dict_values().get(key, [])
            if vals and not isinstance(value, ast.Name):
                res = {self.resolve(v, vocab, None, depth + 1)[0] for v in vals}
                if len(res) == 1 and UNKNOWN not in res:
                    return res.pop(), "config"
        return UNKNOWN, "unknown"

    def nodes(self, *types) -> Iterator[ast.AST]:
        """The file's nodes of these types (one walk of the tree, shared)."""
        if self._buckets is None:
            b: dict[type, list] = {ast.Call: [], ast.Dict: [], ast.Compare: [], ast.If: [], ast.IfExp: []}
            for n in ast.walk(self.tree):
                lst = b.get(type(n))
                if lst is not None:
                    lst.append(n)
            self._buckets = b
        for t in types:
            yield from self._buckets[t]

    def cli_defaults(self) -> dict[str, ast.expr | None]:
        """``add_argument("--mixed_precision", default=...)``: dest -> default (None: no default)."""
        if self._defaults is None:
            out: dict[str, ast.expr | None] = {}
            for n in self.nodes(ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
                    flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                    dest = next((kw.value.value for kw in n.keywords if kw.arg == "dest" and isinstance(kw.value, ast.Constant)), None)
                    long = [f for f in flags if f.startswith("--")] or flags
                    if not long and dest is None:
                        continue
                    name = dest or long[0].lstrip("-").replace("-", "_")
                    default = next((kw.value for kw in n.keywords if kw.arg == "default"), None)
                    action = next((kw.value.value for kw in n.keywords if kw.arg == "action" and isinstance(kw.value, ast.Constant)), None)
                    if default is None and action == "store_true":
                        default = ast.Constant(False)
                    out[name] = default
            self._defaults = out
        return self._defaults

    def dict_values(self) -> dict[str, list[ast.expr]]:
        """Every literal value a dict literal or ``dict(...)`` call of the file gives a key."""
        if self._dict_values is None:
            out: dict[str, list[ast.expr]] = {}
            for n in self.nodes(ast.Dict, ast.Call):
                if isinstance(n, ast.Dict):
                    for k, v in zip(n.keys, n.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            out.setdefault(k.value, []).append(v)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict":
                    for kw in n.keywords:
                        if kw.arg:
                            out.setdefault(kw.arg, []).append(kw.value)
            self._dict_values = out
        return self._dict_values

    def fp16_branch(self, framework: str) -> bool:
        """Does the file branch on fp16 explicitly (``accelerator.mixed_precision == "fp16"``,
        ``if args.fp16:``, ``trainer.precision == "16-mixed"``, a ``--mixed_precision``
        option whose ``choices`` list ``"fp16"``)?"""
        if framework in self._fp16_branch:
            return self._fp16_branch[framework]
        found = False
        if framework == "accelerate":  # `--mixed_precision` offers fp16: the user may pick it
            found = any(_offers_fp16(n) for n in self.nodes(ast.Call))
        for n in () if found else self.nodes(ast.Compare, ast.If, ast.IfExp):
            if framework == "accelerate" and isinstance(n, ast.Compare):
                names = {_last(x) for x in [n.left, *n.comparators]}
                consts = {x.value for x in [n.left, *n.comparators] if isinstance(x, ast.Constant)}
                if "mixed_precision" in names and "fp16" in consts:
                    found = True
                    break
            elif framework == "lightning" and isinstance(n, ast.Compare):
                names = {_last(x) for x in [n.left, *n.comparators]}
                consts = {x.value for x in [n.left, *n.comparators] if isinstance(x, ast.Constant)}
                if "precision" in names and consts & {"16-mixed", "16", 16}:
                    found = True
                    break
            elif framework == "hf" and isinstance(n, (ast.If, ast.IfExp)):
                t = n.test
                for x in ast.walk(t):
                    if isinstance(x, ast.Attribute) and x.attr == "fp16":
                        found = True
                if found:
                    break
        self._fp16_branch[framework] = found
        return found

    # ------------------------------------------------------------------ construction
    def _setting_for(self, site: Site) -> Setting | None:
        call = site.node
        q = self.callee(call)
        if q is None:
            return None
        target = _assigned_to(site.stmt, call)
        tgt_text = self.text(target) if target is not None else None
        cls = site.fn.cls if tgt_text and tgt_text.startswith("self.") else None
        kw = {k.arg: k.value for k in call.keywords}
        splat = [k.value for k in call.keywords if k.arg is None]
        if q in ACCELERATOR_CTORS:
            value = kw.get("mixed_precision")
            if value is None:
                value = self._from_splat(splat, site.fn, "mixed_precision")
            prec, how = self.resolve(value, _ACCEL_VOCAB, site.fn) if value is not None else (UNKNOWN, "unknown")
            s = Setting("accelerate", call, tgt_text, prec, how, cls)
            ga = kw.get("gradient_accumulation_steps")
            if ga is None:
                ga = self._from_splat(splat, site.fn, "gradient_accumulation_steps")
            s.accumulation = not (
                (ga is None and "gradient_accumulation_plugin" not in kw and not splat)
                or (isinstance(ga, ast.Constant) and ga.value == 1)
            )
            return s
        if q in LIGHTNING_TRAINERS:
            value = kw.get("precision")
            if value is None:
                value = self._from_splat(splat, site.fn, "precision")
            prec, how = self.resolve(value, _LIGHTNING_VOCAB, site.fn) if value is not None else (UNKNOWN, "unknown")
            if value is None and not splat:
                prec, how = NO, "literal"  # Lightning's default is 32-true
            return Setting("lightning", call, tgt_text, prec, how, cls)
        if q in HF_ARGS:
            fp16 = kw.get("fp16")
            bf16 = kw.get("bf16")
            if fp16 is not None:
                if isinstance(fp16, ast.Constant):
                    prec, how = (FP16 if fp16.value else NO), "literal"
                else:
                    res = self.resolve(fp16, {True: FP16, False: NO}, site.fn)
                    prec, how = (FP16, "branch") if res[0] != FP16 else res
            elif bf16 is not None and isinstance(bf16, ast.Constant) and bf16.value:
                prec, how = BF16, "literal"
            elif splat:
                prec, how = UNKNOWN, "unknown"
            else:
                prec, how = NO, "literal"
            return Setting("hf", call, tgt_text, prec, how, cls)
        if q in DEEPSPEED_INIT:
            cfg = kw.get("config") or kw.get("config_params")
            prec, how = self._deepspeed_precision(cfg, site.fn)
            engine = None
            if isinstance(target, ast.Tuple) and target.elts:
                engine = self.text(target.elts[0])
            elif target is not None:
                engine = tgt_text
            return Setting("deepspeed", call, engine, prec, how, cls)
        return None

    def _from_splat(self, splat: list[ast.expr], fn: Fn, key: str) -> ast.expr | None:
        for s in splat:
            if isinstance(s, ast.Name):
                for stmt, v, _seq in reversed(fn.assigns):
                    if any(isinstance(t, ast.Name) and t.id == s.id for t in _targets(stmt)):
                        if isinstance(v, ast.Dict):
                            for k, val in zip(v.keys, v.values):
                                if isinstance(k, ast.Constant) and k.value == key:
                                    return val
                        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict":
                            for k in v.keywords:
                                if k.arg == key:
                                    return k.value
                        break
        return None

    def _deepspeed_precision(self, cfg: ast.expr | None, fn: Fn) -> tuple[str, str]:
        d = cfg
        if isinstance(cfg, ast.Name):
            d = None
            for stmt, v, _seq in reversed(fn.assigns + self.fns[0].assigns):
                if any(isinstance(t, ast.Name) and t.id == cfg.id for t in _targets(stmt)):
                    d = v
                    break
        if not isinstance(d, ast.Dict):
            return UNKNOWN, "unknown"
        for k, v in zip(d.keys, d.values):
            if isinstance(k, ast.Constant) and k.value in ("fp16", "bf16") and isinstance(v, ast.Dict):
                for k2, v2 in zip(v.keys, v.values):
                    if isinstance(k2, ast.Constant) and k2.value == "enabled":
                        if isinstance(v2, ast.Constant) and v2.value is True:
                            return (FP16 if k.value == "fp16" else BF16), "literal"
                        if isinstance(v2, ast.Constant) and v2.value == "auto" and k.value == "fp16":
                            return FP16, "branch"
        return NO, "literal"


def _merge(settings: list[Setting]) -> Setting:
    """Several constructions for one object: fp16 if any can be fp16 (the most specific)."""
    for how in ("literal", "config", "cli-default", "param-default", "branch"):
        for s in settings:
            if s.fp16 and s.how == how:
                return s
    return settings[0]


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        out = []
        for t in stmt.targets:
            out.extend(t.elts if isinstance(t, ast.Tuple) else [t])
        return out
    if isinstance(stmt, ast.AnnAssign):
        return [stmt.target]
    return []


def _assigned_to(stmt: ast.stmt, call: ast.Call) -> ast.expr | None:
    if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is call:
        return stmt.target
    return None


def _param_default(node: ast.AST, name: str) -> ast.expr | None:
    """The default value of parameter ``name`` of a function definition."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = node.args
    pos = [*a.posonlyargs, *a.args]
    for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
        if arg.arg == name:
            return d
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if arg.arg == name and d is not None:
            return d
    return None


def _last(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _key_of(value: ast.expr) -> str | None:
    """The config key an expression reads: ``args.x`` / ``cfg["x"]`` / ``cfg.get("x")`` -> "x"."""
    if isinstance(value, ast.Attribute):
        return value.attr
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, str):
        return value.slice.value
    if (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get"
        and value.args and isinstance(value.args[0], ast.Constant) and isinstance(value.args[0].value, str)
    ):
        return value.args[0].value
    if isinstance(value, ast.Name):
        return value.id
    return None


# ---------------------------------------------------------------------------- the walk
# A function is walked only when its lines hold one of these (every site, assignment or
# setting a rule reads is spelled with one); other functions (model code) are skipped.
_RELEVANT = lazy(
    r"backward|clip_grad|unscale|accumulate|ccelerat|Trainer|TrainingArguments|deepspeed|\.prepare\(|\.fit\("
    r"|\.half\(|float16|fp16|from_pretrained|sync_gradients|add_argument|precision|automatic_optimization"
    r"|GradScaler|\.scale\(|weight_dtype"
)


class _Walk:
    def __init__(self, facts: Facts, source: str):
        self.f = facts
        self.rows = match_rows(source, _RELEVANT)

    def relevant(self, node) -> bool:
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        end = getattr(node, "end_lineno", None) or start
        i = bisect.bisect_left(self.rows, start)
        return i < len(self.rows) and self.rows[i] <= end

    def module(self, tree: ast.Module) -> None:
        mod = Fn(tree, None, None)
        self.f.fns.append(mod)
        self.block(tree.body, mod, (), (), (), None)

    def block(self, body, fn: Fn, ifs, withs, loops, cls) -> None:
        for s in body:
            self.stmt(s, fn, ifs, withs, loops, cls)

    def stmt(self, s, fn: Fn, ifs, withs, loops, cls) -> None:
        f = self.f
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not self.relevant(s):
                return
            for d in s.decorator_list:
                self.exprs(d, s, fn, ifs, withs, loops)
            args = s.args
            first = (args.posonlyargs or args.args)
            is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in s.decorator_list)
            self_name = first[0].arg if cls is not None and first and not is_static else (fn.self_name if fn.cls is not None else None)
            inner = Fn(s, cls if cls is not None else fn.cls, self_name)
            f.fns.append(inner)
            self.block(s.body, inner, (), (), (), None)
            return
        if isinstance(s, ast.ClassDef):
            f.classes.setdefault(s.name, s)
            for b in s.bases:
                self.exprs(b, s, fn, ifs, withs, loops)
            body_fn = Fn(s, s, None)
            f.fns.append(body_fn)
            self.block(s.body, body_fn, (), (), (), s)
            return
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            add_import(f.scope, s)
            return
        if isinstance(s, ast.If):
            self.exprs(s.test, s, fn, ifs, withs, loops)
            self.block(s.body, fn, ifs + ((s, True),), withs, loops, cls)
            self.block(s.orelse, fn, ifs + ((s, False),), withs, loops, cls)
            return
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            self.exprs(s.iter if not isinstance(s, ast.While) else s.test, s, fn, ifs, withs, loops)
            self.block(s.body, fn, ifs, withs, loops + (s,), cls)
            self.block(s.orelse, fn, ifs, withs, loops, cls)
            return
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                self.exprs(it.context_expr, s, fn, ifs, withs, loops)
            self.block(s.body, fn, ifs, withs + tuple(it.context_expr for it in s.items), loops, cls)
            return
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self.block(s.body, fn, ifs, withs, loops, cls)
            for h in s.handlers:
                self.block(h.body, fn, ifs, withs, loops, cls)
            self.block(s.orelse, fn, ifs, withs, loops, cls)
            self.block(s.finalbody, fn, ifs, withs, loops, cls)
            return
        if isinstance(s, ast.Match):
            self.exprs(s.subject, s, fn, ifs, withs, loops)
            for case in s.cases:
                self.block(case.body, fn, ifs + ((case, True),), withs, loops, cls)
            return
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            f._seq += 1
            fn.assigns.append((s, s.value, f._seq))
        self.exprs(s, s, fn, ifs, withs, loops)

    def exprs(self, node, stmt, fn: Fn, ifs, withs, loops) -> None:
        f = self.f
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
        calls.sort(key=lambda c: (c.lineno, c.col_offset))
        for c in calls:
            f._seq += 1
            fn.sites.append(Site(c, stmt, f._seq, fn, ifs, withs, loops))


_TOPDEF = lazy(r"^(?:async[ \t]+def|def|class)[ \t]", re.M)


def _complete(model) -> bool:
    """Is ``model.tree`` the whole file (not masked by the parser)? Masking blanks top-level
    definitions only, so the same count of top-level ``def``/``class`` lines in the text and
    in the tree means nothing was blanked."""
    n_tree = sum(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for s in model.tree.body)
    return n_tree == len(_TOPDEF.findall(model.source))


def may_be_fp16(model) -> bool:
    """Can the file show an fp16 setting at all? Every AMP4xx rule needs one (unknown is
    silent), so without such a token the rules skip the facts (speed)."""
    src = model.source
    return any(t in src for t in _TOKENS) and any(t in src for t in _FP16_TOKENS)


def facts(model) -> Facts | None:
    """The framework facts of ``model``'s file (None when it names no framework). Cached on
    the model."""
    cached = model.__dict__.get("_framework_facts", False)
    if cached is not False:
        return cached
    result = None
    src = model.source
    if any(t in src for t in _TOKENS):
        tree = model.tree
        if not _complete(model):
            try:
                tree = ast.parse(src)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = model.tree
        result = Facts(model, tree)
        _Walk(result, src).module(tree)
        for fn in result.fns:
            for site in fn.sites:
                s = result._setting_for(site)
                if s is not None:
                    result.settings.append(s)
        for s in result.settings:
            if s.precision != FP16 and s.how in ("unknown", "cli-default") and s.precision != BF16 and result.fp16_branch(s.framework):
                s.precision, s.how = FP16, "branch"
        # ``accelerator.gradient_accumulation_steps = n`` later on
        for fn in result.fns:
            for stmt, _v, _seq in fn.assigns:
                for t in _targets(stmt):
                    if isinstance(t, ast.Attribute) and t.attr == "gradient_accumulation_steps":
                        for s in result.settings:
                            if s.framework == "accelerate":
                                s.accumulation = True
    model.__dict__["_framework_facts"] = result
    return result


# ---------------------------------------------------------------------------- helpers for rules
SCHEDULER_NAME = lazy(r"sched|lr_|warmup|ema|swa|scaler|progress|pbar|bar$|trainer|accelerator|engine|profiler|timer|writer|logger", re.IGNORECASE)
OPTIMIZER_CTOR = lazy(r"(?:Adam\w*|SGD|Adafactor|Lion\w*|RMSprop|Adagrad|Adadelta|LAMB|Lamb|LARS|Prodigy\w*|optimizer_cl\w*|optimizer_cls|Optimizer)$")


def optimizer_step(site: Site) -> bool:
    """``optimizer.step()`` (no arguments; not a scheduler, progress bar or engine)."""
    if site.attr != "step" or site.node.args or site.node.keywords:
        return False
    parts = dotted(site.receiver) if site.receiver is not None else None
    if not parts:
        return False
    return not SCHEDULER_NAME.search(parts[-1])


def unscaled_between(facts: Facts, fn, b: Site, c: Site) -> bool:
    """Does a site between ``b`` and ``c`` (not exclusive with ``c``) unscale the gradients
    (``accelerator.unscale_gradients()``, an accelerator's ``clip_grad_norm_``, ``scaler.unscale_``)?"""
    for s in fn.sites:
        if b.seq < s.seq < c.seq and not s.exclusive_with(c):
            if s.attr in ("unscale_gradients", "unscale_", "clip_grad_norm_", "clip_grad_value_") and not facts.is_clip(s.node):
                return True
    return False


def other_engine(st) -> bool:
    """An Accelerator given a DeepSpeed or Megatron plugin scales in that engine instead."""
    call = st.node
    return any(k.arg in ("deepspeed_plugin", "deepspeed_plugins", "megatron_lm_plugin") for k in call.keywords)


def half_casts(F: Facts, fn):
    """The places of ``fn`` that make a module fp16 (``x = m.half()``, ``m.to(torch.float16)``,
    ``from_pretrained(..., torch_dtype=torch.float16)``, a dtype variable assigned float16):
    (name, call, statement, seq)."""
    for stmt, value, seq in fn.assigns:
        if isinstance(value, ast.Call) and _is_half_cast(F, fn, value):
            for t in _targets(stmt):
                if isinstance(t, (ast.Name, ast.Attribute)):
                    yield F.text(t), value, stmt, seq
    for s in fn.sites:
        if isinstance(s.stmt, ast.Expr) and s.stmt.value is s.node and s.attr in ("half", "to") and _is_half_cast(F, fn, s.node):
            yield F.text(s.receiver), s.node, s.stmt, s.seq

def _is_half_cast(F, fn, call: ast.Call) -> bool:
    f = call.func
    attr = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else None)
    if attr == "from_pretrained":
        return any(k.arg in ("torch_dtype", "dtype") and _half_dtype(F, fn, k.value) for k in call.keywords)
    if attr == "half" and not call.args:
        return True
    if attr == "to":
        vals = list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]
        return any(_half_dtype(F, fn, v) for v in vals)
    return False

def _half_dtype(F, fn, e: ast.expr, depth: int = 0) -> bool:
    if depth > 3:
        return False
    if isinstance(e, ast.Constant) and e.value in ("float16", "fp16", "half"):
        return True
    if isinstance(e, ast.IfExp):
        return _half_dtype(F, fn, e.body, depth + 1) or _half_dtype(F, fn, e.orelse, depth + 1)
    q = F.qual(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
    if q in HALF_DTYPES:
        return True
    if isinstance(e, ast.Name):
        pool = fn.assigns + (F.fns[0].assigns if fn is not F.fns[0] else [])
        for stmt, v, _seq in pool:
            if any(isinstance(t, ast.Name) and t.id == e.id for t in _targets(stmt)):
                if _half_dtype(F, fn, v, depth + 1):
                    return True
    return False


def training_span(fn) -> tuple[int, int] | None:
    """First and last line of the loops in ``fn`` that run a backward pass (the training
    loop), or None when ``fn`` has none (training happens elsewhere: a Trainer, fit)."""
    spans = []
    for n in ast.walk(fn.node) if isinstance(fn.node, ast.AST) else ():
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "backward" for c in ast.walk(n)):
                spans.append((n.lineno, n.end_lineno or n.lineno))
    if not spans:
        return None
    return min(a for a, _ in spans), max(b for _, b in spans)


def under_frozen_branch(ifs, stmt) -> bool:
    """``stmt`` runs only in a branch whose test names training (``if not
    args.train_text_encoder:``): the cast module is frozen there, or trained only in the other
    branch."""
    for n in ifs:
        inside = [b and b[0].lineno <= stmt.lineno <= (b[-1].end_lineno or b[-1].lineno) for b in (n.body, n.orelse)]
        if "train" in ast.unparse(n.test).lower() and any(inside):
            return True
        no_fp16 = _not_fp16_arm(n.test)  # `if mixed_precision != "fp16":` casts only without fp16
        if no_fp16 is not None and inside[no_fp16]:
            return True
    return False


def _not_fp16_arm(test: ast.expr) -> int | None:
    """For ``x.mixed_precision != "fp16"`` the body (0), for ``== "fp16"`` the else branch
    (1): the arm that never runs under fp16. None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    sides = [test.left, test.comparators[0]]
    if not any(isinstance(x, ast.Constant) and x.value == "fp16" for x in sides):
        return None
    if not any((dotted(x) or [""])[-1] == "mixed_precision" for x in sides if isinstance(x, (ast.Name, ast.Attribute))):
        return None
    if isinstance(test.ops[0], ast.NotEq):
        return 0
    if isinstance(test.ops[0], ast.Eq):
        return 1
    return None


def sync_guarded(site: Site) -> bool:
    """Inside ``if accelerator.sync_gradients:`` (also ``and``-ed with more), or the ``else``
    of ``if not accelerator.sync_gradients:``; an ``if`` that tests an accumulation counter
    (``(step + 1) % accum == 0``) counts as a guard too."""
    for node, arm in site.ifs:
        test = getattr(node, "test", None)
        if test is None:
            continue
        if _mentions_sync(test, negated=False) and arm:
            return True
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _mentions_sync(test.operand, False) and not arm:
            return True
        if arm and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test)):
            return True
    return False


def _mentions_sync(test: ast.expr, negated: bool) -> bool:
    if isinstance(test, ast.Attribute) and test.attr == "sync_gradients":
        return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_mentions_sync(v, negated) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)):
        return _mentions_sync(test.left, negated) and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is True
    return False


def in_accumulate(facts: Facts, site: Site) -> ast.Call | None:
    """The ``accelerator.accumulate(...)`` call of a ``with`` around ``site``."""
    for w in site.withs:
        if isinstance(w, ast.Call) and isinstance(w.func, ast.Attribute) and w.func.attr == "accumulate":
            return w
    return None


def prefix(a: tuple, b: tuple) -> bool:
    """Is the loop nest ``a`` a prefix of ``b`` (``b`` is in the same loop as ``a`` or deeper)?"""
    return len(a) <= len(b) and all(x is y for x, y in zip(a, b))


def grad_norm_read(site: Site) -> bool:
    """``p.grad.norm()`` / ``p.grad.data.norm()``."""
    if site.attr != "norm":
        return False
    r = site.receiver
    if isinstance(r, ast.Attribute) and r.attr == "data":
        r = r.value
    return isinstance(r, ast.Attribute) and r.attr == "grad"


_NORMS = {"norm", "vector_norm", "get_total_norm"}


def norm_of_grads(fn, site: Site) -> bool:
    """``torch.norm(...)`` / ``torch.linalg.vector_norm(...)`` over gradients: an argument that
    reads ``.grad`` or a local of ``fn`` assigned from ``.grad`` reads (``grads = [p.grad for p
    in params]; torch.norm(torch.stack([torch.norm(g) for g in grads]))``)."""
    if site.attr not in _NORMS or not isinstance(site.node, ast.Call) or not site.node.args:
        return False
    if not (isinstance(site.receiver, ast.Name) or isinstance(site.receiver, ast.Attribute) and site.receiver.attr == "linalg"):
        return False  # torch.norm / torch.linalg.*, not a method of some object
    if fn.grad_names is None:
        fn.grad_names = {t.id for stmt, v, _seq in fn.assigns if _reads_grad(v, ()) for t in _targets(stmt) if isinstance(t, ast.Name)}
    return any(_reads_grad(a, fn.grad_names) for a in site.node.args)


def _reads_grad(node, names) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr == "grad":
            return True
        if isinstance(n, ast.Name) and n.id in names:
            return True
    return False


def _offers_fp16(n: ast.Call) -> bool:
    """``parser.add_argument("--mixed_precision", choices=["no", "fp16", "bf16"])``."""
    if not (isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
        return False
    if not any(isinstance(a, ast.Constant) and isinstance(a.value, str) and "mixed_precision" in a.value.replace("-", "_") for a in n.args):
        return False
    choices = next((k.value for k in n.keywords if k.arg == "choices"), None)
    return isinstance(choices, (ast.List, ast.Tuple, ast.Set)) and any(
        isinstance(c, ast.Constant) and c.value == "fp16" for c in choices.elts)


# Whether fp16 weights are trained under a framework's mixed precision (AMP403).

def recast_or_frozen(F, fn, name, seq, node, span=None) -> bool:
    """Is ``name``, cast to half at ``node`` (sequence ``seq``), cast back to float32 before
    training starts (``span``), or frozen (``requires_grad_(False)``, no adapter added later)?"""
    for s in fn.sites:
        r = s.receiver
        if r is None or F.text(r) != name or s.node is node:
            continue
        if span is not None and s.node.lineno > span[0]:
            continue  # once training has started, a cast back comes too late
        if s.attr == "requires_grad_" and s.node.args and isinstance(s.node.args[0], ast.Constant) and s.node.args[0].value is False and s.seq > seq:
            # frozen after the cast; an adapter added later is trainable again (LoRA)
            if not any(x.attr in ("add_adapter", "add_adapters") and x.receiver is not None and F.text(x.receiver) == name and x.seq > s.seq for x in fn.sites):
                return True
        if s.seq > seq and (s.attr == "float" or (s.attr == "to" and any(
            (F.qual(v) if isinstance(v, (ast.Name, ast.Attribute)) else None) in FP32_DTYPES
            for v in list(s.node.args) + [k.value for k in s.node.keywords if k.arg == "dtype"]
        ))):
            return True
    if any(
        s.attr == "requires_grad_" and s.receiver is not None and F.text(s.receiver) == name
        and s.node.args and isinstance(s.node.args[0], ast.Constant) and s.node.args[0].value is False
        for s in fn.sites
    ) and not any(x.attr in ("add_adapter", "add_adapters") and x.receiver is not None and F.text(x.receiver) == name for x in fn.sites):
        return True
    return False

def trained_under(F, fn, name) -> str | None:
    """Under which framework's fp16 mixed precision are the parameters of ``name`` trained in
    ``fn``: an optimizer over them prepared by an fp16 Accelerator, an HF Trainer given the model
    with fp16 arguments, or a Lightning 16-mixed trainer fitting it; a description, or None."""
    # accelerate: an optimizer over name.parameters(), prepared by an fp16 Accelerator
    opts = []
    for s in fn.sites:
        if _is_optimizer_ctor(F, s.node):
            arg = s.node.args[0] if s.node.args else next((k.value for k in s.node.keywords if k.arg in ("params", "model_params")), None)
            if arg is not None and _mentions_params(F, fn, arg, name, s.seq):
                tgt = _assigned_to(s.stmt, s.node)
                opts.append(F.text(tgt) if tgt is not None else None)
    for s in F.sites(fn, "prepare"):
        st = F.accelerator_setting(fn, s.receiver)
        if st is None or not st.fp16:
            continue
        texts = {F.text(a) for a in s.node.args}
        if opts and (name in texts or any(o in texts for o in opts if o)):
            return f"accelerate fp16 ({st.describe()})"
    # HF Trainer(model=name, args=...)
    for s in fn.sites:
        q = F.callee(s.node) or ""
        if q in HF_TRAINERS and not any(k.arg == "peft_config" for k in s.node.keywords):
            kw = {k.arg: k.value for k in s.node.keywords}
            m = kw.get("model", s.node.args[0] if s.node.args else None)
            a = kw.get("args", s.node.args[1] if len(s.node.args) > 1 else None)
            if m is not None and F.text(m) == name:
                st = F.hf_setting(a)
                if st is not None and st.fp16:
                    return f"the HF Trainer's fp16 ({st.describe()})"
    # Lightning trainer.fit(name)
    for s in F.sites(fn, "fit"):
        if not s.node.args or F.text(s.node.args[0]) != name:
            continue
        tr = F.text(s.receiver)
        pl = [x for x in F.settings if x.framework == "lightning" and x.target == tr]
        if not pl and isinstance(s.receiver, ast.Call) and (F.callee(s.receiver) or "") in LIGHTNING_TRAINERS:
            pl = [x for x in F.settings if x.node is s.receiver]
        st = _merge(pl) if pl else None
        if st is not None and st.fp16:
            return f"Lightning's 16-mixed precision ({st.describe()})"
    return None

def _is_optimizer_ctor(F, call: ast.Call) -> bool:
    q = F.callee(call) or ""
    if q.startswith("torch.optim.") and q.count(".") == 2:
        return True
    parts = dotted(call.func)
    return bool(parts) and bool(OPTIMIZER_CTOR.search(parts[-1]))

def _mentions_params(F, fn, expr, name, before, depth=0) -> bool:
    text = F.text(expr)
    if re.search(rf"(?<![\w.]){re.escape(name)}(?:\.\w+)*\.(?:named_)?parameters\(", text):
        return True  # the model's parameters or a submodule's (`net.unet.conv_in.parameters()`)
    if depth > 3:
        return False
    for n in ast.walk(expr):
        if isinstance(n, ast.Name):
            prior = [
                v for stmt, v, seq in fn.assigns
                if seq < before and any(isinstance(t, ast.Name) and t.id == n.id for t in _targets(stmt))
            ]
            if prior and _mentions_params(F, fn, prior[-1], name, before, depth + 1):
                return True
    return False
