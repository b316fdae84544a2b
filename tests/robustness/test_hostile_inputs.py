"""Hostile trees through the real entry point: every file gets a per-file message, the other
files are still checked, every output format carries the entries, exit codes stay 0/1/2."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from hostile_tree import build
from robustness_util import FORMATS, HUMAN, entries, extra_formats, reported_errors, run

ALL_FORMATS = FORMATS + extra_formats()
ERROR_CODES = {"E902", "E999", "AMP900", "AMP901"}


RUNS = [*(("light", f) for f in ALL_FORMATS), ("light", "serial"), ("heavy", "concise"), ("heavy", "json")]
IDS = [f"{t}-{f}" for t, f in RUNS]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Two trees (the slow-to-parse files apart, checked in two formats only), one run per
    format. Returns {tree: (root, expect)}, {(tree, format): CompletedProcess}."""
    trees = {}
    for kind in ("light", "heavy"):
        root = tmp_path_factory.mktemp(kind)
        trees[kind] = (root, build(str(root), heavy=kind == "heavy"))
    procs = {}
    for kind, fmt in RUNS:
        # -j 2: the light tree (> 24 files) goes through the process pool; "serial" (-j 1) does not
        args = ("--output-format", "concise", "-j", "1") if fmt == "serial" else ("--output-format", fmt, "-j", "2")
        procs[kind, fmt] = run("check", ".", "--no-cache", *args, cwd=trees[kind][0])
    return trees, procs


@pytest.mark.parametrize("kind,fmt", RUNS, ids=IDS)
def test_no_crash_and_exit_code_one(hostile, kind, fmt):
    p = hostile[1][kind, fmt]
    assert "Traceback" not in p.stderr and "crashed" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 1, (p.returncode, p.stderr[-3000:])


@pytest.mark.parametrize("kind,fmt", RUNS, ids=IDS)
def test_every_file_gets_its_entry(hostile, kind, fmt):
    expect = hostile[0][kind][1]
    p = hostile[1][kind, fmt]
    got = entries("concise" if fmt == "serial" else fmt, p.stdout, cwd=hostile[0][kind][0])
    by_path: dict[str, list[tuple[str, int]]] = {}
    for path, code, row in got:
        by_path.setdefault(path, []).append((code, row))
    problems = []
    for name, exp in expect.items():
        found = by_path.get(name, [])
        codes = [c for c, _ in found]
        if exp.code is None:
            if found:
                problems.append(f"{name}: expected nothing, got {found}")
        elif exp.code in ERROR_CODES:
            if codes != [exp.code]:
                problems.append(f"{name}: expected exactly one {exp.code}, got {found}")
        else:
            if (exp.code, exp.row) not in found or ERROR_CODES & set(codes):
                problems.append(f"{name}: expected {exp.code} at row {exp.row}, got {found}")
    unexpected = sorted(set(by_path) - set(expect))
    assert not problems and not unexpected, (problems, unexpected)


@pytest.mark.parametrize("kind,fmt", [r for r in RUNS if r[1] in HUMAN], ids=[i for r, i in zip(RUNS, IDS) if r[1] in HUMAN])
def test_human_formats_name_each_broken_file_once(hostile, kind, fmt):
    expect = hostile[0][kind][1]
    p = hostile[1][kind, fmt]
    errs = reported_errors(p.stdout)
    for name, exp in expect.items():
        assert name not in p.stderr, (name, p.stderr[-2000:])  # once: on stdout only
        if exp.code in ERROR_CODES:
            assert name in errs, (name, p.stdout[-2000:])
            assert exp.message in errs[name], (name, errs[name])
        else:
            assert name not in errs, (name, errs.get(name))


def test_serial_and_pool_agree(hostile):
    procs = hostile[1]
    assert sorted(entries("concise", procs["light", "serial"].stdout)) == sorted(entries("concise", procs["light", "concise"].stdout))


def test_error_entries_carry_their_code_in_json(hostile):
    """Machine formats distinguish the kinds: E902 for I/O, E999 for syntax."""
    import json

    procs = hostile[1]
    root = hostile[0]["light"][0]
    objs = {os.path.relpath(o["filename"], root): o for o in json.loads(procs["light", "json"].stdout) if o["code"] in ERROR_CODES}
    assert objs["broken_link.py"]["code"] == "E902"
    assert objs["unterminated.py"]["code"] == "E999"
    assert objs["unterminated.py"]["location"] == {"row": 1, "column": 14}
    assert objs["unterminated.py"]["fix"] is None and objs["unterminated.py"]["noqa_row"] is None


def test_clean_tree_of_odd_but_valid_files_exits_zero(tmp_path):
    """Exit 0 stays 0: BOM, CRLF, tabs, empty, non-ASCII names without findings."""
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\nscaler = torch.amp.GradScaler('cuda')\n")
    (tmp_path / "crlf.py").write_bytes(b"x = 1\r\ny = 2\r\n")
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "ümlaut name.py").write_bytes(b"if True:\n\tscaler = None\n")
    p = run("check", ".", "--no-cache", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "All checks passed!" in p.stdout


def test_missing_path_on_the_command_line(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    p = run("check", "ok.py", "nope.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert p.returncode == 1
    assert "nope.py:1:1: E902 No such file or directory" in p.stdout
    assert "nope.py" not in p.stderr  # reported once, on stdout


def test_undecodable_file_name_and_strict_output_encoding(tmp_path):
    """A file name that is not valid UTF-8, printed to a strict ASCII stdout, must not crash."""
    import os

    from robustness_util import FLAGGED

    if os.name != "posix":
        pytest.skip("byte file names are POSIX-only")
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9 \xff.py"), "w") as fh:
        fh.write(FLAGGED)
    (tmp_path / "bad\u00e9.py").write_text('GradScaler = "\n', encoding="utf-8")
    for fmt in ("full", "json", "github"):
        p = run("check", ".", "--no-cache", "--output-format", fmt, cwd=tmp_path, env={"PYTHONIOENCODING": "ascii"})
        assert p.returncode == 1, p.stderr[-2000:]
        assert "AMP001" in p.stdout and "E999" in p.stdout
        assert "Traceback" not in p.stderr
