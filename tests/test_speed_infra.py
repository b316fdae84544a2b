"""Speed infrastructure (issue 8): cache correctness, parallel determinism, lazy imports,
the discovery fast path and the pre-screen. Behaviour only; nothing here is timed."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amplint import cache as cache_mod
from amplint import runner
from amplint.cache import Cache
from amplint.discover import _FastSpec
from amplint_testutil import screen_variants

BAD = textwrap.dedent(
    """\
    import torch

    def train(model, loader, optimizer):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                loss = model(x, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
    """
)
PLAIN = "def add(a, b):\n    return a + b\n"


def amplint(*args, cwd, check=False):
    p = subprocess.run(
        [sys.executable, "-m", "amplint", "check", "--output-format", "concise", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture()
def proj(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.amplint]\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for i in range(6):
        (pkg / f"bad{i}.py").write_text(BAD)
        (pkg / f"plain{i}.py").write_text(PLAIN)
    return tmp_path


@pytest.fixture()
def counted(monkeypatch):
    """Record every file the runner actually analyses (serial runs: same process)."""
    seen: list[str] = []
    real = runner._analyze_within  # screen + parse + model + rules of one file's bytes

    def spy(data, path, timeout):
        seen.append(os.path.basename(path))
        return real(data, path, timeout)

    monkeypatch.setattr(runner, "_analyze_within", spy)
    return seen


def _files(proj):
    return sorted(str(p) for p in (proj / "pkg").glob("*.py"))


def _summary(results):
    return [(r.path, [(d.code, d.row, d.col) for d in r.diagnostics], [e.code for e in r.errors]) for r in results]


# ---------------------------------------------------------------------------- cache


def test_warm_run_reuses_results_and_reanalyses_only_changed_files(proj, counted, tmp_path):
    files = _files(proj)
    cdir = str(tmp_path / "cache")
    cold = runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert len(counted) == len(files)
    counted.clear()
    warm = runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert counted == []
    assert _summary(warm) == _summary(cold)
    assert any(r.diagnostics for r in warm)

    changed = proj / "pkg" / "bad0.py"
    changed.write_text(BAD.replace("scaler.step(optimizer)", "scaler.step(optimizer)\n            scaler.update()"))
    st = changed.stat()
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third = runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert counted == ["bad0.py"]
    assert dict((r.path, r.diagnostics) for r in third)[str(changed)] == []


def test_touched_but_unchanged_file_is_not_reanalysed(proj, counted, tmp_path):
    files = _files(proj)
    cdir = str(tmp_path / "cache")
    runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    counted.clear()
    p = proj / "pkg" / "bad1.py"
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))  # same bytes, new mtime
    runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert counted == []  # the content hash matched


def test_settings_and_version_invalidate(proj, counted, tmp_path, monkeypatch):
    files = _files(proj)
    cdir = str(tmp_path / "cache")
    runner.run(files, Cache(cdir, str(proj), "torch=2.4;preview=False"), jobs=1)
    counted.clear()
    runner.run(files, Cache(cdir, str(proj), "torch=2.1;preview=False"), jobs=1)
    assert len(counted) == len(files)
    counted.clear()
    monkeypatch.setattr(cache_mod, "__version__", "999.0")
    c = Cache(cdir, str(proj), "torch=2.4;preview=False")
    assert os.path.basename(c.dir) == "999.0"
    runner.run(files, c, jobs=1)
    assert len(counted) == len(files)


def test_corrupt_cache_file_is_ignored(proj, tmp_path, counted):
    files = _files(proj)
    cdir = str(tmp_path / "cache")
    c = Cache(cdir, str(proj), "fp")
    runner.run(files, c, jobs=1)
    Path(c.path).write_bytes(b"\x80\x04garbage")
    counted.clear()
    again = runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert len(counted) == len(files) and any(r.diagnostics for r in again)


def test_cache_of_another_summary_layout_is_dropped(proj, tmp_path, counted):
    """A cache written by a build whose summaries had other fields (same version string,
    a developer's checkout) is not read back into this build's summaries: it is dropped and
    every file analysed again."""
    from amplint.model.summary import FuncSummary

    files = _files(proj)
    cdir = str(tmp_path / "cache")
    c = Cache(cdir, str(proj), "fp")
    runner.run(files, c, jobs=1)
    class Stale:  # pickles as a FuncSummary whose state has fewer fields than this build's
        def __reduce__(self):
            return (object.__new__, (FuncSummary,), ("f", ["x"], False))

    stale = Stale()
    with pytest.raises(ValueError):
        pickle.loads(pickle.dumps(stale))
    data = pickle.loads(Path(c.path).read_bytes())
    first = next(iter(data))
    data[first] = (*data[first][:3], stale)
    Path(c.path).write_bytes(pickle.dumps(data))
    counted.clear()
    again = runner.run(files, Cache(cdir, str(proj), "fp"), jobs=1)
    assert len(counted) == len(files) and any(r.diagnostics for r in again)


def test_cli_no_cache_writes_nothing_and_cache_dir_options(proj):
    base = amplint("--no-cache", ".", cwd=proj)
    assert base.returncode == 1 and "AMP001" in base.stdout
    assert not (proj / ".amplint_cache").exists()

    default = amplint(".", cwd=proj)
    assert default.stdout == base.stdout
    assert list((proj / ".amplint_cache").glob("*/*.pickle"))
    assert (proj / ".amplint_cache" / "CACHEDIR.TAG").is_file()

    flag = amplint("--cache-dir", "elsewhere", ".", cwd=proj)
    assert flag.stdout == base.stdout
    assert list((proj / "elsewhere").glob("*/*.pickle"))

    (proj / "pyproject.toml").write_text('[tool.amplint]\ncache-dir = "from-config"\n')
    cfg = amplint(".", cwd=proj)
    assert cfg.stdout == base.stdout
    assert list((proj / "from-config").glob("*/*.pickle"))


def test_concurrent_runs_do_not_corrupt_the_cache(proj, tmp_path):
    for i in range(30):
        (proj / "pkg" / f"more{i}.py").write_text(BAD if i % 2 else PLAIN)
    cdir = str(tmp_path / "shared-cache")
    expected = amplint("--no-cache", ".", cwd=proj).stdout
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "amplint", "check", "--output-format", "concise", "--cache-dir", cdir, "."],
            cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for out, err in outs:
        assert out == expected, err
    pickles = [p for p in Path(cdir).glob("*/*.pickle") if not p.name.startswith("walk-")]
    walks = list(Path(cdir).glob("*/walk-*.pickle"))  # the remembered walk, written atomically too
    assert len(pickles) == 1 and len(walks) == 1 and not list(Path(cdir).glob("*/*.tmp"))
    with open(pickles[0], "rb") as fh:
        assert isinstance(pickle.load(fh), dict)
    with open(walks[0], "rb") as fh:
        assert len(pickle.load(fh)[2]) >= 30
    assert amplint("--cache-dir", cdir, ".", cwd=proj).stdout == expected


# ---------------------------------------------------------------------------- parallel


def test_parallel_output_equals_serial(proj):
    for i in range(40):  # above runner.SERIAL_BELOW, so the pool is used
        (proj / "pkg" / f"extra{i:02d}.py").write_text(BAD if i % 3 else PLAIN)
    assert len(list((proj / "pkg").glob("*.py"))) > runner.SERIAL_BELOW
    for fmt in ("concise", "json"):
        serial = amplint("--no-cache", "-j", "1", "--output-format", fmt, ".", cwd=proj)
        parallel = amplint("--no-cache", "-j", "2", "--output-format", fmt, ".", cwd=proj)
        assert parallel.stdout == serial.stdout
        assert parallel.returncode == serial.returncode == 1


def test_runner_pool_results_in_input_order(proj):
    for i in range(40):
        (proj / "pkg" / f"x{i:02d}.py").write_text(BAD if i % 2 else PLAIN)
    files = sorted(str(p) for p in (proj / "pkg").glob("*.py"))[::-1]
    par = runner.run(files, None, jobs=2)
    ser = runner.run(files, None, jobs=1)
    assert [r.path for r in par] == files
    assert _summary(par) == _summary(ser)


# ---------------------------------------------------------------------------- imports


def test_check_path_imports_neither_torch_nor_libcst(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(BAD)
    probe = textwrap.dedent(
        f"""
        import atexit, sys
        def report():
            heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "libcst", "numpy"))
            sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
        atexit.register(report)
        from amplint.cli import main
        main(["check", "--no-cache", {str(f)!r}])
        """
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr  # findings
    assert "AMP001" in p.stdout
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("HEAVY=")]
    assert line == ["HEAVY="], p.stderr


# ---------------------------------------------------------------------------- discovery


PATTERNS = [
    "build/", "*.pyc", "!keep.pyc", "/docs/_build", "docs/*.py", ".venv", "node_modules/", "*.py[cod]",
    "a/**/b.py", "**/gen_*.py", "!gen_keep.py", "data[0-9]/", "tmp?", "\\#weird.py", "sub/dir/", "*.egg-info/",
    "x/*/y/", "!build/keep/", "logs", "[!a]bc.py",
]
PATHS = [
    "build/", "build/x.py", "src/build/", "src/build/m.py", "a.pyc", "d/keep.pyc", "docs/_build/", "docs/conf.py",
    "docs/sub/conf.py", "pkg/.venv/", ".venv/lib/x.py", "node_modules", "node_modules/", "m.pyo", "a/x/y/b.py",
    "a/b.py", "gen_x.py", "p/gen_keep.py", "data1/", "data1", "datax/", "tmp1", "tmp12", "#weird.py", "sub/dir/",
    "q/sub/dir/", "sub/dir", "z.egg-info/", "x/q/y/", "x/q/r/y/", "build/keep/", "logs/", "p/logs", "xbc.py",
    "abc.py", "a/bc.py", "plain.py", "deep/er/plain.py",
]


@pytest.mark.parametrize("n", range(0, len(PATTERNS) + 1, 3))
def test_fast_spec_equals_pathspec(n):
    lines = PATTERNS[:n] + PATTERNS[n:][::-1][: n // 2]
    ref = pathspec.GitIgnoreSpec.from_lines(lines)
    fast = _FastSpec(lines)
    for path in PATHS:
        assert fast.match(path) == ref.match_file(path), (lines, path)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        parent = path.rstrip("/").rsplit("/", 1)[0] + "/" if "/" in path.rstrip("/") else ""
        anc = fast.ancestors_hit(parent)
        assert fast.match(path, name, path.endswith("/"), anc) == ref.match_file(path), (lines, path)


REAL_LINES = [
    "", "# comment", "   ", "__pycache__/", "*.py[cod]", "*$py.class", "share/python-wheels/", "*.egg-info/", ".coverage.*",
    "*.py,cover", "docs/_build/", "/site", "/build/", "data/*", ".idea/*", "*/.DS_Store", "**/__pycache__/",
    "**/a/b", ".idea/**/workspace.xml", ".idea/**/dataSources/", "wandb/**", "/logs/**", "a/**/b/**/c", "x  ",
    " lead", "!data/.gitkeep", "!/a/b", "[Bb]uild/", "*.sw[po]", "[!a]bc.py", "[^a]x", "tmp?", "db.sqlite3-journal",
    "*~", ".*.swp", "a b", "x*y/", "a/b/*/c/",
]
# pieces of gitignore syntax, valid and not, from which the generated lines are drawn
PIECES = ["a", "b", ".", "-", "_", "0", "$", "~", ",", " ", "*", "?", "/", "**/", "/**", "**", "!", "#", "[", "]",
          "[a-c]", "[!x]", "[^x]", "\\"]


def _check_translation(line):
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    from amplint.discover import _translate

    got = _translate(line)
    if got is None:
        return False  # left to pathspec
    assert got == GitIgnoreSpecPattern.pattern_to_regex(line), line
    return True


def test_gitignore_lines_translated_without_pathspec_equal_pathspecs():
    assert all(_check_translation(ln) for ln in REAL_LINES)
    for left in ("logs/**/", "\\#x", "**.pt", "*", "[a-", "a**b", "**"):
        assert not _check_translation(left), left


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join))
def test_generated_gitignore_lines_translate_as_pathspec_does(line):
    _check_translation(line)


SPEC_PATHS = PATHS + ["data/x.py", "data/.gitkeep", "data/", ".idea/ws.xml", "q/.DS_Store", "a/x/.DS_Store",
                      "wandb/run/f.py", "p/wandb/f.py", "site/", "site/x.py", "a/b/", "a/q/b", "a/q/b/r/c", "m.swp"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PATTERNS + REAL_LINES), min_size=1, max_size=8))
def test_fast_spec_with_translated_lines_equals_pathspec(lines):
    ref = pathspec.GitIgnoreSpec.from_lines(lines)
    fast = _FastSpec(lines)
    for path in SPEC_PATHS:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        parent = path.rstrip("/").rsplit("/", 1)[0] + "/" if "/" in path.rstrip("/") else ""
        assert fast.match(path) == ref.match_file(path), (lines, path)
        assert fast.match(path, name, path.endswith("/"), fast.ancestors_hit(parent)) == ref.match_file(path), (lines, path)


def test_discovery_honours_gitignore_and_excludes(tmp_path):
    from amplint.discover import discover
    from amplint.settings import Settings

    (tmp_path / ".gitignore").write_text("gen/\n*_pb2.py\n!keep_pb2.py\n")
    for rel in ["a.py", "gen/x.py", "m_pb2.py", "keep_pb2.py", "sub/.gitignore", "sub/b.py", "sub/skip.py",
                "venv/x.py", "deep/build/y.py", "deep/z.py"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("skip.py\n" if rel.endswith(".gitignore") else "")
    s = Settings(root=str(tmp_path), extend_exclude=("build",))
    got = sorted(os.path.relpath(f, tmp_path) for f in discover([str(tmp_path)], s).files)
    assert got == ["a.py", "deep/z.py", "keep_pb2.py", "sub/b.py"]


def test_discovery_skips_cache_directories(tmp_path):
    """A directory holding a CACHEDIR.TAG (amplint's own cache under a custom --cache-dir name,
    or any tool's) is never walked: its files are not source and its ``.gitignore`` of ``*``
    would load pathspec for nothing. Given explicitly as the root, it is walked."""
    import sys

    from amplint.discover import discover
    from amplint.settings import Settings

    for rel in ["a.py", "mycache/CACHEDIR.TAG", "mycache/.gitignore", "mycache/x.py", "pkg/b.py"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("*\n" if rel.endswith(".gitignore") else "")
    sys.modules.pop("pathspec", None)
    got = sorted(os.path.relpath(f, tmp_path) for f in discover([str(tmp_path)], Settings(root=str(tmp_path))).files)
    assert got == ["a.py", "pkg/b.py"]
    assert "pathspec" not in sys.modules
    inside = discover([str(tmp_path / "mycache")], Settings(root=str(tmp_path / "mycache"))).files
    assert [os.path.basename(f) for f in inside] == []  # its own .gitignore (`*`) still applies


def test_remembered_walk_follows_every_change_to_the_tree(tmp_path, monkeypatch):
    """A warm run reuses the last walk's file list only while no directory it entered and no
    .gitignore it read has changed; each kind of change below must show in the next run."""
    import time

    from amplint import discover as disc
    from amplint.settings import Settings

    root = tmp_path / "proj"
    for rel in ["a.py", "pkg/b.py", "pkg/deep/c.py", "gen/x.py"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    (root / ".gitignore").write_text("gen/\n")
    memo = str(tmp_path / "cache")
    s = Settings(root=str(root))

    def found():
        return sorted(os.path.relpath(f, root) for f in disc.discover([str(root)], s, memo_dir=memo).files)

    walks = []
    real_walk = disc._walk
    monkeypatch.setattr(disc, "_walk", lambda *a, **k: (walks.append(1), real_walk(*a, **k))[1])

    def settle():  # a change within the same mtime tick as the last walk must still be seen
        time.sleep(0.01)

    assert found() == ["a.py", "pkg/b.py", "pkg/deep/c.py"] and len(walks) > 0
    walks.clear()
    assert found() == ["a.py", "pkg/b.py", "pkg/deep/c.py"] and walks == []  # reused, no walk
    settle()
    (root / "pkg" / "deep" / "new.py").write_text("")  # a file added deep down
    assert found() == ["a.py", "pkg/b.py", "pkg/deep/c.py", "pkg/deep/new.py"]
    settle()
    (root / "pkg" / "b.py").unlink()  # a file removed
    assert found() == ["a.py", "pkg/deep/c.py", "pkg/deep/new.py"]
    settle()
    (root / ".gitignore").write_text("pkg/deep/\n")  # the .gitignore edited in place
    assert found() == ["a.py", "gen/x.py"]
    settle()
    (root / "pkg" / ".gitignore").write_text("*.py\n")  # a new .gitignore
    (root / ".gitignore").write_text("")
    assert found() == ["a.py", "gen/x.py"]
    walks.clear()
    s2 = Settings(root=str(root), extend_exclude=("gen",))  # other settings: another memo
    assert sorted(os.path.relpath(f, root) for f in disc.discover([str(root)], s2, memo_dir=memo).files) == ["a.py"]
    assert walks
    walks.clear()  # without a memo directory (--no-cache) every run walks
    assert sorted(os.path.relpath(f, root) for f in disc.discover([str(root)], s).files) == ["a.py", "gen/x.py"]
    assert walks


def test_remembered_walk_of_several_directories(tmp_path, monkeypatch):
    """`amplint check a/ b/` remembers the walk of both (the perf corpus names four): the same
    paths reuse it, in order and without duplicates; a change under the second directory, or
    other paths, walk again."""
    import time

    from amplint import discover as disc
    from amplint.settings import Settings

    root = tmp_path / "proj"
    for rel in ["a/x.py", "b/y.py", "b/sub/z.py"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    memo = str(tmp_path / "cache")
    s = Settings(root=str(root))
    walks = []
    real_walk = disc._walk
    monkeypatch.setattr(disc, "_walk", lambda *a, **k: (walks.append(1), real_walk(*a, **k))[1])

    def found(*names):
        return [os.path.relpath(f, root) for f in disc.discover([str(root / n) for n in names], s, memo_dir=memo).files]

    first = found("a", "b", "a")
    assert sorted(first) == ["a/x.py", "b/sub/z.py", "b/y.py"] and walks
    walks.clear()
    assert found("a", "b", "a") == first and walks == []  # reused
    time.sleep(0.01)
    (root / "b" / "sub" / "new.py").write_text("")
    assert sorted(found("a", "b", "a")) == ["a/x.py", "b/sub/new.py", "b/sub/z.py", "b/y.py"] and walks
    walks.clear()
    assert found("b") and walks  # other paths: another memo


# ---------------------------------------------------------------------------- screen


SCREEN_NEGATIVE = [
    PLAIN,
    "def step(s, opt):\n    s.step(opt)\n    s.update()\n",
    "class LossScaler:\n    def update_scale(self, overflow):\n        self.scaler = 2.0\n",
    "from apex.normalization import FusedLayerNorm\n",
    "x = 'apex predator'\n",
]


@pytest.mark.parametrize("src", SCREEN_NEGATIVE)
def test_screened_out_files_have_no_findings_when_analysed(src):
    """The screen is an optimisation only: what it rejects, the full analysis finds nothing in."""
    from amplint.analyze import analyze_text
    from amplint.screen import may_contain_amp

    assert not may_contain_amp(src.encode())
    r = analyze_text(src, "x.py")
    assert r.diagnostics == [] and r.errors == []


def test_fixtures_rejected_by_the_screen_have_no_findings():
    """Every fixture passes the screen, so the claim is tested on what the screen does reject:
    each fixture with all but at most two of the screen's tokens renamed. Every variant the
    screen rejects must have no finding when analysed anyway."""
    from amplint.analyze import analyze_text
    from amplint.screen import may_contain_amp

    root = Path(__file__).resolve().parent.parent / "fixtures"
    paths = sorted(p for p in root.rglob("*.py") if "projects" not in p.relative_to(root).parts)
    assert len(paths) >= 20
    checked = with_findings = 0
    for p in paths:
        src = p.read_text(encoding="utf-8")
        assert may_contain_amp(src.encode()), p
        if analyze_text(src, str(p)).diagnostics:
            with_findings += 1
        for label, variant in screen_variants(src):
            if not may_contain_amp(variant.encode()):
                checked += 1
                found = analyze_text(variant, str(p)).diagnostics
                assert found == [], (p, label, [(d.code, d.row) for d in found])
    # the rule fixtures (one per rule) have findings; the screen rejected variants of each
    assert with_findings >= 17
    assert checked >= 10 * len(paths), checked


GRADSCALER_ONLY = textwrap.dedent(
    """\
    import torch

    scaler = torch.GradScaler("cuda")
    for x, y in loader:
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    """
)


def test_a_file_whose_only_amp_token_is_gradscaler_is_analysed(tmp_path):
    """`scaler = torch.GradScaler("cuda")` without autocast or `torch.amp`: only the
    `GradScaler` token lets the file through the screen; its AMP001 must be reported."""
    from amplint.screen import may_contain_amp

    src = GRADSCALER_ONLY
    assert "autocast" not in src and "torch.amp" not in src and "amp" not in src.replace("GradScaler", "")
    assert may_contain_amp(src.encode())
    f = tmp_path / "train.py"
    f.write_text(src)
    # in process, through the runner (screen included)
    (res,) = runner.run([str(f)], None, jobs=1)
    assert [(d.code, d.row) for d in res.diagnostics] == [("AMP001", 7)]


@pytest.mark.parametrize(
    "src",
    [
        # `torch.amp` and a scaler name (the model takes `scaler` for a GradScaler in a torch AMP file)
        "import torch.amp\n\n\ndef train(model, loader, opt, scaler):\n    for x in loader:\n"
        "        scaler.scale(model(x)).backward()\n        scaler.step(opt)\n",
        # `autocast` and a scaler name, no `backward`
        "import torch\n\n\ndef train(model, loader, opt, scaler):\n    for x in loader:\n"
        "        with torch.autocast(\"cuda\"):\n            loss = model(x)\n        scaler.step(opt)\n",
    ],
    ids=["torch.amp+scaler", "autocast+scaler"],
)
def test_a_scaler_name_with_a_torch_amp_mention_passes_the_screen(src):
    from amplint.analyze import analyze_bytes
    from amplint.screen import may_contain_amp

    assert "GradScaler" not in src
    assert may_contain_amp(src.encode())
    assert [d.code for d in analyze_bytes(src.encode(), "t.py").diagnostics] == ["AMP001"]


def test_a_file_whose_only_amp_token_is_gradscaler_through_the_cli(tmp_path):
    (tmp_path / "train.py").write_text(GRADSCALER_ONLY)
    p = amplint("--no-cache", "train.py", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stdout.splitlines()[0].startswith("train.py:7:5: AMP001")


def test_a_run_reads_the_working_directory_once_and_the_next_run_reads_it_again(tmp_path, monkeypatch, capsys):
    """Within one run the working directory is pinned (no getcwd per path); two runs in one
    process from different directories each show paths relative to their own."""
    from amplint import fspath
    from amplint.cli import main

    for d in ("a", "b"):
        (tmp_path / d / "pkg").mkdir(parents=True)
        (tmp_path / d / "pkg" / "train.py").write_text(BAD)
        for i in range(30):
            (tmp_path / d / "pkg" / f"m{i}.py").write_text(PLAIN)
    monkeypatch.setattr(fspath.os, "getcwd", _counting(fspath.os.getcwd, calls := []))
    for d in ("a", "b"):
        monkeypatch.chdir(tmp_path / d)
        calls.clear()
        with pytest.raises(SystemExit):
            main(["check", "--no-cache", "--output-format", "concise", "."])
        out = capsys.readouterr().out
        assert "pkg/train.py:" in out and str(tmp_path) not in out, out
        assert len(calls) < 20, len(calls)  # not one per path
        with fspath.pinned_cwd():
            assert fspath.absolute("x.py") == os.path.join(str(tmp_path / d), "x.py")
        assert fspath._PINNED is None


def _counting(fn, calls):
    def wrapped():
        calls.append(1)
        return fn()
    return wrapped


# ------------------------------------------- hand-read patterns equal the regexes they replace
# (start-up: compiling these regexes cost more than reading the few strings they were used on)

_FORMER_INNER = r"(?:\\[^A-Za-z0-9]|[^\\\[\]().*+?{}|^$/]|\[\^/\]\*?|\[(?!\^)[^\]/\\]*\])+"
_FORMER_LITERAL = r"(?:\\[^A-Za-z0-9]|[^\\\[\]().*+?{}|^$/])+"
_FORMER_SIMPLE = r"(?!\.\.?/?$)[A-Za-z0-9_.][A-Za-z0-9_.\-]*/?"
INNER_PIECES = ["a", "Z", "0", "_", ".", "-", "/", "\\", "\\.", "\\-", "\\a", "\\\n", "\n", "[", "]", "^", "*", "?",
                "[^/]", "[^/]*", "[a-c]", "[^x]", "[x/]", "(", "$", "é", "\\é", "b"]


def _former_inner(inner):
    import re

    if not (inner and re.fullmatch(_FORMER_INNER, inner)):
        return None
    return re.sub(r"\\(.)", r"\1", inner) if re.fullmatch(_FORMER_LITERAL, inner) else True


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(INNER_PIECES), min_size=0, max_size=6).map("".join))
def test_discovery_reads_a_pattern_as_its_former_regexes_did(text):
    import re

    from amplint.discover import _inner, _simple

    assert _inner(text) == _former_inner(text), text
    assert _simple(text) == bool(re.fullmatch(_FORMER_SIMPLE, text)), text
    assert _simple(text + "/") == bool(re.fullmatch(_FORMER_SIMPLE, text + "/")), text


def _former_literals(pat):
    import re

    alt_part = r"(\\b)?((?:\\[^A-Za-z0-9]|\[[A-Za-z0-9_]+\]|[^\\\[\]().*+?{}|^$])+)(\\b)?"
    out = []
    body, outer = pat, (False, False)
    grouped = re.fullmatch(r"\\b\(\?:(.*)\)\\b", pat)
    if grouped and "(" not in grouped.group(1) and ")" not in grouped.group(1):
        body, outer = grouped.group(1), (True, True)
    for alt in body.split("|"):
        mt = re.fullmatch(alt_part, alt)
        if mt is None or not alt:
            return None
        words = [""]
        for piece in re.findall(r"\\.|\[[A-Za-z0-9_]+\]|.", mt.group(2)):
            if piece.startswith("["):
                words = [w + c for w in words for c in dict.fromkeys(piece[1:-1])]
            else:
                words = [w + piece[-1] for w in words]
        out.extend((w, bool(mt.group(1)) or outer[0], bool(mt.group(3)) or outer[1]) for w in words)
    return out


TOKEN_PIECES = ["a", "x", "_", "0", "\\b", "\\.", "\\(", "\\\\", "\\d", "\\\n", "\n", "[sS]", "[ab_]", "[a-b]", "[]",
                "[", "]", "|", "(", ")", "(?:", "\\b(?:", ")\\b", ".", "*", "é", "b"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(TOKEN_PIECES), min_size=0, max_size=7).map("".join))
def test_token_patterns_are_read_as_their_former_regexes_did(pat):
    from amplint import tokens

    tokens._literal_cache.clear()
    assert tokens._literals(pat) == _former_literals(pat), pat


def test_the_check_paths_token_patterns_are_read_as_before():
    from amplint import tokens
    from amplint.tokens import RELEVANT, RELEVANT_WITH_SCALER, SUMMARY_TOKENS

    for pat in (RELEVANT, RELEVANT_WITH_SCALER, SUMMARY_TOKENS):
        tokens._literal_cache.clear()
        assert tokens._literals(pat.pattern) == _former_literals(pat.pattern) is not None
    for pat in (r"\b(?:scaler|grad_scaler)\b", r"\b(?:a\.b|x)\b", r"foo(bar)"):
        assert tokens._literals(pat) == _former_literals(pat)


@pytest.mark.parametrize("data", [b"", b"scaler", b"SCALER", b"sCaLeR_x", b"scale r", b"\xc5\xbfcaler", b"GradScaler"])
def test_the_screens_any_case_scaler_test_is_the_former_regex(data):
    import re

    from amplint.screen import may_contain_amp

    for text in (data, b"x = autocast\n" + data, b"torch.amp " + data):
        assert (b"scaler" in text.lower()) == (re.search(rb"(?i)scaler", text) is not None)
        if text != data:  # with a torch AMP mention, a scaler name in any case lets the file through
            assert may_contain_amp(text) == (re.search(rb"(?i)scaler", text) is not None), text
