"""Deterministic synthetic Python corpus for benchmarking amplint (stdlib only).

Used by ``benchmarks/bench.py synth``. The corpus mixes

* ~10% AMP training code (GradScaler / autocast in many spellings, gradient
  accumulation, clipping with ``unscale_``, helpers receiving the scaler,
  trainer classes holding ``self.scaler``, and some deliberate misuses),
* ~30% model code (``nn.Module`` definitions, no AMP),
* ~60% plain Python (utilities, dataclasses, argparse scripts, pytest tests),

laid out in nested packages, every file 50-2000 lines. The same ``seed`` and
``files`` always produce byte-identical output, on any Python >= 3.10: every
file gets its own ``random.Random`` seeded from a string, and nothing depends
on ``hash()`` or set ordering.

A ``synth_manifest.json`` next to the packages records, per file, its kind and
the misuses planted in it (ground truth for eyeballing amplint's findings).
"""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR_VERSION = 1
MIN_LINES = 50
MAX_LINES = 2000
MANIFEST_NAME = "synth_manifest.json"

NOUNS = [
    "batch", "record", "token", "sample", "config", "cache", "vector", "graph",
    "node", "edge", "layer", "block", "stage", "worker", "queue", "item", "entry",
    "field", "path", "shard", "chunk", "frame", "signal", "metric", "event",
    "session", "client", "request", "payload", "schema", "window", "bucket",
    "column", "label", "feature", "span", "ledger", "report", "artifact", "index",
]
VERBS = [
    "load", "parse", "build", "compute", "merge", "split", "filter", "render",
    "encode", "decode", "validate", "normalize", "collect", "flatten", "resolve",
    "update", "fetch", "apply", "transform", "dump", "group", "rank", "scan",
    "sample", "prune", "score", "index", "export", "import_", "sync",
]
ADJS = [
    "fast", "raw", "local", "global", "sparse", "dense", "cached", "lazy",
    "shared", "default", "primary", "nested", "stable", "remote", "partial",
]
DIR_NAMES = [
    "core", "utils", "models", "data", "train", "engine", "io", "ops", "layers",
    "tests", "scripts", "configs", "tools", "metrics", "callbacks", "serving",
    "eval", "experiments", "common", "nn", "pipelines", "datasets", "tasks",
]
PROJECT_NAMES = ["vision", "speech", "textkit", "recsys", "forecast", "rl", "platform", "research"]


def camel(s: str) -> str:
    return "".join(part.capitalize() for part in s.strip("_").split("_"))


class Namer:
    """Unique identifiers within one module."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def unique(self, base: str) -> str:
        name, i = base, 2
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def func(self, prefix: str = "") -> str:
        r = self.rng
        return self.unique(f"{prefix}{r.choice(VERBS).rstrip('_')}_{r.choice(NOUNS)}")

    def cls(self, suffix: str = "") -> str:
        r = self.rng
        return self.unique(camel(r.choice(ADJS)) + camel(r.choice(NOUNS)) + suffix)

    def const(self) -> str:
        r = self.rng
        return self.unique(f"{r.choice(ADJS)}_{r.choice(NOUNS)}_{r.choice(['limit', 'size', 'name', 'ratio', 'count'])}".upper())


class Imports:
    THIRD_PARTY = {"torch", "numpy", "pytest", "yaml"}

    def __init__(self) -> None:
        self.plain: set[str] = set()
        self.froms: dict[str, set[str]] = {}

    def add(self, line: str) -> None:
        self.plain.add(line)

    def frm(self, module: str, *names: str) -> None:
        self.froms.setdefault(module, set()).update(names)

    def render(self) -> list[str]:
        groups: dict[int, list[str]] = {0: [], 1: [], 2: []}
        for line in sorted(self.plain):
            mod = line.split()[1]
            root = mod.split(".")[0]
            groups[1 if root in self.THIRD_PARTY else 0].append(line)
        for mod in sorted(self.froms):
            names = ", ".join(sorted(self.froms[mod]))
            root = mod.split(".")[0]
            if mod == "__future__":
                groups.setdefault(-1, []).append(f"from {mod} import {names}")
                continue
            groups[1 if root in self.THIRD_PARTY else 0].append(f"from {mod} import {names}")
        out: list[str] = []
        for key in sorted(groups):
            if groups[key]:
                # plain "import x" lines first, then "from x import y" (isort-ish)
                lines = sorted(groups[key], key=lambda s: (s.startswith("from"), s))
                out.extend(lines)
                out.append("")
        return out


@dataclass
class Ctx:
    rng: random.Random
    namer: Namer
    imports: Imports = field(default_factory=Imports)
    needs_logger: bool = False
    model_classes: list[str] = field(default_factory=list)
    misuses: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)


def lines_of(text: str) -> list[str]:
    """Split a template (written flush-left) into lines, plus two blank lines."""
    return text.strip("\n").split("\n") + ["", ""]


def indent(lines: list[str], n: int) -> list[str]:
    pad = " " * n
    return [pad + ln if ln else ln for ln in lines]


# --------------------------------------------------------------------------- plain


def blk_util_func(c: Ctx) -> list[str]:
    r = c.rng
    name = c.namer.func()
    arg = r.choice(["items", "values", "records", "rows", "entries"])
    every = r.randint(2, 9)
    prefix = r.choice(["x_", "k:", "tmp-", "p."])
    variant = r.randint(0, 2)
    if variant == 0:
        return lines_of(f'''
def {name}({arg}: list[object], every: int = {every}) -> dict[str, int]:
    """{name.replace("_", " ").capitalize()} and return per-key counts."""
    counts: dict[str, int] = {{}}
    for index, item in enumerate({arg}):
        key = str(item).strip().lower()
        if not key:
            continue
        if index % every == 0:
            key = f"{prefix}{{key}}"
        counts[key] = counts.get(key, 0) + 1
    return counts
''')
    if variant == 1:
        c.imports.add("import math")
        return lines_of(f'''
def {name}({arg}: list[float], scale: float = {r.choice(["1.0", "0.5", "2.0", "10.0"])}) -> list[float]:
    """Normalise {arg} to unit length, then rescale."""
    total = math.sqrt(sum(v * v for v in {arg}))
    if total == 0:
        return [0.0 for _ in {arg}]
    result = []
    for value in {arg}:
        scaled = value / total * scale
        if math.isnan(scaled):
            raise ValueError(f"nan while processing {{value!r}}")
        result.append(round(scaled, {r.randint(2, 6)}))
    return result
''')
    c.imports.frm("typing", "Iterable")
    return lines_of(f'''
def {name}({arg}: Iterable[str], *, sep: str = "{r.choice([",", ";", "|", ":"])}", limit: int | None = None) -> str:
    seen: set[str] = set()
    parts: list[str] = []
    for raw in {arg}:
        token = raw.strip()
        if not token or token in seen:
            continue
        seen.add(token)
        parts.append(token)
        if limit is not None and len(parts) >= limit:
            break
    return sep.join(sorted(parts))
''')


def blk_dataclass(c: Ctx) -> list[str]:
    r = c.rng
    name = c.namer.cls(r.choice(["Config", "Options", "Spec", "Record", "Settings"]))
    c.imports.frm("dataclasses", "dataclass", "asdict", "fields")
    c.imports.frm("typing", "Any")
    pool = [
        ("name", "str", None),
        ("size", "int", str(r.randint(0, 512))),
        ("ratio", "float", repr(round(r.random(), 3))),
        ("enabled", "bool", r.choice(["True", "False"])),
        ("tags", "list[str]", "field(default_factory=list)"),
        ("extra", "dict[str, Any]", "field(default_factory=dict)"),
        ("path", "str", '"."'),
        ("retries", "int", str(r.randint(1, 5))),
        ("timeout_s", "float", repr(float(r.randint(1, 120)))),
    ]
    chosen = [pool[0]] + r.sample(pool[1:], r.randint(2, len(pool) - 1))
    if any(d and d.startswith("field(") for _, _, d in chosen):
        c.imports.frm("dataclasses", "field")
    body = []
    for fname, ftype, default in chosen:
        body.append(f"    {fname}: {ftype}" + (f" = {default}" if default else ""))
    frozen = "(frozen=True)" if r.random() < 0.3 else ""
    text = f'''
@dataclass{frozen}
class {name}:
    """Settings for the {r.choice(NOUNS)} {r.choice(NOUNS)}."""

{chr(10).join(body)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "{name}":
        known = {{f.name for f in fields(cls)}}
        return cls(**{{k: v for k, v in data.items() if k in known}})
'''
    if r.random() < 0.5:
        text += f'''
    def validate(self) -> None:
        if not self.name:
            raise ValueError("{name}.name must be non-empty")
'''
    return lines_of(text)


def blk_enum(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import enum")
    name = c.namer.cls(r.choice(["Kind", "Mode", "State", "Phase"]))
    members = r.sample([a.upper() for a in ADJS], r.randint(3, 6))
    body = "\n".join(f"    {m} = enum.auto()" for m in members)
    return lines_of(f'''
class {name}(enum.Enum):
{body}

    @classmethod
    def parse(cls, text: str) -> "{name}":
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown {name}: {{text!r}}") from None
''')


def blk_contextmanager(c: Ctx) -> list[str]:
    c.imports.frm("contextlib", "contextmanager")
    c.imports.frm("typing", "Iterator")
    c.imports.add("import time")
    c.needs_logger = True
    name = c.namer.unique(f"timed_{c.rng.choice(NOUNS)}")
    return lines_of(f'''
@contextmanager
def {name}(label: str, threshold_s: float = {c.rng.choice(["0.1", "0.5", "1.0"])}) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        if elapsed > threshold_s:
            logger.warning("%s took %.3fs", label, elapsed)
        else:
            logger.debug("%s took %.3fs", label, elapsed)
''')


def blk_generator(c: Ctx) -> list[str]:
    c.imports.frm("typing", "Iterator", "Sequence", "TypeVar")
    c.imports.add("import itertools")
    name = c.namer.unique(f"iter_{c.rng.choice(NOUNS)}_chunks")
    tv = c.namer.unique("T")
    return lines_of(f'''
{tv} = TypeVar("{tv}")


def {name}(seq: Sequence[{tv}], size: int = {c.rng.choice([8, 16, 32, 64, 128])}) -> Iterator[list[{tv}]]:
    if size <= 0:
        raise ValueError("size must be positive")
    it = iter(seq)
    while True:
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield chunk
''')


def blk_hierarchy(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import abc")
    base = c.namer.cls("Base")
    subs = [c.namer.cls(r.choice(["Handler", "Strategy", "Backend", "Sink"])) for _ in range(r.randint(1, 3))]
    text = f'''
class {base}(abc.ABC):
    """Common interface for {r.choice(NOUNS)} handlers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls = 0

    @abc.abstractmethod
    def handle(self, payload: dict) -> dict: ...

    def __call__(self, payload: dict) -> dict:
        self._calls += 1
        return self.handle(payload)
'''
    for i, sub in enumerate(subs):
        key = r.choice(NOUNS)
        text += f'''

class {sub}({base}):
    def handle(self, payload: dict) -> dict:
        out = dict(payload)
        out["{key}"] = out.get("{key}", 0) + {i + 1}
        out["handled_by"] = self.name
        return out
'''
    return lines_of(text)


def blk_decorator(c: Ctx) -> list[str]:
    c.imports.add("import functools")
    c.imports.add("import time")
    name = c.namer.unique(c.rng.choice(["retry", "with_retries", "retrying"]))
    return lines_of(f'''
def {name}(attempts: int = {c.rng.randint(2, 5)}, delay: float = {c.rng.choice(["0.0", "0.01", "0.1"])}, exceptions: tuple[type[BaseException], ...] = (OSError,)):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            last: BaseException | None = None
            for attempt in range(attempts):
                try:
                    return fn(*args, **kwargs)
                except exceptions as exc:
                    last = exc
                    time.sleep(delay * (2 ** attempt))
            assert last is not None
            raise last
        return wrapper
    return decorator
''')


def blk_regex(c: Ctx) -> list[str]:
    c.imports.add("import re")
    const = c.namer.const() + "_RE"
    name = c.namer.func("parse_")
    return lines_of(f'''
{const} = re.compile(r"^(?P<key>[a-z_][a-z0-9_]*)\\s*=\\s*(?P<value>.+?)\\s*$", re.IGNORECASE)


def {name}(text: str) -> dict[str, str]:
    result: dict[str, str] = {{}}
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = {const}.match(line)
        if match is None:
            raise ValueError(f"line {{lineno}}: cannot parse {{line!r}}")
        result[match.group("key")] = match.group("value")
    return result
''')


def blk_io(c: Ctx) -> list[str]:
    c.imports.add("import json")
    c.imports.frm("pathlib", "Path")
    c.imports.frm("typing", "Any")
    rd = c.namer.func("read_")
    wr = c.namer.func("write_")
    return lines_of(f'''
def {rd}(path: str | Path, default: Any = None) -> Any:
    p = Path(path)
    if not p.exists():
        return default
    with p.open(encoding="utf-8") as fh:
        return json.load(fh)


def {wr}(path: str | Path, data: Any, *, indent: int = {c.rng.choice([2, 4])}) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, sort_keys=True), encoding="utf-8")
    tmp.replace(p)
    return p
''')


def blk_protocol(c: Ctx) -> list[str]:
    c.imports.frm("typing", "Protocol", "TypedDict")
    proto = c.namer.cls("Like")
    td = c.namer.cls("Dict")
    return lines_of(f'''
class {proto}(Protocol):
    def read(self, n: int = -1) -> bytes: ...

    def close(self) -> None: ...


class {td}(TypedDict, total=False):
    id: int
    name: str
    score: float
    tags: list[str]
''')


def blk_constants(c: Ctx) -> list[str]:
    r = c.rng
    out = []
    for _ in range(r.randint(3, 8)):
        kind = r.randint(0, 3)
        name = c.namer.const()
        if kind == 0:
            out.append(f"{name} = {r.randint(1, 10_000)}")
        elif kind == 1:
            out.append(f'{name} = "{r.choice(NOUNS)}-{r.choice(ADJS)}"')
        elif kind == 2:
            out.append(f"{name} = {round(r.random() * 10, 4)}")
        else:
            out.append(f"{name} = ({', '.join(repr(n) for n in r.sample(NOUNS, 3))})")
    return out + ["", ""]


def blk_async(c: Ctx) -> list[str]:
    c.imports.add("import asyncio")
    name = c.namer.func("async_")
    return lines_of(f'''
async def {name}(keys: list[str], concurrency: int = {c.rng.choice([2, 4, 8])}) -> dict[str, int]:
    sem = asyncio.Semaphore(concurrency)
    results: dict[str, int] = {{}}

    async def one(key: str) -> None:
        async with sem:
            await asyncio.sleep(0)
            results[key] = len(key)

    await asyncio.gather(*(one(k) for k in keys))
    return results
''')


def blk_match(c: Ctx) -> list[str]:
    name = c.namer.func("dispatch_")
    return lines_of(f'''
def {name}(command: object) -> str:
    match command:
        case {{"op": "add", "value": int(v)}}:
            return f"add {{v}}"
        case {{"op": "remove", "key": str(k)}}:
            return f"remove {{k}}"
        case [first, *rest]:
            return f"seq starting with {{first!r}} (+{{len(rest)}})"
        case str() as s if s.startswith("{c.rng.choice(NOUNS)}"):
            return s.upper()
        case _:
            return "unknown"
''')


def blk_grouping(c: Ctx) -> list[str]:
    c.imports.add("import itertools")
    c.imports.frm("collections", "defaultdict")
    name = c.namer.func("group_")
    return lines_of(f'''
def {name}(rows: list[dict], key: str = "{c.rng.choice(NOUNS)}") -> dict[object, list[dict]]:
    ordered = sorted(rows, key=lambda row: str(row.get(key)))
    grouped: dict[object, list[dict]] = defaultdict(list)
    for group_key, members in itertools.groupby(ordered, key=lambda row: row.get(key)):
        grouped[group_key].extend(members)
    return dict(grouped)
''')


def blk_stateful_class(c: Ctx) -> list[str]:
    r = c.rng
    name = c.namer.cls(r.choice(["Registry", "Pool", "Buffer", "Store", "Tracker"]))
    cap = r.choice([16, 64, 256, 1024])
    return lines_of(f'''
class {name}:
    """A bounded in-memory {r.choice(NOUNS)} store."""

    def __init__(self, capacity: int = {cap}) -> None:
        self._capacity = capacity
        self._items: dict[str, object] = {{}}
        self._hits = 0
        self._misses = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def get(self, key: str, default: object = None) -> object:
        if key in self._items:
            self._hits += 1
            return self._items[key]
        self._misses += 1
        return default

    def put(self, key: str, value: object) -> None:
        if len(self._items) >= self._capacity and key not in self._items:
            oldest = next(iter(self._items))
            del self._items[oldest]
        self._items[key] = value

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __repr__(self) -> str:
        return f"{name}(size={{len(self)}}, hits={{self._hits}}, misses={{self._misses}})"
''')


PLAIN_FILLERS = [
    blk_util_func, blk_util_func, blk_dataclass, blk_enum, blk_contextmanager,
    blk_generator, blk_hierarchy, blk_decorator, blk_regex, blk_io, blk_protocol,
    blk_constants, blk_async, blk_match, blk_grouping, blk_stateful_class,
]


def blk_test_simple(c: Ctx) -> list[str]:
    r = c.rng
    name = c.namer.unique(f"test_{r.choice(VERBS).rstrip('_')}_{r.choice(NOUNS)}")
    n = r.randint(2, 40)
    return lines_of(f'''
def {name}() -> None:
    data = [str(i) for i in range({n})]
    joined = ",".join(data)
    assert joined.count(",") == {n - 1}
    assert sorted(data, key=int)[-1] == "{n - 1}"
''')


def blk_test_param(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import pytest")
    name = c.namer.unique(f"test_{r.choice(VERBS).rstrip('_')}_{r.choice(NOUNS)}_cases")
    cases = ", ".join(f'("{w}", "{w.upper()}")' for w in r.sample(NOUNS, r.randint(2, 6)))
    return lines_of(f'''
@pytest.mark.parametrize(("raw", "expected"), [{cases}])
def {name}(raw: str, expected: str) -> None:
    assert raw.upper() == expected
    assert expected.lower() == raw
''')


def blk_test_fixture(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import pytest")
    c.imports.add("import json")
    fx = c.namer.unique(f"{r.choice(NOUNS)}_file")
    test = c.namer.unique(f"test_roundtrip_{r.choice(NOUNS)}")
    return lines_of(f'''
@pytest.fixture
def {fx}(tmp_path):
    path = tmp_path / "{r.choice(NOUNS)}.json"
    path.write_text(json.dumps({{"a": 1, "b": [1, 2, 3]}}))
    return path


def {test}({fx}) -> None:
    data = json.loads({fx}.read_text())
    assert data["a"] == 1
    assert sum(data["b"]) == 6
''')


def blk_test_class(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import pytest")
    name = c.namer.unique(f"Test{camel(r.choice(NOUNS))}{camel(r.choice(VERBS))}")
    return lines_of(f'''
class {name}:
    def test_empty(self) -> None:
        assert list(reversed([])) == []

    def test_raises(self) -> None:
        with pytest.raises(ZeroDivisionError):
            _ = {r.randint(1, 9)} / 0

    @pytest.mark.parametrize("n", [0, 1, {r.randint(2, 50)}])
    def test_range(self, n: int) -> None:
        assert len(range(n)) == n
''')


TEST_FILLERS = [blk_test_simple, blk_test_param, blk_test_fixture, blk_test_class]


def blk_argparse_main(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import argparse")
    c.imports.add("import sys")
    c.needs_logger = True
    c.imports.add("import logging")
    opts = []
    for _ in range(r.randint(2, 6)):
        flag = c.namer.unique(f"{r.choice(ADJS)}-{r.choice(NOUNS)}")
        kind = r.randint(0, 3)
        if kind == 0:
            opts.append(f'    parser.add_argument("--{flag}", type=int, default={r.randint(0, 100)})')
        elif kind == 1:
            opts.append(f'    parser.add_argument("--{flag}", action="store_true")')
        elif kind == 2:
            opts.append(f'    parser.add_argument("--{flag}", choices=["a", "b", "c"], default="a")')
        else:
            opts.append(f'    parser.add_argument("--{flag}", type=str, nargs="*", default=[])')
    return lines_of(f'''
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="{r.choice(VERBS).rstrip('_')} {r.choice(NOUNS)}s")
    parser.add_argument("inputs", nargs="*", help="input files")
    parser.add_argument("-v", "--verbose", action="count", default=0)
{chr(10).join(opts)}
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    if not args.inputs:
        logger.info("nothing to do")
        return 0
    for name in args.inputs:
        logger.info("processing %s", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
''')


# --------------------------------------------------------------------------- models


def _torch(c: Ctx) -> None:
    c.imports.add("import torch")
    c.imports.add("import torch.nn as nn")


def blk_mlp(c: Ctx) -> list[str]:
    r = c.rng
    _torch(c)
    name = c.namer.cls("MLP")
    c.model_classes.append(name)
    act = r.choice(["nn.GELU()", "nn.ReLU(inplace=True)", "nn.SiLU()", "nn.Tanh()"])
    return lines_of(f'''
class {name}(nn.Module):
    def __init__(self, in_dim: int, hidden: int = {r.choice([128, 256, 512, 1024])}, out_dim: int = {r.choice([10, 100, 1000])}, depth: int = {r.randint(2, 5)}, dropout: float = {r.choice(["0.0", "0.1", "0.2"])}) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        dim = in_dim
        for _ in range(depth - 1):
            layers += [nn.Linear(dim, hidden), {act}, nn.Dropout(dropout)]
            dim = hidden
        layers.append(nn.Linear(dim, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))
''')


def blk_conv(c: Ctx) -> list[str]:
    r = c.rng
    _torch(c)
    name = c.namer.cls("ConvBlock")
    c.model_classes.append(name)
    return lines_of(f'''
class {name}(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, kernel_size: int = {r.choice([1, 3, 5])}, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_ch)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))
''')


def blk_residual(c: Ctx) -> list[str]:
    r = c.rng
    _torch(c)
    c.imports.add("import torch.nn.functional as F")
    name = c.namer.cls("Residual")
    c.model_classes.append(name)
    return lines_of(f'''
class {name}(nn.Module):
    expansion = {r.choice([1, 2, 4])}

    def __init__(self, channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Identity() if stride == 1 else nn.Sequential(
            nn.Conv2d(channels, channels, 1, stride=stride, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))
''')


def blk_attention(c: Ctx) -> list[str]:
    r = c.rng
    _torch(c)
    c.imports.add("import torch.nn.functional as F")
    name = c.namer.cls("Attention")
    c.model_classes.append(name)
    sdpa = r.random() < 0.5
    if sdpa:
        core = """        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)"""
    else:
        c.imports.add("import math")
        core = """        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        weights = F.dropout(weights, p=self.dropout, training=self.training)
        out = weights @ v"""
    return lines_of(f'''
class {name}(nn.Module):
    def __init__(self, dim: int = {r.choice([256, 512, 768])}, heads: int = {r.choice([4, 8, 12])}, dropout: float = 0.1) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError("dim must be divisible by heads")
        self.heads = heads
        self.head_dim = dim // heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
{core}
        out = out.transpose(1, 2).reshape(b, n, d)
        return self.proj(out)
''')


def blk_posenc(c: Ctx) -> list[str]:
    _torch(c)
    c.imports.add("import math")
    name = c.namer.cls("PositionalEncoding")
    c.model_classes.append(name)
    return lines_of(f'''
class {name}(nn.Module):
    def __init__(self, dim: int, max_len: int = {c.rng.choice([512, 1024, 4096])}) -> None:
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[: x.size(1)]
''')


def blk_init_weights(c: Ctx) -> list[str]:
    _torch(c)
    name = c.namer.unique(c.rng.choice(["init_weights", "reset_parameters", "initialize"]))
    return lines_of(f'''
def {name}(module: nn.Module, std: float = {c.rng.choice(["0.02", "0.01"])}) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.Conv2d, nn.Conv1d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
''')


def blk_count_params(c: Ctx) -> list[str]:
    _torch(c)
    name = c.namer.unique("count_parameters")
    return lines_of(f'''
def {name}(model: nn.Module, trainable_only: bool = True) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
''')


def blk_model_factory(c: Ctx) -> list[str]:
    _torch(c)
    name = c.namer.unique(c.rng.choice(["build_model", "create_model", "make_model"]))
    classes = c.model_classes[-3:] or ["nn.Identity"]
    branches = []
    for i, cls in enumerate(classes):
        kw = "if" if i == 0 else "elif"
        branches.append(f'    {kw} name == "{cls.lower()}":\n        return {cls}(**kwargs)')
    return lines_of(f'''
def {name}(name: str, **kwargs) -> nn.Module:
{chr(10).join(branches)}
    raise KeyError(f"unknown model {{name!r}}")
''')


MODEL_BLOCKS = [blk_mlp, blk_conv, blk_residual, blk_attention, blk_posenc]
MODEL_HELPERS = [blk_init_weights, blk_count_params]


# --------------------------------------------------------------------------- AMP

SCALER_CTORS = [
    # (expression, import kind)
    ('torch.amp.GradScaler("cuda")', None),
    ('torch.amp.GradScaler(device="cuda", enabled=use_amp)', None),
    ("torch.amp.GradScaler(init_scale=2.0 ** 14, growth_interval=1000)", None),
    ("torch.cuda.amp.GradScaler()", None),
    ("torch.cuda.amp.GradScaler(enabled=use_amp)", None),
    ("GradScaler()", ("torch.cuda.amp", "GradScaler")),
    ('GradScaler("cuda", enabled=use_amp)', ("torch.amp", "GradScaler")),
    ("amp.GradScaler()", ("torch.cuda", "amp")),
]
AUTOCASTS_FP16 = [
    ('torch.autocast(device_type="cuda", dtype=torch.float16)', None),
    ('torch.autocast("cuda", enabled=use_amp)', None),
    ('torch.amp.autocast("cuda")', None),
    ("torch.cuda.amp.autocast()", None),
    ("torch.cuda.amp.autocast(enabled=use_amp)", None),
    ("autocast(dtype=torch.float16)", ("torch.cuda.amp", "autocast")),
    ('autocast("cuda", dtype=torch.float16)', ("torch.amp", "autocast")),
    ("amp.autocast()", ("torch.cuda", "amp")),
]
AUTOCASTS_BF16 = [
    'torch.autocast(device_type="cuda", dtype=torch.bfloat16)',
    'torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp)',
    'torch.amp.autocast("cuda", dtype=torch.bfloat16)',
]
MISUSES = ["missing_update", "step_bypass", "clip_without_unscale", "backward_unscaled"]


@dataclass
class AmpStyle:
    scaler_ctor: str
    autocast: str
    scaler: str
    opt: str
    model: str
    loader: str
    crit: str
    clip: bool
    accum: bool
    misuse: str | None


def _pick(c: Ctx, options: list[tuple[str, tuple[str, str] | None]]) -> str:
    """Choose a spelling whose import does not clash with a same-named import already made."""
    ok = []
    for expr, imp in options:
        if imp and any(imp[1] in names and mod != imp[0] for mod, names in c.imports.froms.items()):
            continue
        ok.append((expr, imp))
    expr, imp = c.rng.choice(ok)
    if imp:
        c.imports.frm(*imp)
    return expr


def _amp_style(c: Ctx, *, allow_misuse: bool) -> AmpStyle:
    r = c.rng
    c.imports.add("import torch")
    ctor = _pick(c, SCALER_CTORS)
    ac = _pick(c, AUTOCASTS_FP16)
    misuse = None
    if allow_misuse and r.random() < 0.35:
        misuse = r.choice(MISUSES)
    clip = misuse == "clip_without_unscale" or r.random() < 0.45
    style = AmpStyle(
        scaler_ctor=ctor,
        autocast=ac,
        scaler=r.choice(["scaler", "scaler", "grad_scaler", "amp_scaler", "loss_scaler"]),
        opt=r.choice(["optimizer", "optimizer", "opt", "optim"]),
        model=r.choice(["model", "model", "net"]),
        loader=r.choice(["loader", "train_loader", "dataloader"]),
        crit=r.choice(["criterion", "loss_fn"]),
        clip=clip,
        accum=r.random() < 0.35,
        misuse=misuse,
    )
    c.features += [f"scaler:{ctor.split('(')[0]}", f"autocast:{ac.split('(')[0]}"]
    if style.accum:
        c.features.append("grad_accumulation")
    if style.clip:
        c.features.append("clip")
    return style


def _step_lines(s: AmpStyle, S: str, O: str, params: str) -> list[str]:
    """Backward + optimizer step through the scaler (with the planted misuse, if any)."""
    out = []
    if s.misuse == "backward_unscaled":
        out.append("loss.backward()")
    else:
        out.append(f"{S}.scale(loss).backward()")
    tail = []
    if s.clip:
        if s.misuse != "clip_without_unscale":
            tail.append(f"{S}.unscale_({O})")
        tail.append(f"torch.nn.utils.clip_grad_norm_({params}, max_norm)")
    if s.misuse == "step_bypass":
        tail.append(f"{O}.step()")
    else:
        tail.append(f"{S}.step({O})")
    if s.misuse != "missing_update":
        tail.append(f"{S}.update()")
    if s.accum:
        tail.append(f"{O}.zero_grad(set_to_none=True)")
        out.append("if (step + 1) % accum_steps == 0:")
        out += ["    " + t for t in tail]
    else:
        out += tail
    return out


def _forward_lines(s: AmpStyle, M: str, crit: str) -> list[str]:
    loss = f"{crit}(outputs, targets)" + (" / accum_steps" if s.accum else "")
    return [
        f"with {s.autocast}:",
        f"    outputs = {M}(inputs)",
        f"    loss = {loss}",
    ]


def blk_amp_function(c: Ctx, s: AmpStyle, *, scaler_param: bool) -> list[str]:
    """train_one_epoch(...) owning its scaler or receiving it as a parameter."""
    name = c.namer.unique(c.rng.choice(["train_one_epoch", "train_epoch", "run_epoch", "fit_epoch"]))
    params = [f"{s.model}: torch.nn.Module", f"{s.loader}", f"{s.opt}: torch.optim.Optimizer", s.crit]
    if scaler_param:
        params.append(s.scaler)
        c.features.append("scaler_param")
    params += ["device: str = \"cuda\"", "use_amp: bool = True"]
    if s.accum:
        params.append(f"accum_steps: int = {c.rng.choice([2, 4, 8, 16])}")
    if s.clip:
        params.append(f"max_norm: float = {c.rng.choice(['1.0', '0.5', '5.0'])}")
    params.append(f"log_every: int = {c.rng.choice([10, 50, 100])}")
    c.needs_logger = True
    body = [f"{s.model}.train()"]
    if not scaler_param:
        body.append(f"{s.scaler} = {s.scaler_ctor}")
    body += ["running = 0.0"]
    if s.accum:
        body.append(f"{s.opt}.zero_grad(set_to_none=True)")
    body += [f"for step, (inputs, targets) in enumerate({s.loader}):"]
    inner = [
        "inputs = inputs.to(device, non_blocking=True)",
        "targets = targets.to(device, non_blocking=True)",
    ]
    if not s.accum:
        inner.append(f"{s.opt}.zero_grad(set_to_none=True)")
    inner += _forward_lines(s, s.model, s.crit)
    inner += _step_lines(s, s.scaler, s.opt, f"{s.model}.parameters()")
    inner += [
        "running += loss.item()",
        "if step % log_every == 0:",
        f'    logger.info("step %d loss %.4f scale %.1f", step, running / (step + 1), {s.scaler}.get_scale())',
    ]
    body += indent(inner, 4)
    body.append("return running / max(1, len(" + s.loader + "))")
    sig = ",\n    ".join(params)
    return [f"def {name}(\n    {sig},\n) -> float:"] + indent(body, 4) + ["", ""]


def blk_amp_helper(c: Ctx, s: AmpStyle) -> list[str]:
    """A helper that receives the scaler, and a loop that calls it."""
    r = c.rng
    helper = c.namer.unique(r.choice(["backward_step", "optimizer_step", "amp_step", "apply_gradients"]))
    sp = r.choice(["scaler", "grad_scaler", "gs"])
    c.features.append("scaler_helper")
    hs = AmpStyle(**{**s.__dict__, "accum": False})
    hparams = f"loss: torch.Tensor, {s.opt}: torch.optim.Optimizer, {sp}, parameters=None, max_norm: float | None = None"
    step = _step_lines(hs, sp, s.opt, "parameters")
    if hs.clip:
        # clipping is optional in the helper: guard the unscale_/clip lines
        guarded = [ln for ln in step if ln.startswith((f"{sp}.unscale_", "torch.nn.utils.clip_grad_norm_"))]
        first = step.index(guarded[0])
        rest = [ln for ln in step if ln not in guarded]
        step = rest[:first] + ["if max_norm is not None and parameters is not None:"] + ["    " + g for g in guarded] + rest[first:]
    step.append(f"{s.opt}.zero_grad(set_to_none=True)")
    out = [f"def {helper}({hparams}) -> None:"] + indent(step, 4) + ["", ""]
    loop_name = c.namer.unique(r.choice(["train", "train_loop", "fit"]))
    c.needs_logger = True
    call_kw = r.random() < 0.5
    call = (
        f"{helper}(loss, {s.opt}, {sp}={s.scaler}"
        if call_kw
        else f"{helper}(loss, {s.opt}, {s.scaler}"
    )
    if s.clip:
        call += f", parameters={s.model}.parameters(), max_norm=max_norm"
    call += ")"
    body = [
        f"{s.scaler} = {s.scaler_ctor}",
        "for epoch in range(epochs):",
        f"    for step, (inputs, targets) in enumerate({s.loader}):",
        "        inputs, targets = inputs.to(device), targets.to(device)",
    ]
    fwd = AmpStyle(**{**s.__dict__, "accum": False})
    body += indent(_forward_lines(fwd, s.model, s.crit), 8)
    body += ["        " + call, '    logger.info("epoch %d done", epoch)', f"return {s.scaler}.state_dict()"]
    params = f"{s.model}, {s.loader}, {s.opt}, {s.crit}, epochs: int = {r.randint(1, 90)}, device: str = \"cuda\", use_amp: bool = True"
    if s.clip:
        params += ", max_norm: float = 1.0"
    out += [f"def {loop_name}({params}) -> dict:"] + indent(body, 4) + ["", ""]
    return out


def blk_amp_class(c: Ctx, s: AmpStyle) -> list[str]:
    r = c.rng
    name = c.namer.cls("Trainer")
    c.features.append("self_scaler")
    c.needs_logger = True
    S, O, M = "self.scaler", "self.optimizer", "self.model"
    init = [
        f"def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, criterion, use_amp: bool = True, max_norm: float = {r.choice(['1.0', '2.0'])}, accum_steps: int = {r.choice([1, 2, 4])}) -> None:",
        "    self.model = model",
        "    self.optimizer = optimizer",
        "    self.criterion = criterion",
        "    self.use_amp = use_amp",
        "    self.max_norm = max_norm",
        "    self.accum_steps = accum_steps",
        f"    self.scaler = {s.scaler_ctor}",
        "    self.global_step = 0",
        "",
    ]
    step_body = ["inputs, targets = batch"]
    if "use_amp" in s.autocast:
        step_body.append("use_amp = self.use_amp")
    if s.accum:
        step_body += ["accum_steps = self.accum_steps", "step = self.global_step"]
    if s.clip:
        step_body.append("max_norm = self.max_norm")
    step_body += _forward_lines(s, M, "self.criterion")
    step_body += _step_lines(s, S, O, f"{M}.parameters()")
    if not s.accum:
        step_body.append(f"{O}.zero_grad(set_to_none=True)")
    step_body += ["self.global_step += 1", "return loss.detach()"]
    train_step = ["def train_step(self, batch) -> torch.Tensor:"] + indent(step_body, 4) + [""]
    fit = [
        "def fit(self, loader, epochs: int = 1) -> None:",
        "    for epoch in range(epochs):",
        "        self.model.train()",
        "        for batch in loader:",
        "            loss = self.train_step(batch)",
        '        logger.info("epoch %d loss %.4f", epoch, loss.item())',
        "",
        "def state_dict(self) -> dict:",
        "    return {",
        '        "model": self.model.state_dict(),',
        '        "optimizer": self.optimizer.state_dict(),',
        '        "scaler": self.scaler.state_dict(),',
        '        "step": self.global_step,',
        "    }",
        "",
        "def load_state_dict(self, state: dict) -> None:",
        '    self.model.load_state_dict(state["model"])',
        '    self.optimizer.load_state_dict(state["optimizer"])',
        '    self.scaler.load_state_dict(state["scaler"])',
        '    self.global_step = state["step"]',
    ]
    return [f"class {name}:", f'    """Mixed-precision trainer for {r.choice(NOUNS)} models."""', ""] + indent(init + train_step + fit, 4) + ["", ""]


def blk_amp_bf16(c: Ctx) -> list[str]:
    """bf16 autocast: no GradScaler needed (a correct pattern the linter must accept)."""
    r = c.rng
    c.imports.add("import torch")
    name = c.namer.unique(r.choice(["train_bf16", "train_step_bf16", "bf16_step"]))
    ac = r.choice(AUTOCASTS_BF16)
    c.features.append("bf16_no_scaler")
    return lines_of(f'''
def {name}(model, batch, optimizer, criterion, use_amp: bool = True) -> float:
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with {ac}:
        loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()
''')


def blk_amp_eval(c: Ctx) -> list[str]:
    r = c.rng
    c.imports.add("import torch")
    ac = _pick(c, AUTOCASTS_FP16)
    name = c.namer.unique(r.choice(["evaluate", "validate", "run_eval"]))
    return lines_of(f'''
@torch.no_grad()
def {name}(model, loader, device: str = "cuda", use_amp: bool = True) -> float:
    model.eval()
    correct = total = 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        with {ac}:
            logits = model(inputs)
        correct += (logits.argmax(dim=-1) == targets).sum().item()
        total += targets.numel()
    return correct / max(1, total)
''')


def blk_amp_checkpoint(c: Ctx, s: AmpStyle) -> list[str]:
    c.imports.add("import torch")
    save = c.namer.unique("save_checkpoint")
    load = c.namer.unique("load_checkpoint")
    return lines_of(f'''
def {save}(path, {s.model}, {s.opt}, {s.scaler}, epoch: int) -> None:
    torch.save(
        {{
            "model": {s.model}.state_dict(),
            "optimizer": {s.opt}.state_dict(),
            "scaler": {s.scaler}.state_dict(),
            "epoch": epoch,
        }},
        path,
    )


def {load}(path, {s.model}, {s.opt}, {s.scaler}) -> int:
    state = torch.load(path, map_location="cpu")
    {s.model}.load_state_dict(state["model"])
    {s.opt}.load_state_dict(state["optimizer"])
    if "scaler" in state:
        {s.scaler}.load_state_dict(state["scaler"])
    return state.get("epoch", 0)
''')


def blk_amp_main(c: Ctx, s: AmpStyle, train_fn: str | None) -> list[str]:
    """A main() that builds model/optimizer/scaler and calls a train function taking the scaler."""
    r = c.rng
    c.imports.add("import argparse")
    c.imports.add("import torch")
    opt = r.choice(["torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)", "torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)", "torch.optim.Adam(model.parameters(), lr=args.lr)"])
    use_amp_line = "    use_amp = args.amp\n" if "use_amp" in s.scaler_ctor else ""
    call = f"        {train_fn}(model, loader, optimizer, criterion, scaler, device=args.device, use_amp=args.amp)" if train_fn else "        pass"
    return lines_of(f'''
def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default={r.randint(1, 300)})
    parser.add_argument("--lr", type=float, default={r.choice(["1e-3", "3e-4", "0.1"])})
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
{use_amp_line}    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear({r.choice([10, 100, 1000])})).to(args.device)
    optimizer = {opt}
    criterion = torch.nn.CrossEntropyLoss()
    scaler = {s.scaler_ctor}
    loader = []
    for epoch in range(args.epochs):
{call}


if __name__ == "__main__":
    main()
''')


# --------------------------------------------------------------------------- files


def target_lines(rng: random.Random, kind: str) -> int:
    mu = {"amp": math.log(420), "model": math.log(260), "plain": math.log(170)}[kind]
    n = int(rng.lognormvariate(mu, 0.85))
    return max(MIN_LINES, min(MAX_LINES - 60, n))


def _assemble(c: Ctx, doc: str, head: list[list[str]], fixed: list[list[str]], fillers, target: int) -> str:
    used = sum(len(b) for b in head) + sum(len(b) for b in fixed) + 14
    filler: list[list[str]] = []
    while used < target:
        b = c.rng.choice(fillers)(c)
        if used + len(b) > MAX_LINES - 20:
            break
        filler.append(b)
        used += len(b)
    if c.rng.random() < 0.08:
        c.imports.add("import warnings")  # an unused import, as real code has
    if c.needs_logger:
        c.imports.add("import logging")
    out = [f'"""{doc}"""', ""] + c.imports.render()
    if c.needs_logger:
        out += ["logger = logging.getLogger(__name__)", ""]
    out.append("")
    for b in head + filler + fixed:
        out += b
    while out and out[-1] == "":
        out.pop()
    text = "\n".join(out) + "\n"
    # pad tiny modules (e.g. __init__.py) up to the minimum size
    n = text.count("\n")
    if n < MIN_LINES:
        pad = [f"{c.namer.const()} = {i}" for i in range(MIN_LINES - n)]
        text += "\n\n" + "\n".join(pad) + "\n"
    return text


def gen_plain(c: Ctx, subkind: str, target: int) -> str:
    r = c.rng
    if subkind == "test":
        return _assemble(c, f"Tests for the {r.choice(NOUNS)} {r.choice(VERBS).rstrip('_')} helpers.", [], [], TEST_FILLERS, target)
    if subkind == "script":
        fixed = [blk_argparse_main(c)]
        return _assemble(c, f"Command-line tool: {r.choice(VERBS).rstrip('_')} {r.choice(NOUNS)} files.", [], fixed, PLAIN_FILLERS, target)
    if subkind == "config":
        head = [blk_dataclass(c) for _ in range(r.randint(1, 3))]
        return _assemble(c, "Configuration objects.", head, [], [blk_dataclass, blk_enum, blk_constants, blk_io], target)
    return _assemble(c, f"Utilities for {r.choice(NOUNS)} {r.choice(NOUNS)} handling.", [], [], PLAIN_FILLERS, target)


def gen_model(c: Ctx, target: int) -> str:
    r = c.rng
    c.imports.frm("__future__", "annotations")
    head = [r.choice(MODEL_BLOCKS)(c) for _ in range(r.randint(1, 3))]
    fixed = [blk(c) for blk in r.sample(MODEL_HELPERS, r.randint(0, 2))] + [blk_model_factory(c)]

    def filler(cc: Ctx) -> list[str]:
        return cc.rng.choice(MODEL_BLOCKS + MODEL_BLOCKS + PLAIN_FILLERS[:6])(cc)

    return _assemble(c, f"{camel(r.choice(NOUNS))} network definitions.", head, fixed, [filler], target)


def gen_amp(c: Ctx, target: int) -> str:
    r = c.rng
    head = [r.choice(MODEL_BLOCKS)(c) for _ in range(r.randint(0, 2))]
    variant = r.choice(["local", "param", "helper", "class", "class", "local"])
    s = _amp_style(c, allow_misuse=True)
    if s.misuse:
        c.misuses.append(s.misuse)
    c.features.append(f"ownership:{variant}")
    fixed: list[list[str]] = []
    if variant == "local":
        fixed.append(blk_amp_function(c, s, scaler_param=False))
    elif variant == "param":
        fn = blk_amp_function(c, s, scaler_param=True)
        fixed.append(fn)
        fixed.append(blk_amp_main(c, s, fn[0].split("(")[0][4:]))
    elif variant == "helper":
        fixed.append(blk_amp_helper(c, s))
    else:
        fixed.append(blk_amp_class(c, s))
    if r.random() < 0.5:
        fixed.append(blk_amp_eval(c))
    if r.random() < 0.4:
        fixed.append(blk_amp_checkpoint(c, s))
    if r.random() < 0.25:
        fixed.append(blk_amp_bf16(c))
    if r.random() < 0.2:
        # a second, independent loop in the same file (always correct)
        s2 = _amp_style(c, allow_misuse=False)
        fixed.append(blk_amp_function(c, s2, scaler_param=False))

    def filler(cc: Ctx) -> list[str]:
        return cc.rng.choice(PLAIN_FILLERS + MODEL_BLOCKS)(cc)

    return _assemble(c, f"Mixed-precision training for the {r.choice(NOUNS)} {r.choice(NOUNS)} model.", head, fixed, [filler], target)


@dataclass
class Plan:
    path: str
    kind: str
    subkind: str


def _layout(seed: int, n_files: int) -> list[Plan]:
    rng = random.Random(f"amplint-synth:{GENERATOR_VERSION}:{seed}:layout:{n_files}")
    n_amp = round(n_files * 0.10)
    n_model = round(n_files * 0.30)
    if n_files >= 2:
        n_amp = max(1, n_amp)
    n_plain = n_files - n_amp - n_model
    # package directories: a forest of nested packages
    n_dirs = max(1, min(n_plain, n_files // 12))
    n_roots = max(1, min(len(PROJECT_NAMES), n_dirs // 25 + 1))
    dirs: list[tuple[str, int]] = []  # (relpath, depth)
    for name in rng.sample(PROJECT_NAMES, n_roots):
        dirs.append((name, 0))
    while len(dirs) < n_dirs:
        parent, depth = rng.choice([d for d in dirs if d[1] < 4])
        name = rng.choice(DIR_NAMES)
        existing = {d[0] for d in dirs}
        cand, i = f"{parent}/{name}", 2
        while cand in existing:
            cand = f"{parent}/{name}{i}"
            i += 1
        dirs.append((cand, depth + 1))
    dirs = dirs[:n_dirs]
    # every package gets an __init__.py that is one of the plain files
    plans: list[Plan] = [Plan(f"{d}/__init__.py", "plain", "util") for d, _ in dirs]
    remaining = ["amp"] * n_amp + ["model"] * n_model + ["plain"] * (n_plain - len(dirs))
    rng.shuffle(remaining)
    taken = {p.path for p in plans}
    dir_names = [d for d, _ in dirs]
    test_dirs = [d for d in dir_names if d.rsplit("/", 1)[-1].startswith("tests")] or dir_names
    train_dirs = [d for d in dir_names if d.rsplit("/", 1)[-1].startswith(("train", "engine", "experiments", "tasks"))] or dir_names
    model_dirs = [d for d in dir_names if d.rsplit("/", 1)[-1].startswith(("models", "nn", "layers"))] or dir_names
    for kind in remaining:
        if kind == "amp":
            subkind = "train"
            d = rng.choice(train_dirs) if rng.random() < 0.6 else rng.choice(dir_names)
            base = rng.choice(["train", "trainer", "finetune", "pretrain", "loop", "engine"]) + rng.choice(["", f"_{rng.choice(NOUNS)}"])
        elif kind == "model":
            subkind = "model"
            d = rng.choice(model_dirs) if rng.random() < 0.6 else rng.choice(dir_names)
            base = rng.choice([f"{rng.choice(NOUNS)}_model", "layers", "blocks", f"{rng.choice(ADJS)}_net", "heads", "backbone"])
        else:
            subkind = rng.choices(["util", "test", "script", "config"], weights=[50, 25, 12, 13])[0]
            if subkind == "test":
                d = rng.choice(test_dirs) if rng.random() < 0.7 else rng.choice(dir_names)
                base = f"test_{rng.choice(VERBS).rstrip('_')}_{rng.choice(NOUNS)}"
            elif subkind == "script":
                d = rng.choice(dir_names)
                base = rng.choice(["cli", "main", f"{rng.choice(VERBS).rstrip('_')}_{rng.choice(NOUNS)}s"])
            elif subkind == "config":
                d = rng.choice(dir_names)
                base = rng.choice(["config", "settings", "options", f"{rng.choice(NOUNS)}_config"])
            else:
                d = rng.choice(dir_names)
                base = f"{rng.choice(VERBS).rstrip('_')}_{rng.choice(NOUNS)}"
        path, i = f"{d}/{base}.py", 2
        while path in taken:
            path = f"{d}/{base}_{i}.py"
            i += 1
        taken.add(path)
        plans.append(Plan(path, kind, subkind))
    return plans


def generate_file(seed: int, index: int, plan: Plan) -> tuple[str, Ctx]:
    rng = random.Random(f"amplint-synth:{GENERATOR_VERSION}:{seed}:file:{index}:{plan.path}")
    c = Ctx(rng=rng, namer=Namer(rng))
    target = target_lines(rng, plan.kind)
    if plan.path.endswith("__init__.py"):
        target = MIN_LINES + rng.randint(0, 40)
    if plan.kind == "amp":
        text = gen_amp(c, target)
    elif plan.kind == "model":
        text = gen_model(c, target)
    else:
        text = gen_plain(c, plan.subkind, target)
    return text, c


def synthesize(out: Path, n_files: int, seed: int, force: bool = False) -> dict:
    if n_files < 1:
        raise ValueError("--files must be >= 1")
    if out.exists() and any(out.iterdir()):
        if not force and not (out / MANIFEST_NAME).exists():
            raise FileExistsError(f"{out} exists and is not an amplint synthetic corpus (use --force to overwrite)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    plans = _layout(seed, n_files)
    manifest = {"generator_version": GENERATOR_VERSION, "seed": seed, "files": n_files, "entries": []}
    for i, plan in enumerate(plans):
        text, c = generate_file(seed, i, plan)
        p = out / plan.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8", newline="\n")
        manifest["entries"].append({
            "path": plan.path,
            "kind": plan.kind,
            "subkind": plan.subkind,
            "lines": text.count("\n"),
            "misuses": c.misuses,
            "features": sorted(set(c.features)),
        })
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def verify(out: Path, manifest: dict) -> list[str]:
    """Compile every generated file; check sizes. Returns a list of problems."""
    problems = []
    for e in manifest["entries"]:
        p = out / e["path"]
        src = p.read_text(encoding="utf-8")
        try:
            compile(src, str(p), "exec", dont_inherit=True)
        except SyntaxError as exc:
            problems.append(f"{e['path']}:{exc.lineno}: {exc.msg}")
        n = src.count("\n")
        if not MIN_LINES <= n <= MAX_LINES:
            problems.append(f"{e['path']}: {n} lines (outside {MIN_LINES}-{MAX_LINES})")
    n_py = sum(1 for _ in out.rglob("*.py"))
    if n_py != manifest["files"]:
        problems.append(f"expected {manifest['files']} .py files, found {n_py}")
    return problems


def summary(manifest: dict) -> str:
    from collections import Counter
    es = manifest["entries"]
    kinds = Counter(e["kind"] for e in es)
    subs = Counter(e["subkind"] for e in es if e["kind"] == "plain")
    lines = sorted(e["lines"] for e in es)
    mis = Counter(m for e in es for m in e["misuses"])
    dirs = {e["path"].rsplit("/", 1)[0] for e in es}
    depth = max(d.count("/") + 1 for d in dirs)
    return "\n".join([
        f"files: {len(es)}  ({', '.join(f'{k}={kinds[k]}' for k in ('amp', 'model', 'plain'))}; plain: {dict(sorted(subs.items()))})",
        f"packages: {len(dirs)} (max depth {depth})",
        f"lines: total={sum(lines)} min={lines[0]} median={lines[len(lines) // 2]} max={lines[-1]}",
        f"planted misuses: {dict(sorted(mis.items())) or 'none'} in {sum(1 for e in es if e['misuses'])} files",
    ])
