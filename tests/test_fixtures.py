"""fixtures/<code>_<name>/: before.py has exactly that finding, after.py is what `fix` makes of it."""

from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

from amplint_testutil import FIXTURES, run_amplint

RULE_DIRS = sorted(d for d in glob.glob(os.path.join(FIXTURES, "amp*")) if os.path.isdir(d))
CLEAN = sorted(glob.glob(os.path.join(FIXTURES, "clean", "*.py")))


def codes_in(path: str) -> list[str]:
    from amplint.rules import ALL_RULES

    # ALL leaves out the opt-in (default = False) rules; name them so their fixtures count too
    select = ",".join(["ALL"] + [c for c, r in ALL_RULES.items() if not r.default])
    r = run_amplint("check", "--no-cache", "--select", select, "--preview", "--output-format", "json", path)
    assert r.returncode in (0, 1), r.stderr
    return sorted(d["code"] for d in json.loads(r.stdout))


def _code_of(d: str) -> str:
    return os.path.basename(d).split("_", 1)[0].upper()


def test_there_is_a_fixture_for_every_rule():
    from amplint.rules import ALL_RULES

    have = [_code_of(d) for d in RULE_DIRS]
    assert sorted(have) == sorted(ALL_RULES)  # one directory per rule, no more, no fewer


@pytest.mark.parametrize("d", RULE_DIRS, ids=[os.path.basename(d) for d in RULE_DIRS])
def test_before_has_exactly_its_rule(d):
    found = codes_in(os.path.join(d, "before.py"))
    assert found and set(found) == {_code_of(d)}, found


@pytest.mark.parametrize("d", RULE_DIRS, ids=[os.path.basename(d) for d in RULE_DIRS])
def test_fix_turns_before_into_after_and_is_idempotent(d, tmp_path):
    from amplint.rules import ALL_RULES

    after = os.path.join(d, "after.py")
    rule = ALL_RULES[_code_of(d)]
    if rule.fix_availability == "never":
        assert not os.path.exists(after), f"{rule.code} has no fix, so {after} cannot be what fix makes"
        pytest.skip(f"{rule.code} has no fix (fix_availability = 'never')")
    if not os.path.exists(after):
        # a rule with a fix whose fixture has no after.py: fix must leave before.py as it is
        # (a display-only fix, like AMP104's), and the finding stays
        work = tmp_path / "before.py"
        shutil.copyfile(os.path.join(d, "before.py"), work)
        r = run_amplint("fix", "--no-cache", "--unsafe-fixes", "--select", rule.code, str(work))
        assert r.returncode == 1, r.stdout + r.stderr
        with open(os.path.join(d, "before.py"), "rb") as fh:
            assert work.read_bytes() == fh.read(), "fix changed before.py: the fixture needs an after.py"
        assert set(codes_in(str(work))) == {rule.code}
        return
    work = tmp_path / "before.py"
    shutil.copyfile(os.path.join(d, "before.py"), work)
    r = run_amplint("fix", "--no-cache", "--unsafe-fixes", "--select", _code_of(d), str(work))
    assert r.returncode == 0, r.stdout + r.stderr
    with open(after, "rb") as fh:
        assert work.read_bytes() == fh.read()
    assert codes_in(after) == []
    mtime = work.stat().st_mtime_ns
    r = run_amplint("fix", "--no-cache", "--unsafe-fixes", "--select", "ALL", str(work))
    assert r.returncode == 0
    assert work.stat().st_mtime_ns == mtime  # nothing to do: not rewritten


@pytest.mark.parametrize("path", CLEAN, ids=[os.path.basename(p) for p in CLEAN])
def test_clean_fixtures_have_no_findings(path):
    assert codes_in(path) == []


def test_fixtures_pass_the_prescreen():
    """Every single-file fixture (a project's modules need not: helpers without AMP tokens are
    summarised on demand, tests/test_projects.py)."""
    from amplint.screen import may_contain_amp

    paths = [p for p in glob.glob(os.path.join(FIXTURES, "**", "*.py"), recursive=True)
             if os.sep + "projects" + os.sep not in p]
    assert len(paths) > 30
    for path in paths:
        with open(path, "rb") as fh:
            assert may_contain_amp(fh.read()), path


def test_prescreen_without_framework_rules_keeps_every_file_the_full_screen_keeps(monkeypatch):
    """The quick rejection (five scans) used when no framework rule runs holds a piece of
    every token that can let a file through, so it never drops a file the full screen keeps."""
    from amplint import screen

    monkeypatch.setattr(screen, "FRAMEWORKS", False)
    tokens = [*screen._STRONG, *screen._MENTION, b"apex"]
    assert all(any(n in t for n in screen._NEEDED) for t in tokens)
    paths = glob.glob(os.path.join(FIXTURES, "**", "*.py"), recursive=True)
    kept = 0
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        monkeypatch.setattr(screen, "_NEEDED", (b"",))  # the full screen: nothing rejected early
        full = screen.may_contain_amp(data)
        monkeypatch.undo()
        monkeypatch.setattr(screen, "FRAMEWORKS", False)
        assert screen.may_contain_amp(data) == full, path
        kept += full
    assert kept > 30
