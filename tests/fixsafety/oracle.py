"""Execution oracle for amplint's fixes (issue 11).

Every training-loop file is copied to a temporary directory, linted and fixed through the real
command line (`amplint check`, `amplint fix`, `amplint fix --unsafe-fixes`, `amplint fix --diff`),
and the original loop, the hand-written ``expected_loop`` and each fixed loop are run on the
runtime harness's seeded problem (CPU, float16 with an overflow injected at step 5, and
bfloat16 with a fast-growing scaler). The properties of issue 11 are then checked:

(a) a correct file gets no finding and ``fix`` / ``fix --unsafe-fixes`` leave it byte for byte;
(b) a safe fix never changes what correct code does; on a misuse it leaves the file unchanged
    or yields code that runs (it may still raise the *same* error as the original while
    findings remain), and when no finding remains the fixed loop matches ``expected_loop``
    bit for bit (losses, scale trajectory of every scaler, skipped steps, final parameters);
(c) an unsafe fix never yields code that fails to parse or raises where the original did not
    (or raises a different error), and when no finding remains it matches ``expected_loop``;
(d) fixed code always parses;
(e) ``check`` says "[*] N fixable", ``fix`` then reports fixing N, ``fix --diff`` says
    "Would fix N", and ``fix`` leaves nothing marked ``[*]`` behind (per file, per mode);
(f) comments survive a fix (issue 11, defect 8): every comment of the original is still in the
    fixed file, except a trailing comment on a code line the fix deleted outright.

Each violation also carries a ``cause``: ``fix`` (the fix broke the code or changed what it
computes), ``missed`` (no finding remains, yet the program still misbehaves because one of the
misuses its header names was never reported; the fix itself may be innocent), ``finding`` (a
finding on correct code), ``count`` (property (e)) or ``comment`` (property (f)). Every cause
fails the tests alike; the cause only sorts the report.

Corpus file format (``tests/fixsafety/loops/*.py``): the first line is machine-readable,
``# fixsafety: kind=misuse codes=AMP001,AMP007 defect=1`` or ``# fixsafety: kind=correct``
(optional ``defect=N[,M]``: the issue-11 defect it reproduces; ``write=hardlink,readonly``: also
used by the write-semantics test). A misuse file ends with a section introduced by the line
``EXPECTED_MARKER`` that defines ``expected_loop`` (or ``expected_step``): the correct loop
written by hand. That section is test scaffolding: it is cut off before the file is linted
(the "subject" is the text before the marker, byte for byte) so that it cannot influence what
amplint reports; it is loaded from the original file.

The CLI is run in fresh processes (``sys.executable -m amplint``) by default. ``ServerCli``
runs the same ``amplint.cli.main`` in one long-lived child process, one request at a time (used
by the generator, where a fresh interpreter per call would cost ~0.4 s); set
``AMPLINT_FIXSAFETY_CLI=subprocess`` to force fresh processes everywhere.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import difflib
import importlib.util
import io
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPS_DIR = os.path.join(HERE, "loops")
REPO = os.path.dirname(os.path.dirname(HERE))

EXPECTED_MARKER = "# ---- fixsafety: expected (hand-written correct loop; cut off before linting) ----"
HEADER_RE = re.compile(r"^# fixsafety: (?P<fields>.*)$")
MODES = ("safe", "unsafe")
COMMON_ARGS = ("--no-cache", "--isolated", "-j", "1", "--output-format", "concise")
RUN_TIMEOUT_S = 5.0  # one loop run (~0.1 s normally; a fix that deletes `i += 1` loops forever)


# ============================================================================ corpus files


@dataclass
class Header:
    kind: str
    codes: tuple[str, ...] = ()
    defects: tuple[int, ...] = ()
    write: tuple[str, ...] = ()
    raw: str = ""


def parse_header(text: str) -> Header:
    first = text.split("\n", 1)[0].rstrip("\r")
    m = HEADER_RE.match(first)
    if not m:
        raise ValueError(f"first line is not a `# fixsafety: kind=...` header: {first!r}")
    fields: dict[str, str] = {}
    for part in m.group("fields").split():
        if "=" not in part:
            raise ValueError(f"bad header field {part!r}")
        k, v = part.split("=", 1)
        fields[k] = v
    kind = fields.pop("kind", "")
    if kind not in ("misuse", "correct"):
        raise ValueError(f"kind must be misuse or correct, got {kind!r}")
    split = lambda v: tuple(s for s in v.split(",") if s)  # noqa: E731
    h = Header(kind=kind, codes=split(fields.pop("codes", "")),
               defects=tuple(int(s) for s in split(fields.pop("defect", ""))),
               write=split(fields.pop("write", "")), raw=first)
    if fields:
        raise ValueError(f"unknown header fields {sorted(fields)}")
    return h


def split_subject(text: str) -> tuple[str, str]:
    """(subject, expected section). The subject is the text before the marker line."""
    idx = text.find("\n" + EXPECTED_MARKER)
    if idx < 0:
        return text, ""
    return text[: idx + 1], text[idx + 1:]


def corpus_files(directory: str = LOOPS_DIR) -> list[str]:
    return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                  if f.endswith(".py") and not f.startswith("_"))


# ============================================================================ the CLI


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("AMPLINT_")}
    e["PYTHONWARNINGS"] = "ignore"
    return e


class SubprocessCli:
    """`python -m amplint ARGS` in a fresh interpreter per call (the real entry point)."""

    name = "subprocess"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, args: list[str], cwd: str) -> tuple[int, str, str]:
        self.calls += 1
        p = subprocess.run([sys.executable, "-m", "amplint", *args], cwd=cwd, env=_env(),
                           capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout, p.stderr

    def close(self) -> None:
        pass


_SERVER = r"""
import contextlib, io, json, os, sys, traceback, warnings
warnings.simplefilter("ignore")
from amplint.cli import main
out_fd = os.fdopen(os.dup(1), "w")
sys.stdout = io.StringIO()
for line in sys.stdin:
    req = json.loads(line)
    os.chdir(req["cwd"])
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(req["args"])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            rc = 99
            err.write(traceback.format_exc())
    out_fd.write(json.dumps({"rc": rc, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
    out_fd.flush()
"""


class ServerCli:
    """The same `amplint.cli.main`, in one long-lived child process (one request at a time)."""

    name = "server"

    def __init__(self) -> None:
        self.calls = 0
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=_env(), cwd=REPO)

    def __call__(self, args: list[str], cwd: str) -> tuple[int, str, str]:
        self.calls += 1
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"args": list(args), "cwd": cwd}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the amplint server process died")
        r = json.loads(line)
        return r["rc"], r["out"], r["err"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def make_cli(default: str = "subprocess") -> SubprocessCli | ServerCli:
    kind = os.environ.get("AMPLINT_FIXSAFETY_CLI", default)
    return ServerCli() if kind == "server" else SubprocessCli()


# ---------------------------------------------------------------------------- output parsing

MSG_RE = re.compile(r"^(?P<path>.+?):(?P<row>\d+):(?P<col>\d+): (?P<code>[A-Z]+\d+)(?: \[warning\])?(?P<fix> \[\*\])? (?P<msg>.*)$")
FIXED_RE = re.compile(r"^Found \d+ errors? \((?P<fixed>\d+) fixed, (?P<remaining>\d+) remaining[^)]*\)\.$", re.M)
FIXABLE_RE = re.compile(r"^\[\*\] (?P<n>\d+) fixable with", re.M)
WOULD_RE = re.compile(r"Would fix (?P<n>\d+) errors? in (?P<files>\d+) files?\.")


@dataclass
class Msg:
    row: int
    col: int
    code: str
    fixable: bool
    text: str

    def short(self) -> str:
        return f"{self.code}{' [*]' if self.fixable else ''}@{self.row}"


def parse_messages(out: str) -> dict[str, list[Msg]]:
    by: dict[str, list[Msg]] = collections.defaultdict(list)
    for line in out.splitlines():
        m = MSG_RE.match(line)
        if m:
            by[os.path.normpath(m["path"])].append(
                Msg(int(m["row"]), int(m["col"]), m["code"], bool(m["fix"]), m["msg"]))
    return by


def parse_fixed(out: str) -> int:
    m = FIXED_RE.search(out)
    return int(m["fixed"]) if m else 0


def parse_fixable_summary(out: str) -> int:
    m = FIXABLE_RE.search(out)
    return int(m["n"]) if m else 0


# ============================================================================ running loops


@dataclass(frozen=True)
class Config:
    name: str
    dtype: str
    steps: int
    seed: int
    inject_at: int | None = None
    scaler_kwargs: tuple[tuple[str, float], ...] = ()


CONFIGS = (
    Config("fp16+inf@5", "float16", steps=12, seed=0, inject_at=5),
    Config("bf16+growth", "bfloat16", steps=8, seed=1, scaler_kwargs=(("init_scale", 256.0), ("growth_interval", 3))),
)


@dataclass
class Run:
    error: str | None
    losses: tuple[str, ...] = ()
    scales: tuple[float, ...] = ()
    skipped: tuple[bool, ...] = ()
    scale_log: tuple[tuple[int, float], ...] = ()  # (scaler number, get_scale()) after every update()
    params: tuple[Any, ...] = ()

    def differs(self, other: "Run") -> str | None:
        """None when bit-identical, else what differs first."""
        if self.error != other.error:
            return f"error {self.error!r} vs {other.error!r}"
        for name in ("losses", "scales", "skipped", "scale_log"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                i = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
                return (f"{name} differ at index {i}: {list(a[i:i + 3])} vs {list(b[i:i + 3])}"
                        f" (lengths {len(a)} vs {len(b)})")
        if len(self.params) != len(other.params) or not all(
                _bits_equal(u, v) for u, v in zip(self.params, other.params)):
            return "final parameters differ"
        return None


def _bits_equal(u: Any, v: Any) -> bool:
    """Bit-for-bit tensor equality (NaN equals the same NaN, unlike torch.equal)."""
    import torch

    if u.dtype != v.dtype or u.shape != v.shape:
        return False
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
    it = ints.get(u.element_size())
    if it is None or not u.is_floating_point():
        return torch.equal(u, v)
    return torch.equal(u.contiguous().view(it), v.contiguous().view(it))


@dataclass
class Outcome:
    """What a loop did in every config (or why it could not be loaded)."""

    load_error: str | None = None
    runs: dict[str, Run] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        if self.load_error:
            return self.load_error
        errs = [f"[{k}] {r.error}" for k, r in self.runs.items() if r.error]
        return "; ".join(errs) or None

    def errors_by_config(self) -> dict[str, str | None]:
        if self.load_error:
            return {c.name: self.load_error for c in CONFIGS}
        return {k: r.error for k, r in self.runs.items()}

    def differs(self, other: "Outcome") -> str | None:
        if self.load_error or other.load_error:
            if self.load_error == other.load_error:
                return None
            return f"load: {self.load_error!r} vs {other.load_error!r}"
        for k, r in self.runs.items():
            d = r.differs(other.runs[k])
            if d:
                return f"[{k}] {d}"
        return None

    def summary(self) -> str:
        e = self.error
        return "ran" if e is None else f"raised {e}"


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    def handler(signum, frame):  # noqa: ARG001
        raise _Timeout(f"timed out after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _scale_log(log: list[tuple[int, float]]):
    """Record get_scale() after every GradScaler.update() of any enabled instance (class-level
    patch, so scalers the loop builds itself are observed too)."""
    import torch

    cls = torch.amp.GradScaler
    orig = cls.update
    ids: dict[int, int] = {}

    def update(self, *a, **k):
        out = orig(self, *a, **k)
        if self.is_enabled():  # a disabled scaler's update() is a documented no-op
            n = ids.setdefault(id(self), len(ids))
            log.append((n, float(self.get_scale())))
        return out

    cls.update = update
    try:
        yield
    finally:
        cls.update = orig


@contextlib.contextmanager
def _torch_state():
    """Restore torch's global autocast and grad state after a run. A timeout (SIGALRM) can land
    inside ``autocast.__exit__`` and leave autocast enabled, its nesting count up and its cast
    cache full: every later run in the process would then compute with stale fp16 weights."""
    import torch

    devices = ("cpu", "cuda")
    saved = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in devices}
    cache, grad = torch.is_autocast_cache_enabled(), torch.is_grad_enabled()
    try:
        yield
    finally:
        for d, (enabled, dt) in saved.items():
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, dt)
        torch.set_autocast_cache_enabled(cache)
        torch.set_grad_enabled(grad)
        level = torch.autocast_increment_nesting()
        while level > 0:
            level = torch.autocast_decrement_nesting()
        torch.clear_autocast_cache()


_mod_counter = itertools.count()


def load_module(path: str, text: str | None = None):
    """Import ``path`` (or ``text`` as if it were at ``path``) under a unique module name."""
    name = f"_fixsafety_{next(_mod_counter)}_{''.join(c if c.isalnum() else '_' for c in os.path.basename(path)[:-3])}"
    if text is not None:
        module = type(sys)(name)
        module.__file__ = path
        sys.modules[name] = module
        try:
            code = compile(text, path, "exec")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(code, module.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def find_loop(module, names: Iterable[str]) -> tuple[Callable[..., Any], str] | None:
    for n in names:
        fn = getattr(module, n, None)
        if callable(fn):
            return fn, ("step" if n.endswith("_step") else "loop")
    return None


LOOP_NAMES = ("train_loop", "train_step")
EXPECTED_NAMES = ("expected_loop", "expected_step")


def _strip_location(err: str) -> str:
    return re.sub(r" \(at [^()]*:\d+\)$", "", err)


def execute(fn: Callable[..., Any], contract: str) -> Outcome:
    import torch

    from amplint.runtime import harness

    out = Outcome()
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16}
    for cfg in CONFIGS:
        log: list[tuple[int, float]] = []
        with _torch_state(), harness.cpu_threads("cpu"), warnings.catch_warnings(), _scale_log(log):
            warnings.simplefilter("ignore")
            try:
                with _time_limit(RUN_TIMEOUT_S):
                    r = harness.run_loop(fn, seed=cfg.seed, device="cpu", dtype=dtypes[cfg.dtype],
                                         steps=cfg.steps, inject_at=cfg.inject_at,
                                         scaler_kwargs=dict(cfg.scaler_kwargs) or None, contract=contract)
            except _Timeout as exc:  # raised outside the loop body (harness bookkeeping)
                out.runs[cfg.name] = Run(error=f"Timeout: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - the loop left the model unusable
                out.runs[cfg.name] = Run(error=f"after the loop: {type(exc).__name__}: {exc}")
                continue
        err = _strip_location(r.error) if r.error else None
        out.runs[cfg.name] = Run(
            error=err,
            losses=tuple("None" if v is None else float(v).hex() for v in r.losses),
            scales=tuple(r.scales), skipped=tuple(r.skipped), scale_log=tuple(log),
            params=tuple(r.params),
        )
    return out


_outcome_cache: dict[tuple[str, str, str], Outcome] = {}


def outcome_of(path: str, text: str, names: tuple[str, ...]) -> Outcome:
    """Load ``text`` as module ``path`` and run its first function among ``names`` (cached)."""
    key = (path, text, ",".join(names))
    if key in _outcome_cache:
        return _outcome_cache[key]
    try:
        compile(text, path, "exec")
    except SyntaxError as exc:
        res = Outcome(load_error=f"SyntaxError: {exc.msg} (line {exc.lineno})")
    else:
        try:
            module = load_module(path, text)
        except BaseException as exc:  # noqa: BLE001 - anything the module raises on import
            res = Outcome(load_error=f"import: {type(exc).__name__}: {exc}")
        else:
            found = find_loop(module, names)
            if found is None:
                res = Outcome(load_error=f"no function named {' or '.join(names)}")
            else:
                res = execute(*found)
            sys.modules.pop(module.__name__, None)
    _outcome_cache[key] = res
    return res


# ============================================================================ per-file records


@dataclass
class ModeResult:
    mode: str
    check: list[Msg] = field(default_factory=list)  # findings of `check` (with/without --unsafe-fixes)
    check_fixable: int = 0  # [*] markers of that check
    fix_fixed: int = 0  # "(K fixed, ...)" of `fix`
    fix_remaining: list[Msg] = field(default_factory=list)
    fix_remaining_fixable: int = 0
    fix_stderr: str = ""
    diff_would_fix: int | None = None  # `fix --diff`: "Would fix N" (None: not run)
    fixed_text: str = ""
    changed: bool = False
    parses: bool = True
    outcome: Outcome | None = None  # the fixed loop's outcome (None: file unchanged)

    def fixed_codes(self) -> list[str]:
        """Codes of findings gone after the fix (multiset difference)."""
        before = collections.Counter(m.code for m in self.check)
        after = collections.Counter(m.code for m in self.fix_remaining)
        return sorted((before - after).elements())


@dataclass
class Violation:
    prop: str
    mode: str
    detail: str
    rules: tuple[str, ...] = ()
    # fix: the fix broke or changed the code; missed: the fix was behaviour-neutral but a misuse
    # the file contains was never reported, so "no finding remains" is false comfort;
    # finding: a finding on correct code; count: the [*] / fixed counts; comment: a lost comment
    cause: str = "fix"

    def __str__(self) -> str:
        rules = f" [rules: {','.join(self.rules)}]" if self.rules else ""
        return f"({self.prop}/{self.cause}) {self.mode}: {self.detail}{rules}"


@dataclass(repr=False)
class Record:
    name: str
    header: Header
    subject: str
    original: Outcome | None = None
    expected: Outcome | None = None
    modes: dict[str, ModeResult] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)

    def __repr__(self) -> str:  # short: pytest prints fixture values in tracebacks
        return f"<Record {self.name}: {len(self.violations)} violation(s)>"

    @property
    def findings(self) -> list[Msg]:
        return self.modes["safe"].check if "safe" in self.modes else []

    def as_json(self) -> dict[str, Any]:
        def mode(m: ModeResult) -> dict[str, Any]:
            return {
                "check": [x.short() for x in m.check], "check_fixable": m.check_fixable,
                "fix_fixed": m.fix_fixed, "remaining": [x.short() for x in m.fix_remaining],
                "remaining_fixable": m.fix_remaining_fixable, "diff_would_fix": m.diff_would_fix,
                "changed": m.changed, "parses": m.parses, "fixed_codes": m.fixed_codes(),
                "outcome": None if m.outcome is None else m.outcome.summary(),
                "stderr": m.fix_stderr.strip(),
            }

        return {
            "name": self.name, "kind": self.header.kind, "codes": list(self.header.codes),
            "defects": list(self.header.defects),
            "original": self.original.summary() if self.original else None,
            "expected": self.expected.summary() if self.expected else None,
            "modes": {k: mode(v) for k, v in self.modes.items()},
            "violations": [dataclasses.asdict(v) for v in self.violations],
        }


def _comments(text: str) -> list[tuple[int, str]]:
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string.strip()))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out


def lost_comments(before: str, after: str) -> list[str]:
    """Comments of ``before`` missing from ``after``, except trailing comments of code lines that
    the fix deleted outright (a pure deletion in the line diff)."""
    have = collections.Counter(c for _, c in _comments(after))
    a_lines, b_lines = before.splitlines(), after.splitlines()
    deleted: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes():
        if tag == "delete":
            deleted.update(range(i1 + 1, i2 + 1))
    lost = []
    for row, c in _comments(before):
        if have[c] > 0:
            have[c] -= 1
            continue
        line = a_lines[row - 1] if row - 1 < len(a_lines) else ""
        code_line = not line.lstrip().startswith("#")
        if row in deleted and code_line:
            continue
        lost.append(f"line {row}: {c}")
    return lost


def evaluate(rec: Record) -> list[Violation]:
    """The properties (a)-(f) for one file."""
    v: list[Violation] = []
    correct = rec.header.kind == "correct"
    found_codes = {x.code for x in rec.modes["safe"].check} | {x.code for x in rec.modes["unsafe"].check}
    missed = tuple(sorted(set(rec.header.codes) - found_codes))
    missed_text = ", ".join(missed) + " never reported" if missed else "the findings did not cover it"
    for mode in MODES:
        m = rec.modes[mode]
        fixable_codes = tuple(sorted({x.code for x in m.check if x.fixable}))
        rules = tuple(sorted(set(m.fixed_codes()) | set(fixable_codes)))
        # (a) correct code: no finding, untouched
        if correct and m.check:
            v.append(Violation("a", mode, "finding on correct code: " + ", ".join(x.short() for x in m.check),
                               tuple(sorted({x.code for x in m.check})), cause="finding"))
        if correct and m.changed:
            v.append(Violation("a", mode, "fix modified a correct file", rules))
        # (d) parses
        if m.changed and not m.parses:
            v.append(Violation("d", mode, "fixed code does not parse: "
                               + (m.outcome.load_error if m.outcome else "?"), rules, cause="parse"))
        # (b)/(c) execution
        if m.changed and m.outcome is not None and m.parses:
            prop = "b" if mode == "safe" else "c"
            if correct:
                d = m.outcome.differs(rec.original) if rec.original else None
                if d:
                    v.append(Violation(prop, mode, f"fix changed what correct code does: {d}", rules))
            else:
                orig_errs = rec.original.errors_by_config() if rec.original else {}
                for cfg, err in m.outcome.errors_by_config().items():
                    if err is None:
                        continue
                    if orig_errs.get(cfg) is None:
                        v.append(Violation(prop, mode, f"fixed code raises where the original did not [{cfg}]: {err}", rules))
                    elif err != orig_errs.get(cfg):
                        # the original raised too: with a misuse that was never reported, the new error
                        # may be that misuse surfacing once the reported one is fixed
                        v.append(Violation(prop, mode, f"fixed code raises a new error [{cfg}]: {err} "
                                           f"(original: {orig_errs.get(cfg)})"
                                           + (f"; {missed_text}, which may be the cause" if missed else ""),
                                           rules, cause="missed" if missed else "fix"))
                    elif not m.fix_remaining:
                        v.append(Violation(prop, mode, f"no finding remains but the fixed code still raises the "
                                           f"original's error [{cfg}]: {err} (a misuse went unreported: "
                                           f"{missed_text})", missed or rules, cause="missed"))
                if not m.fix_remaining and rec.expected is not None and m.outcome.error is None:
                    d = m.outcome.differs(rec.expected)
                    if d and rec.original is not None and not m.outcome.differs(rec.original):
                        v.append(Violation(prop, mode, "no finding remains but the fixed loop still computes what "
                                           f"the misuse did, not expected_loop ({d}; a misuse went unreported: "
                                           f"{missed_text})", missed or rules, cause="missed"))
                    elif d:
                        v.append(Violation(prop, mode, f"no finding remains but the fixed loop differs from expected_loop: {d}", rules))
        # (e) counts
        if m.check_fixable != m.fix_fixed:
            v.append(Violation("e", mode, f"check says {m.check_fixable} fixable, fix reports {m.fix_fixed} fixed", rules, cause="count"))
        if m.diff_would_fix is not None and m.diff_would_fix != m.check_fixable:
            v.append(Violation("e", mode, f"check says {m.check_fixable} fixable, fix --diff says would fix {m.diff_would_fix}", rules, cause="count"))
        if m.fix_remaining_fixable:
            v.append(Violation("e", mode, f"after fix, still {m.fix_remaining_fixable} marked [*] fixable: "
                               + ", ".join(x.short() for x in m.fix_remaining if x.fixable), rules, cause="count"))
        if "did not converge" in m.fix_stderr:
            v.append(Violation("e", mode, "fix did not converge: " + m.fix_stderr.strip().splitlines()[-1], rules, cause="count"))
        # (f) comments
        if m.changed:
            lost = lost_comments(rec.subject, m.fixed_text)
            if lost:
                v.append(Violation("f", mode, "comments lost: " + "; ".join(lost), rules, cause="comment"))
    return v


# ============================================================================ the oracle


class Oracle:
    """Lint, fix and run a set of corpus-format files (each a separate file in a work dir)."""

    def __init__(self, workdir: str, cli: Callable[[list[str], str], tuple[int, str, str]] | None = None,
                 diff_counts: bool = True) -> None:
        self.workdir = workdir
        self.cli = cli or make_cli()
        self.diff_counts = diff_counts
        for d in ("orig", "safe", "unsafe", "diff"):
            os.makedirs(os.path.join(workdir, d), exist_ok=True)

    # ------------------------------------------------------------------ CLI phases
    def _check(self, names: list[str], unsafe: bool) -> dict[str, list[Msg]]:
        args = ["check", *COMMON_ARGS, *(["--unsafe-fixes"] if unsafe else []),
                *[os.path.join("orig", n) for n in names]]
        _rc, out, err = self.cli(args, self.workdir)
        by = parse_messages(out)
        res = {n: by.get(os.path.join("orig", n), []) for n in names}
        if sum(m.fixable for ms in res.values() for m in ms) != parse_fixable_summary(out):
            raise AssertionError(f"[*] markers and the summary disagree in:\n{out}\n{err}")
        return res

    def _fix(self, mode: str, names: list[str], results: dict[str, ModeResult], batch: bool) -> None:
        d = mode
        args = ["fix", *COMMON_ARGS, *(["--unsafe-fixes"] if mode == "unsafe" else [])]
        if batch and len(names) > 1:
            _rc, out, err = self.cli([*args, *[os.path.join(d, n) for n in names]], self.workdir)
            by = parse_messages(out)
            changed = [n for n in names if self._read(d, n) != results[n].fixed_text]
            if parse_fixed(out) == 0 and not changed and "did not converge" not in err:
                for n in names:
                    r = results[n]
                    r.fix_fixed = 0
                    r.fix_remaining = by.get(os.path.join(d, n), [])
                    r.fix_remaining_fixable = sum(m.fixable for m in r.fix_remaining)
                return
            for n in names:  # something happened: redo one file at a time to attribute it
                shutil.copyfile(os.path.join(self.workdir, "orig", n), os.path.join(self.workdir, d, n))
        for n in names:
            r = results[n]
            _rc, out, err = self.cli([*args, os.path.join(d, n)], self.workdir)
            r.fix_fixed = parse_fixed(out)
            r.fix_remaining = parse_messages(out).get(os.path.join(d, n), [])
            r.fix_remaining_fixable = parse_fixable_summary(out)
            r.fix_stderr = err
            if self.diff_counts and r.check_fixable:
                shutil.copyfile(os.path.join(self.workdir, "orig", n), os.path.join(self.workdir, "diff", n))
                _rc, dout, derr = self.cli([*args, "--diff", os.path.join("diff", n)], self.workdir)
                m = WOULD_RE.search(derr + dout)
                r.diff_would_fix = int(m["n"]) if m else 0

    def _read(self, d: str, n: str) -> str:
        with open(os.path.join(self.workdir, d, n), encoding="utf-8", newline="") as fh:
            return fh.read()

    # ------------------------------------------------------------------ main entry
    def run(self, items: list[tuple[str, str]], execute_loops: bool = True) -> list[Record]:
        """``items``: (file name, full corpus-format text)."""
        _outcome_cache.clear()
        records: dict[str, Record] = {}
        for name, text in items:
            header = parse_header(text)
            subject, _ = split_subject(text)
            records[name] = Record(name, header, subject)
            for d in ("orig", "safe", "unsafe"):
                with open(os.path.join(self.workdir, d, name), "w", encoding="utf-8", newline="") as fh:
                    fh.write(subject)
        names = list(records)
        for mode in MODES:
            found = self._check(names, unsafe=mode == "unsafe")
            results = {}
            for n in names:
                r = ModeResult(mode, check=found[n], check_fixable=sum(m.fixable for m in found[n]),
                               fixed_text=records[n].subject)
                results[n] = r
                records[n].modes[mode] = r
            fixable = [n for n in names if results[n].check_fixable]
            rest = [n for n in names if not results[n].check_fixable]
            self._fix(mode, fixable, results, batch=False)
            self._fix(mode, rest, results, batch=True)
            for n in names:
                r = results[n]
                r.fixed_text = self._read(mode, n)
                r.changed = r.fixed_text != records[n].subject
                try:
                    compile(r.fixed_text, n, "exec")
                except SyntaxError as exc:
                    r.parses = False
                    r.outcome = Outcome(load_error=f"SyntaxError: {exc.msg} (line {exc.lineno})")
        if execute_loops:
            for name, text in items:
                rec = records[name]
                path = os.path.join(self.workdir, "orig", name)
                rec.original = outcome_of(path, rec.subject, LOOP_NAMES)
                if rec.header.kind == "misuse":
                    rec.expected = outcome_of(path + "::expected", text, EXPECTED_NAMES)
                for mode in MODES:
                    m = rec.modes[mode]
                    if m.changed and m.parses:
                        m.outcome = outcome_of(os.path.join(self.workdir, mode, name), m.fixed_text, LOOP_NAMES)
                rec.violations = evaluate(rec)
        return [records[n] for n, _ in items]


def run_corpus(workdir: str, files: list[str] | None = None, cli=None, execute_loops: bool = True) -> list[Record]:
    files = files or corpus_files()
    items = []
    for f in files:
        with open(f, encoding="utf-8", newline="") as fh:
            items.append((os.path.basename(f), fh.read()))
    return Oracle(workdir, cli).run(items, execute_loops)


def describe(rec: Record) -> str:
    lines = [f"{rec.name} (kind={rec.header.kind}, expected codes={','.join(rec.header.codes) or '-'})",
             f"  findings: {', '.join(m.short() for m in rec.findings) or 'none'}",
             f"  original: {rec.original.summary() if rec.original else '-'}"]
    for mode, m in rec.modes.items():
        lines.append(f"  {mode}: check [*]={m.check_fixable} fix fixed={m.fix_fixed} diff={m.diff_would_fix} "
                     f"changed={m.changed} remaining={[x.short() for x in m.fix_remaining]} "
                     f"outcome={m.outcome.summary() if m.outcome else '-'}")
    for x in rec.violations:
        lines.append(f"  VIOLATION {x}")
    return "\n".join(lines)
