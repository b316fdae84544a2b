"""Issue 11: safe fixes never break code, checked by running them (the corpus oracle).

Every file of ``tests/fixsafety/loops`` is linted and fixed through the CLI (safe fixes, and
separately ``--unsafe-fixes``), and the original, the hand-written ``expected_loop`` and the
fixed loops are run on the runtime harness's seeded problem. ``test_fix_safety[<file>-<mode>]``
fails on every violation of the properties in ``oracle.py``'s docstring, with the full record
of the file in the message. See tests/fixsafety/README.md.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/fixsafety

``AMPLINT_FIXSAFETY_REPORT=/path/records.json`` also writes every record as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import oracle  # noqa: E402  (tests/fixsafety is on sys.path: rootdir conftest, no __init__)

FILES = oracle.corpus_files()
NAMES = [os.path.basename(f) for f in FILES]
DEFECTS = range(1, 11)


def _text(name: str) -> str:
    with open(os.path.join(oracle.LOOPS_DIR, name), encoding="utf-8", newline="") as fh:
        return fh.read()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    work = tmp_path_factory.mktemp("fixsafety-corpus")
    cli = oracle.make_cli(default="server")
    try:
        records = oracle.run_corpus(str(work), cli=cli)
    finally:
        cli.close()
    out = os.environ.get("AMPLINT_FIXSAFETY_REPORT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump([r.as_json() for r in records], fh, indent=1)
    return {r.name: r for r in records}, str(work)


# ------------------------------------------------------------------ the corpus itself


def test_corpus_shape():
    headers = {n: oracle.parse_header(_text(n)) for n in NAMES}
    kinds = [h.kind for h in headers.values()]
    assert len(NAMES) >= 70, len(NAMES)
    assert kinds.count("correct") >= 25, kinds.count("correct")
    covered = {d for h in headers.values() for d in h.defects}
    assert covered >= set(DEFECTS), f"defects without a reproducer: {sorted(set(DEFECTS) - covered)}"
    for n, h in headers.items():
        subject, expected = oracle.split_subject(_text(n))
        assert subject.split("\n", 2)[1].startswith('"""'), f"{n}: no header docstring"
        if h.kind == "misuse":
            assert h.codes, f"{n}: a misuse file names its codes"
            assert "def expected_loop" in expected or "def expected_step" in expected, \
                f"{n}: a misuse file defines expected_loop/expected_step after the marker"
        else:
            assert not expected and not h.codes, f"{n}: a correct file has no expected section and no codes"


def test_corpus_runs(corpus):
    """The corpus is sound: correct loops and every expected loop run without raising."""
    records, _ = corpus
    bad = []
    for r in records.values():
        if r.header.kind == "correct" and r.original.error:
            bad.append(f"{r.name}: correct loop raises: {r.original.error}")
        if r.expected is not None and r.expected.error:
            bad.append(f"{r.name}: expected loop raises: {r.expected.error}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------ the properties


@pytest.mark.parametrize("mode", oracle.MODES)
@pytest.mark.parametrize("name", NAMES)
def test_fix_safety(corpus, name, mode):
    records, _ = corpus
    rec = records[name]
    violations = [v for v in rec.violations if v.mode == mode]
    if violations:
        pytest.fail(f"{len(violations)} violation(s) in {mode} mode\n{oracle.describe(rec)}", pytrace=False)


# ------------------------------------------------------------------ the real entry point, fresh processes


def _fresh(args, cwd):
    p = subprocess.run([sys.executable, "-m", "amplint", *args], cwd=cwd, env=oracle._env(),
                       capture_output=True, text=True, timeout=300)
    return p.stdout, p.stderr


def test_fresh_process_cli_agrees(corpus, tmp_path):
    """`python -m amplint` in fresh processes, on the whole corpus at once, reports the same
    findings and writes the same bytes as the per-file runs the oracle made (so the oracle's
    long-lived CLI process is the real CLI). Also: the aggregate summaries add up."""
    records, work = corpus
    for d in ("orig", "safe", "unsafe"):
        shutil.copytree(os.path.join(work, "orig"), tmp_path / d)
    names = sorted(records)
    problems = []
    for mode in oracle.MODES:
        unsafe = ["--unsafe-fixes"] if mode == "unsafe" else []
        out, _ = _fresh(["check", *oracle.COMMON_ARGS, *unsafe, "orig"], str(tmp_path))
        by = oracle.parse_messages(out)
        total_fixable = 0
        for n in names:
            got = [m.short() for m in by.get(os.path.join("orig", n), [])]
            want = [m.short() for m in records[n].modes[mode].check]
            total_fixable += records[n].modes[mode].check_fixable
            if got != want:
                problems.append(f"{mode} check {n}: fresh {got} vs oracle {want}")
        if oracle.parse_fixable_summary(out) != total_fixable:
            problems.append(f"{mode} check: summary says {oracle.parse_fixable_summary(out)} fixable, "
                            f"per-file [*] markers add up to {total_fixable}")
        out, _ = _fresh(["fix", *oracle.COMMON_ARGS, *unsafe, mode], str(tmp_path))
        per_file = sum(records[n].modes[mode].fix_fixed for n in names)
        if oracle.parse_fixed(out) != per_file:
            problems.append(f"{mode} fix: fresh run over the corpus fixed {oracle.parse_fixed(out)}, "
                            f"per-file runs fixed {per_file}")
        for n in names:
            with open(tmp_path / mode / n, encoding="utf-8", newline="") as fh:
                if fh.read() != records[n].modes[mode].fixed_text:
                    problems.append(f"{mode} fix {n}: fresh process wrote different bytes")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ defect 10: how files are written

WRITE_FILES = [n for n in NAMES if oracle.parse_header(_text(n)).write]


@pytest.mark.parametrize("name", WRITE_FILES)
def test_fix_writes_through_hard_links(name, tmp_path):
    if "hardlink" not in oracle.parse_header(_text(name)).write:
        pytest.skip("not a hard-link case")
    subject, _ = oracle.split_subject(_text(name))
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(subject, encoding="utf-8", newline="")
    os.link(a, b)
    _fresh(["fix", *oracle.COMMON_ARGS, "a.py"], str(tmp_path))
    new_a, new_b = a.read_text(encoding="utf-8"), b.read_text(encoding="utf-8")
    assert new_a != subject, "the file was not fixed at all"
    assert os.stat(a).st_ino == os.stat(b).st_ino and os.stat(a).st_nlink == 2, \
        "fixing one name of a hard-linked file replaced its inode: the other name keeps the old text"
    assert new_b == new_a


@pytest.mark.parametrize("name", WRITE_FILES)
def test_fix_leaves_read_only_files(name, tmp_path):
    if "readonly" not in oracle.parse_header(_text(name)).write:
        pytest.skip("not a read-only case")
    subject, _ = oracle.split_subject(_text(name))
    a = tmp_path / "ro.py"
    a.write_text(subject, encoding="utf-8", newline="")
    os.chmod(a, 0o444)
    before = os.stat(a)
    try:
        out, err = _fresh(["fix", *oracle.COMMON_ARGS, "ro.py"], str(tmp_path))
        after = os.stat(a)
        text = a.read_text(encoding="utf-8")
    finally:
        os.chmod(a, 0o644)
    assert text == subject, "a file with mode 0444 was rewritten"
    assert stat.S_IMODE(after.st_mode) == 0o444 and (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    report = out + err
    assert "E902" in report and "read-only" in report.lower(), \
        f"a read-only file must be reported as E902 (read-only, not fixed); got:\n{report}"


# ------------------------------------------------------------------ the oracle itself


def test_oracle_runs_are_isolated():
    """A loop that leaves autocast entered (as a timeout inside ``autocast.__exit__`` does) must
    not change the next run's numbers: the oracle restores torch's global state after each run."""
    import torch

    from amplint.runtime import reference

    def leaky(model, batches, loss_fn, optimizer, scaler, *, device_type, dtype):
        torch.autocast(device_type, dtype=torch.float16).__enter__()
        with torch.autocast(device_type, dtype=dtype):
            model(batches[0][0])
        raise RuntimeError("left autocast entered")

    before = oracle.execute(reference.train_loop, "loop")
    assert oracle.execute(leaky, "loop").error
    after = oracle.execute(reference.train_loop, "loop")
    assert not torch.is_autocast_enabled("cpu")
    assert after.differs(before) is None, after.differs(before)
