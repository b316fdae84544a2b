from __future__ import annotations

import ast
import re

from amplint.lazyre import lazy
from amplint.diagnostics import Fix, RenameImportModule, ReplaceExpression, ReplaceStatement
from amplint.model.names import dotted, qualify
from amplint.rules import Invalid, Rule
from amplint.rules._util import stmt_anchor
from amplint.settings import _parse_version

# deprecated qualified name -> (torch.amp name, device)
DEPRECATED: dict[str, tuple[str, str]] = {}
for _dev in ("cuda", "cpu"):
    for _name, _mods in (
        ("autocast", ("", ".autocast_mode")),
        ("GradScaler", ("", ".grad_scaler")),
        ("custom_fwd", ("", ".autocast_mode")),
        ("custom_bwd", ("", ".autocast_mode")),
    ):
        if _dev == "cpu" and _name.startswith("custom_"):
            continue
        for _m in _mods:
            DEPRECATED[f"torch.{_dev}.amp{_m}.{_name}"] = (_name, _dev)
# the torch version that has each replacement (amp-facts: torch.amp.GradScaler and the CPU
# scaler 2.3; torch.amp.autocast in 2.3, generic torch.autocast since 1.10; custom_fwd/bwd with
# device_type 2.4)
NEEDS = {"GradScaler": "2.3", "autocast": "2.3", "custom_fwd": "2.4", "custom_bwd": "2.4"}
DEPRECATED_MODULES = {f"torch.{d}.amp{m}": d for d in ("cuda", "cpu") for m in ("", ".autocast_mode", ".grad_scaler")}
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
VERSION_TEST = lazy(r"version|TORCH_|_TORCH|hasattr|getattr|is_torch", re.IGNORECASE)


def _version_guarded(r) -> bool:
    """Under ``if TORCH_GE_2_4: ... else:`` / ``if is_torch_version(...)``, or in an arm of
    ``new if _TORCH_GREATER_EQUAL_2_4 else old``."""
    if r.ctx.guarded or any(lit.key and VERSION_TEST.search(lit.key) for lit in r.ctx.lits):
        return True
    if r.stmt is None:
        return False
    for n in ast.walk(r.stmt):
        if isinstance(n, ast.IfExp) and VERSION_TEST.search(ast.unparse(n.test)):
            if any(x is r.node for side in (n.body, n.orelse) for x in ast.walk(side)):
                return True
    return False


def _version_ok(model, need: str) -> bool:
    have = _parse_version(model.target_torch_version) or (0,)
    return have >= (_parse_version(need) or (0,))


class DeprecatedAmpApi(Rule):
    code = "AMP101"
    severity = "warning"
    name = "deprecated-amp-api"
    summary = "`torch.cuda.amp.*` / `torch.cpu.amp.*` (deprecated since torch 2.4): use `torch.amp.*` with a device"
    fix_availability = "sometimes"
    docs = """
## What it does
Checks for uses of the device-specific AMP API: `torch.cuda.amp.autocast`,
`torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd`, `torch.cuda.amp.custom_bwd`,
`torch.cpu.amp.autocast` and `torch.cpu.amp.GradScaler`, in every spelling: attribute
chains, `from torch.cuda.amp import autocast`, `from torch.cuda import amp`,
`import torch.cuda.amp as amp`, bare decorators and aliases (`ac = torch.cuda.amp.autocast`).

## Why is this bad?
Since torch 2.4 each of them emits a `FutureWarning` (shown by default) when instantiated
or applied, for example
``FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.``
The replacements take the device explicitly: `torch.amp.autocast("cuda", ...)`,
`torch.amp.GradScaler("cuda", ...)`, `torch.amp.custom_fwd(device_type="cuda", ...)`.

Code inside a version guard (`if hasattr(torch.amp, ...)`, `try: ... except ImportError:`),
strings, docstrings and type annotations are not reported.

## Example
```python
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler()
with autocast(dtype=torch.float16):
    loss = model(x)
```

Use instead:
```python
from torch.amp import GradScaler, autocast

scaler = GradScaler("cuda")
with autocast("cuda", dtype=torch.float16):
    loss = model(x)
```

## Fix safety
The fix rewrites each call and the import statement together, so no import is left unused
or missing: `from torch.cuda.amp import autocast` becomes `from torch.amp import autocast`
and its calls get the device; `import torch.cuda.amp as tca` becomes `import torch.amp as
tca`. Positional arguments of `autocast` (`enabled`, `dtype`, `cache_enabled`) become
keywords, because `torch.amp.autocast` takes the device first.

A spelling is reported only when the project's torch (`target-torch-version`, default 2.4)
has its replacement: `torch.amp.GradScaler` and the CPU GradScaler arrived in 2.3,
`torch.amp.autocast` is there in 2.3 (generic `torch.autocast` since 1.10),
`torch.amp.custom_fwd/custom_bwd(device_type=...)` arrived in 2.4. Below those versions the
old spelling is not deprecated and nothing is reported, so no message or fix suggests an API
the target lacks. Where reported, the fix is safe: the replacement exists and behaves the same.
No fix is offered for a non-call use (an alias, `isinstance`, `partial(...)`) of `autocast` or
`custom_fwd`, or when a module alias is also used for other attributes. A non-call use of
`torch.cuda.amp.GradScaler` is rewritten only in an annotation: an alias
(`GS = torch.cuda.amp.GradScaler`) or a factory argument is left alone, since
`torch.amp.GradScaler` takes the device as its first parameter and a call `GS(4096.0)` would
then get the device `4096.0`; `isinstance(x, torch.cuda.amp.GradScaler)` is left alone too,
since `torch.amp.GradScaler` also matches CPU scalers. A `from torch.cuda.amp import (...)`
keeps its parentheses and comments: only the module name changes.
"""
    valid = [
        """
import torch
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    pass
""",
        # version guard
        """
import torch
try:
    from torch.amp import autocast
except ImportError:
    from torch.cuda.amp import autocast
with autocast("cuda"):
    pass
""",
        """
import torch
scaler = torch.amp.GradScaler("cuda") if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()
if is_torch_version(">=", "2.3"):
    scaler = torch.amp.GradScaler("cuda")
else:
    scaler = torch.cuda.amp.GradScaler()
""",
        """
import torch
if hasattr(torch.amp, "GradScaler"):
    scaler = torch.amp.GradScaler("cuda")
else:
    scaler = torch.cuda.amp.GradScaler()
""",
        # strings, docstrings and annotations
        '''
import torch
def train(scaler: torch.cuda.amp.GradScaler) -> None:
    """Use torch.cuda.amp.autocast() here."""
    msg = "torch.cuda.amp.autocast is deprecated"
''',
        # torch.amp spelled through a module alias
        """
from torch import amp
scaler = amp.GradScaler("cuda")
with amp.autocast("cuda"):
    pass
""",
    ]
    invalid = [
        # a subclass of the deprecated scaler: detection only
        Invalid(
            """
import torch
class MyScaler(torch.cuda.amp.GradScaler):
    def __init__(self, init_scale):
        super().__init__(init_scale)
""",
        ),
        Invalid(
            """
import torch
scaler = torch.cuda.amp.GradScaler(init_scale=1024)
with torch.cuda.amp.autocast(dtype=torch.float16):
    pass
with torch.cpu.amp.autocast():
    pass
""",
            fixed="""
import torch
scaler = torch.amp.GradScaler("cuda", init_scale=1024)
with torch.amp.autocast("cuda", dtype=torch.float16):
    pass
with torch.amp.autocast("cpu"):
    pass
""",
            count=3,
        ),
        # from-import with no `import torch` (TorchFix's broken fix): the import is rewritten too
        Invalid(
            """
from torch.cuda.amp import autocast, GradScaler as GS
scaler = GS()
with autocast(enabled=True):
    pass
""",
            fixed="""
from torch.amp import autocast, GradScaler as GS
scaler = GS("cuda")
with autocast("cuda", enabled=True):
    pass
""",
            count=2,
        ),
        # a module alias keeps its name
        Invalid(
            """
import torch.cuda.amp as tca
with tca.autocast():
    pass
""",
            fixed="""
import torch.amp as tca
with tca.autocast("cuda"):
    pass
""",
        ),
        Invalid(
            """
from torch.cuda import amp
with amp.autocast(True, torch.float16):
    pass
""",
            fixed="""
from torch import amp
with amp.autocast("cuda", enabled=True, dtype=torch.float16):
    pass
""",
        ),
        # decorators, bare and called, on methods of an autograd.Function
        Invalid(
            """
import torch
from torch.cuda.amp import custom_bwd
class F(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x
    @staticmethod
    @custom_bwd
    def backward(ctx, g):
        return g
""",
            fixed="""
import torch
from torch.amp import custom_bwd
class F(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x):
        return x
    @staticmethod
    @custom_bwd(device_type="cuda")
    def backward(ctx, g):
        return g
""",
            count=2,
        ),
        # an alias assignment: reported, not fixed
        Invalid(
            """
import torch
ac = torch.cuda.amp.autocast
with ac():
    pass
""",
        ),
    ]

    def check(self, model):
        yield from self._subclasses(model)
        callee_of = {id(c.callee): c for c in model.qual_calls}
        bindings = self._bindings(model)
        groups: dict[int, list] = {}
        direct = []
        for r in model.refs:
            if _version_guarded(r):
                continue
            if r.qualname in DEPRECATED and not _version_ok(model, NEEDS[DEPRECATED[r.qualname][0]]):
                continue  # the target torch has no replacement (and no deprecation)
            parts = dotted(r.node)
            if not parts:
                continue
            head = parts[0]
            imps = bindings.get(head, [])
            if any(imp.ctx.guarded or not self._deprecated_binding(imp, head) for imp in imps):
                continue  # also bound to torch.amp somewhere / a version guard
            if imps and not all(self._plain_torch(imp, head) for imp in imps):
                visible = [imp for imp in imps if _encloses(imp.func, r.func)]
                if len(visible) != 1:
                    if visible:
                        continue
                    # an alias created by assignment (GS = torch.cuda.amp.GradScaler): a plain reference
                else:
                    groups.setdefault(id(visible[0]), [visible[0]]).append(r)
                    continue
            direct.append(r)
        fixes = {}
        base_heads = {
            (dotted(b) or [""])[0] for info in model.classes.values() for b in info.node.bases
        }
        for gid, (imp, *refs) in groups.items():
            fixes[gid] = self._group_fix(model, imp, refs, callee_of)
            if base_heads & set(self._bound(imp)):
                # a class subclasses a name this import binds: rewriting the import would change
                # its base's signature (torch.amp.GradScaler takes the device first)
                fixes[gid] = None
            for r in refs:
                if r.qualname in DEPRECATED:
                    yield self._diag(model, r, fixes[gid])
        for r in direct:
            if r.qualname not in DEPRECATED:
                continue
            yield self._diag(model, r, self._direct_fix(model, r, callee_of))
        # deprecated imports with no use in the file (re-exports)
        for imp in model.imports:
            if id(imp) in groups or imp.ctx.guarded:
                continue
            names = self._bound(imp)
            if any(
                not _version_ok(model, NEEDS[DEPRECATED[q][0]])
                for a in getattr(imp.node, "names", [])
                for q in [f"{getattr(imp.node, 'module', '')}.{a.name}"]
                if q in DEPRECATED
            ):
                continue
            if names and all(self._deprecated_binding(imp, n, strict=True) for n in names):
                if any(bindings.get(n, [imp]) != [imp] for n in names):
                    continue
                yield self.diagnostic(
                    model, imp.node,
                    f"Import from the deprecated `{self._module_text(imp)}`; use `torch.amp` (with a device argument at the call)",
                    None, imp.node,
                )

    def _subclasses(self, model):
        """``class MyScaler(torch.cuda.amp.GradScaler)``: class bases are not references the
        walker records. Detection only (a subclass's own ``__init__`` decides what a rewrite
        would need)."""
        for info in model.classes.values():
            for base in info.node.bases:
                q = qualify(base, [model.module_scope])
                if q not in DEPRECATED:
                    continue
                name, dev = DEPRECATED[q]
                if not _version_ok(model, NEEDS[name]):
                    continue
                old = q.replace(".autocast_mode", "").replace(".grad_scaler", "")
                yield self.diagnostic(
                    model, base,
                    f"`{info.node.name}` subclasses the deprecated `{old}` (FutureWarning at every construction since "
                    f"torch 2.4); subclass `torch.amp.{name}` and pass the device (\"{dev}\") to its `__init__`",
                    None, info.node,
                )

    # ------------------------------------------------------------------ bindings
    @staticmethod
    def _bound(imp) -> list[str]:
        node = imp.node
        out = []
        for a in node.names:
            if isinstance(node, ast.Import):
                out.append(a.asname or a.name.split(".")[0])
            else:
                out.append(a.asname or a.name)
        return out

    def _bindings(self, model):
        out: dict[str, list] = {}
        for imp in model.imports:
            for n in self._bound(imp):
                out.setdefault(n, []).append(imp)
        return out

    @staticmethod
    def _deprecated_binding(imp, name, strict=False) -> bool:
        """Does ``imp`` bind ``name`` to a deprecated object/module (or to plain ``torch``)?"""
        node = imp.node
        for a in node.names:
            if isinstance(node, ast.Import):
                bound = a.asname or a.name.split(".")[0]
                if bound != name:
                    continue
                target = a.name if a.asname else a.name.split(".")[0]
                return (target == "torch" and not strict) or target in DEPRECATED_MODULES
            bound = a.asname or a.name
            if bound != name:
                continue
            q = f"{node.module}.{a.name}" if node.module and not node.level else ""
            return q in DEPRECATED or q in DEPRECATED_MODULES
        return not strict

    @staticmethod
    def _plain_torch(imp, name) -> bool:
        """``import torch`` / ``import torch.cuda.amp``: ``name`` is the torch package itself."""
        node = imp.node
        return isinstance(node, ast.Import) and any(
            not a.asname and a.name.split(".")[0] == name == "torch" or a.asname == name and a.name == "torch"
            for a in node.names
        )

    @staticmethod
    def _module_text(imp) -> str:
        node = imp.node
        if isinstance(node, ast.ImportFrom):
            return node.module or ""
        return node.names[0].name

    # ------------------------------------------------------------------ fixes
    def _diag(self, model, r, fix):
        name, dev = DEPRECATED[r.qualname]
        if name == "autocast":
            new = f'torch.amp.autocast("{dev}", ...)'
        elif name == "GradScaler":
            new = f'torch.amp.GradScaler("{dev}", ...)'
        else:
            new = f'torch.amp.{name}(device_type="{dev}", ...)'
        old = r.qualname.replace(".autocast_mode", "").replace(".grad_scaler", "")
        return self.diagnostic(
            model, r.node,
            f"`{old}` is deprecated (FutureWarning since torch 2.4); use `{new}`",
            fix, r.stmt,
        )

    def _applicability(self, model, names) -> str:
        need = max((NEEDS.get(n, "2.4") for n in names), key=lambda v: tuple(map(int, v.split("."))), default="2.4")
        return "safe" if _version_ok(model, need) else "display-only"

    def _call_text(self, model, call: ast.Call, new_func: str, name: str, dev: str) -> str | None:
        """The call rewritten to the torch.amp spelling, or None."""
        func_text = model.text(call.func)
        text = model.text(call)
        if not text.startswith(func_text):
            return None
        rest = text[len(func_text):].lstrip()
        if not rest.startswith("("):
            return None
        if name in ("custom_fwd", "custom_bwd"):
            first, ins = None, f'device_type="{dev}"'
        else:
            first, ins = f'"{dev}"', None
        if name == "autocast" and call.args:
            if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > 3:
                return None
            args = [f'"{dev}"'] + [f"{k}={model.text(a)}" for k, a in zip(AUTOCAST_POSITIONAL, call.args)]
            args += [model.text(k) for k in call.keywords]
            return f"{new_func}({', '.join(args)})"
        if ins is not None and call.args:
            args = [model.text(a) for a in call.args] + [ins] + [model.text(k) for k in call.keywords]
            return f"{new_func}({', '.join(args)})"
        add = first or ins
        m = re.match(r"\(\s*", rest)
        ws = m.group()[1:]
        inner = rest[m.end():]
        if inner.startswith(")"):
            return f"{new_func}({add}{inner}" if not ws else f"{new_func}({add})"
        if "\n" in ws:
            return f"{new_func}({ws}{add},{ws}{inner}"
        return f"{new_func}({add}, {inner}"

    def _use_action(self, model, r, new_func, callee_of):
        """The action rewriting one use, None when it needs no change, False when unfixable."""
        name, dev = DEPRECATED.get(r.qualname, (None, None))
        if name is None:
            return False
        call = callee_of.get(id(r.node))
        (r1, c1, r2, c2) = model.span(r.node)
        if call is not None:
            code = self._call_text(model, call.node, new_func, name, dev)
            if code is None:
                return False
            (r1, c1, r2, c2) = model.span(call.node)
            return ReplaceExpression((r1, c1), (r2, c2), code)
        if r.role == "decorator" and name in ("custom_fwd", "custom_bwd"):
            return ReplaceExpression((r1, c1), (r2, c2), f'{new_func}(device_type="{dev}")')
        if name == "GradScaler" and dev == "cuda" and r.role in ("load", "arg"):
            if not _class_only(model, r):
                # an alias or a factory (`GS = torch.cuda.amp.GradScaler`; `GS(4096.0)`): the torch.amp
                # class takes the device first, so every call through it would need rewriting
                return False
            return None if new_func == model.text(r.node) else ReplaceExpression((r1, c1), (r2, c2), new_func)
        return False

    def _direct_fix(self, model, r, callee_of):
        parts = dotted(r.node)
        if len(parts) < 4 or parts[1:3] not in (["cuda", "amp"], ["cpu", "amp"]):
            return None
        scopes = r.func.scopes()
        head = parts[0]
        base = next((s[head] for s in scopes if head in s), head)
        if base != "torch":
            return None
        name, _dev = DEPRECATED[r.qualname]
        act = self._use_action(model, r, f"{head}.amp.{name}", callee_of)
        if not act:
            return None
        return Fix(self._applicability(model, [name]), f"Use `torch.amp.{name}`", (act,))

    def _group_fix(self, model, imp, refs, callee_of):
        node = imp.node
        if isinstance(node, ast.ImportFrom) and node.module in ("torch.cuda", "torch.cpu") and not node.level:
            if len(node.names) != 1 or node.names[0].name != "amp":
                return None
            a = node.names[0]
            names = []
            new_import = RenameImportModule(stmt_anchor(model, node), "torch")
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module not in DEPRECATED_MODULES:
                return None
            names = [a.name for a in node.names]
            if any(f"{node.module}.{n}" not in DEPRECATED for n in names):
                return None
            new_import = RenameImportModule(stmt_anchor(model, node), "torch.amp")
        else:
            if len(node.names) != 1:
                return None
            a = node.names[0]
            if a.name not in DEPRECATED_MODULES or not a.asname:
                return None
            names = []
            new_import = f"import torch.amp as {a.asname}"
        actions = [new_import if isinstance(new_import, RenameImportModule) else ReplaceStatement(stmt_anchor(model, node), new_import)]
        for r in refs:
            parts = dotted(r.node)
            if r.qualname not in DEPRECATED or len(parts) > 2:
                return None
            names.append(DEPRECATED[r.qualname][0])
            act = self._use_action(model, r, model.text(r.node), callee_of)
            if act is False:
                return None
            if act is not None:
                actions.append(act)
        return Fix(self._applicability(model, names), "Use `torch.amp`", tuple(actions))


def _class_only(model, r) -> bool:
    """The reference is only an annotation: never called through another name (an alias
    assignment, a factory argument) and never an ``isinstance`` test (``torch.amp.GradScaler``
    also matches CPU scalers)."""
    if r.role != "load":
        return False
    if any(n is r.node for n in ast.walk(getattr(r.stmt, "value", None) or ast.Pass())):
        return False
    return not any(any(n is r.node for a in c.node.args for n in ast.walk(a)) for c in model.qual_calls)


def _encloses(outer, inner) -> bool:
    f = inner
    while f is not None:
        if f is outer:
            return True
        f = f.parent
    return False
