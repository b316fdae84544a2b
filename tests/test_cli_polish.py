"""What a ruff user notices in the first ten minutes (issue 13), through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from amplint_testutil import run_amplint

BUGGY = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
        optimizer.step()
    """
)
APEX = textwrap.dedent(
    """\
    from apex import amp
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    """
)
BF16 = textwrap.dedent(
    """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
)


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "a.py").write_text(BUGGY)
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "b.py").write_text(BUGGY)
    return tmp_path


def _paths(out: str) -> list[str]:
    return sorted({line.split(":")[0] for line in out.splitlines() if ":" in line and "AMP" in line})


# 1. paths ------------------------------------------------------------------------------


def test_paths_are_relative_without_dot_slash_with_and_without_cache(proj):
    walked = run_amplint("check", "--output-format", "concise", ".", cwd=proj)  # fills the cache
    assert _paths(walked.stdout) == ["a.py", "pkg/b.py"]
    for args in (["a.py", "pkg/b.py"], ["./a.py", "./pkg/b.py"], ["--no-cache", "."], ["--no-cache", "./a.py", "pkg/b.py"], ["."]):
        r = run_amplint("check", "--output-format", "concise", *args, cwd=proj)
        assert r.returncode == 1
        assert _paths(r.stdout) == ["a.py", "pkg/b.py"], args
        assert "./" not in r.stdout


def test_paths_relative_to_cwd_from_a_subdirectory_and_absolute_input(proj):
    r = run_amplint("check", "--no-cache", "--output-format", "concise", "..", cwd=proj / "pkg")
    assert _paths(r.stdout) == sorted([str(proj / "a.py"), "b.py"])  # outside the cwd: absolute, as ruff
    r = run_amplint("check", "--no-cache", "--output-format", "concise", str(proj / "a.py"), cwd=proj)
    assert _paths(r.stdout) == ["a.py"]


@pytest.mark.parametrize("fmt", ["full", "concise", "github", "gitlab", "junit", "sarif"])
def test_every_format_shows_the_same_relative_path(proj, fmt):
    run_amplint("check", ".", cwd=proj)  # cache holds the walked paths
    r = run_amplint("check", "--output-format", fmt, "./a.py", cwd=proj)
    assert r.returncode == 1
    assert "./a.py" not in r.stdout
    if fmt == "sarif":  # relative to %SRCROOT% (the working directory, given as a base URI)
        uris = {res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in json.loads(r.stdout)["runs"][0]["results"]}
        assert uris == {"a.py"}
    else:
        assert str(proj) not in r.stdout and "a.py" in r.stdout


def test_json_filename_is_absolute(proj):
    for args in (["a.py"], ["./a.py"], ["."], ["--no-cache", "a.py"]):
        r = run_amplint("check", "--output-format", "json", *args, cwd=proj)
        names = {d["filename"] for d in json.loads(r.stdout)}
        assert str(proj / "a.py") in names and all(os.path.isabs(n) for n in names)
    r = run_amplint("check", "--output-format", "json-lines", "a.py", cwd=proj)
    assert json.loads(r.stdout.splitlines()[0])["filename"] == str(proj / "a.py")


# 2. fixability -------------------------------------------------------------------------


def test_display_only_rule_never_claims_an_applied_fix():
    rules = {d["code"]: d for d in json.loads(run_amplint("rules", "--output-format", "json").stdout)}
    assert rules["AMP104"]["fix_label"] == "display-only"
    assert rules["AMP104"]["fix_applicabilities"] == ["display-only"]
    text = run_amplint("rules").stdout
    row = next(line for line in text.splitlines() if line.startswith("AMP104"))
    assert "display-only" in row and " yes " not in row
    page = run_amplint("rule", "AMP104").stdout
    assert "always available" not in page and "never applied (display-only)" in page.splitlines()[2]


def test_unsafe_only_rules_say_so():
    rules = {d["code"]: d for d in json.loads(run_amplint("rules", "--output-format", "json").stdout)}
    assert rules["AMP003"]["fix_label"] == "sometimes (unsafe)"
    assert "--unsafe-fixes" in run_amplint("rule", "AMP003").stdout.splitlines()[2]
    assert rules["AMP004"]["fix_label"] == "sometimes" and rules["AMP008"]["fix_label"] == "no"


# 3. --statistics -----------------------------------------------------------------------


def test_statistics_json(proj):
    r = run_amplint("check", "--no-cache", "--statistics", "--output-format", "json", "a.py", cwd=proj)
    assert r.returncode == 1
    rows = json.loads(r.stdout)
    assert {"code": "AMP004", "name": "optimizer-step-bypasses-scaler", "count": 1, "fixable": True, "fixable_count": 1} in rows
    assert [row["code"] for row in rows] == ["AMP002", "AMP004"]


@pytest.mark.parametrize("fmt", ["full", "concise"])
def test_statistics_text_table_and_summary(proj, fmt):
    r = run_amplint("check", "--no-cache", "--statistics", "--output-format", fmt, ".", cwd=proj)
    lines = r.stdout.splitlines()
    assert lines[0].split("\t") == ["2", "AMP002", "[*] backward-inside-autocast"]
    assert "Found 2 errors and 2 warnings." in lines  # AMP002 is a warning, AMP004 an error
    r = run_amplint("check", "--no-cache", "--statistics", "-q", "--output-format", fmt, ".", cwd=proj)
    assert len(r.stdout.splitlines()) == 2


def test_statistics_json_from_stdin(proj):
    r = run_amplint("check", "--statistics", "--output-format", "json", "--stdin-filename", "a.py", "-", cwd=proj, input=BUGGY)
    assert r.returncode == 1
    assert [row["code"] for row in json.loads(r.stdout)] == ["AMP002", "AMP004"]


def test_statistics_with_another_format_is_a_usage_error(proj):
    r = run_amplint("check", "--no-cache", "--statistics", "--output-format", "github", "a.py", cwd=proj)
    assert r.returncode == 2 and "--statistics" in r.stderr and r.stdout == ""


# 4. closed pipe ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,status",
    [
        (["check", "--show-files", "."], (0,)),
        (["check", "--no-cache", "."], (1,)),
        (["check", "--no-cache", "--output-format", "json", "."], (1,)),
        (["check", "--no-cache", "--diff", "."], (1,)),
        (["rules"], (0,)),
        (["rule", "--all"], (0,)),
    ],
)
def test_closed_pipe_ends_quietly(proj, args, status):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first byte: every write fails with EPIPE
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMPLINT_")}
    try:
        r = subprocess.run([sys.executable, "-m", "amplint", *args], cwd=proj, stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write_end)
    assert r.returncode in status + (141,)
    assert "Traceback" not in r.stderr and "bug in amplint" not in r.stderr and "Broken pipe" not in r.stderr


# 5. errors once --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["full", "concise", "json"])
def test_missing_path_and_syntax_error_are_reported_once(proj, fmt):
    (proj / "broken.py").write_text("import torch\nscaler = torch.amp.GradScaler()\ndef (:\n")
    r = run_amplint("check", "--no-cache", "--output-format", fmt, "nope.py", "broken.py", cwd=proj)
    assert r.returncode == 1
    both = r.stdout + r.stderr
    assert both.count("nope.py") == 1 and both.count("broken.py") == 1
    assert r.stderr == ""
    if fmt == "json":
        assert sorted(d["code"] for d in json.loads(r.stdout)) == ["E902", "E999"]


# 6. --add-noqa -------------------------------------------------------------------------


def test_add_noqa_says_how_many_and_exits_0(proj):
    r = run_amplint("check", "--no-cache", "--add-noqa", ".", cwd=proj)
    assert r.returncode == 0
    assert r.stderr.strip() == "Added 4 noqa directives."
    assert "All checks passed!" not in r.stdout + r.stderr
    assert "# noqa: AMP002" in (proj / "a.py").read_text()
    again = run_amplint("check", "--no-cache", "--add-noqa", ".", cwd=proj)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "Added 0 noqa directives.\n")
    assert run_amplint("check", "--no-cache", ".", cwd=proj).returncode == 0


def test_add_noqa_singular(proj):
    r = run_amplint("check", "--no-cache", "--add-noqa", "--select", "AMP004", "a.py", cwd=proj)
    assert (r.returncode, r.stderr.strip()) == (0, "Added 1 noqa directive.")


# 7. noqa: unknown codes, file-level directives --------------------------------------------


def test_unknown_code_in_noqa_warns_once_per_file(proj):
    src = BUGGY.replace("optimizer.step()\n", "optimizer.step()  # noqa: AMP999, E501\n")
    src = src.replace("scaler.scale(loss).backward()\n", "scaler.scale(loss).backward()  # noqa: AMP998\n")
    (proj / "a.py").write_text(src)
    r = run_amplint("check", "--no-cache", "--output-format", "concise", "a.py", cwd=proj)
    assert r.returncode == 1  # an unknown code suppresses nothing
    assert "AMP002" in r.stdout and "AMP004" in r.stdout
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "a.py" in warnings[0] and "`AMP999` (line 8)" in warnings[0] and "`AMP998` (line 7)" in warnings[0]
    assert "E501" not in warnings[0]  # another tool's code is not ours to judge
    assert "AMP" not in r.stdout.split("Found")[1]


def test_known_codes_do_not_warn(proj):
    (proj / "a.py").write_text(BUGGY.replace("optimizer.step()\n", "optimizer.step()  # noqa: AMP004\n"))
    r = run_amplint("check", "--no-cache", "a.py", cwd=proj)
    assert r.stderr == "" and r.returncode == 1


@pytest.mark.parametrize(
    "header,expected",
    [
        ("# amplint: noqa\n", []),
        ("# Amplint: NOQA\n", []),
        ("# amplint: noqa: AMP004\n", ["AMP002"]),
        ("# amplint: noqa: AMP002, AMP004\n", []),
        ("# amplint: noqa: AMP101\n", ["AMP002", "AMP004"]),
        ("# noqa\n", ["AMP002", "AMP004"]),  # a line-level noqa on another line is not file-level
    ],
)
def test_file_level_noqa(proj, header, expected):
    (proj / "a.py").write_text(header + BUGGY)
    r = run_amplint("check", "--no-cache", "--output-format", "json", "a.py", cwd=proj)
    assert sorted(d["code"] for d in json.loads(r.stdout)) == expected
    assert r.returncode == (1 if expected else 0)


def test_file_level_noqa_at_the_end_of_the_file(proj):
    (proj / "a.py").write_text(BUGGY + "x = 1  # amplint: noqa: AMP002\n")
    r = run_amplint("check", "--no-cache", "--output-format", "json", "a.py", cwd=proj)
    assert [d["code"] for d in json.loads(r.stdout)] == ["AMP004"]


# 8. --select ALL ----------------------------------------------------------------------


def test_select_all_includes_opt_in_rules_but_not_preview(proj):
    (proj / "bf.py").write_text(BF16)

    def codes(*args):
        r = run_amplint("check", "--no-cache", "--output-format", "json", *args, "bf.py", cwd=proj)
        return sorted({d["code"] for d in json.loads(r.stdout)})

    assert codes() == []
    assert codes("--select", "AMP") == []  # a prefix leaves opt-in rules out
    assert codes("--select", "ALL") == ["AMP203"]
    assert codes("--select", "all") == ["AMP203"]
    assert codes("--select", "AMP203") == ["AMP203"]
    assert codes("--select", "ALL", "--ignore", "AMP2") == []


def test_select_all_needs_preview_for_preview_rules(proj):
    (proj / "acc.py").write_text(
        textwrap.dedent(
            """\
            import torch
            from accelerate import Accelerator
            accelerator = Accelerator(mixed_precision="fp16")
            for batch in loader:
                accelerator.backward(model(batch))
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            """
        )
    )
    r = run_amplint("check", "--no-cache", "--output-format", "json", "--select", "ALL", "acc.py", cwd=proj)
    assert "AMP401" not in {d["code"] for d in json.loads(r.stdout)}
    r = run_amplint("check", "--no-cache", "--output-format", "json", "--select", "ALL", "--preview", "acc.py", cwd=proj)
    assert "AMP401" in {d["code"] for d in json.loads(r.stdout)}


def test_checkpoint_rule_runs_by_default(proj):
    (proj / "ck.py").write_text(
        textwrap.dedent(
            """\
            import torch
            scaler = torch.amp.GradScaler("cuda")
            if resume:
                optimizer.load_state_dict(torch.load("ckpt.pt")["optimizer"])
            for epoch in range(epochs):
                for x in loader:
                    with torch.autocast("cuda"):
                        loss = model(x)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pt")
            """
        )
    )
    r = run_amplint("check", "--no-cache", "--output-format", "json", "ck.py", cwd=proj)
    assert [d["code"] for d in json.loads(r.stdout)] == ["AMP301"]


# 9. -j ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_bad_jobs_is_a_usage_error(proj, value):
    r = run_amplint("check", "--no-cache", "-j", value, "a.py", cwd=proj)
    assert r.returncode == 2
    assert "Invalid value for '-j' / '--jobs'" in r.stderr and r.stdout == ""


def test_jobs_1_and_2_work(proj):
    for value in ("1", "2"):
        assert run_amplint("check", "--no-cache", "-j", value, ".", cwd=proj).returncode == 1


# 10. help texts ------------------------------------------------------------------------


def test_top_level_help_has_whole_one_liners():
    r = run_amplint("--help")
    assert r.returncode == 0
    commands = r.stdout.split("Commands:")[1]
    assert "..." not in commands
    for name in ("check", "clean", "explain", "fix", "rule", "rules", "server", "trace", "verify"):
        assert f"\n  {name} " in commands
    assert "amplint trace --" not in commands and "and on the" not in commands


def test_fix_help_offers_no_fix_flag():
    r = run_amplint("fix", "--help")
    assert r.returncode == 0
    options = r.stdout.split("Options:")[1]
    assert "--fix " not in options and "--no-fix" not in options
    assert run_amplint("check", "--help").stdout.count("--fix / --no-fix") == 1
    r = run_amplint("fix", "--no-fix", ".")
    assert r.returncode == 2 and "No such option '--no-fix'" in r.stderr


# 11. syntax errors in files without AMP code ---------------------------------------------


def test_syntax_error_without_amp_code_is_not_parsed_and_with_it_is_e999(proj):
    (proj / "plain.py").write_text("def (:\n")
    r = run_amplint("check", "--no-cache", "plain.py", cwd=proj)
    assert (r.returncode, r.stdout.strip()) == (0, "All checks passed!")
    (proj / "amp.py").write_text("import torch\nscaler = torch.amp.GradScaler()\ndef (:\n")
    r = run_amplint("check", "--no-cache", "--output-format", "concise", "amp.py", cwd=proj)
    assert r.returncode == 1 and r.stdout.startswith("amp.py:3:5: E999 SyntaxError")


# 13. exit status in every command's help ---------------------------------------------------


@pytest.mark.parametrize("command", [[], ["check"], ["fix"], ["rule"], ["rules"], ["explain"], ["clean"]])
def test_every_command_help_names_its_exit_status(command):
    r = run_amplint(*command, "--help")
    assert r.returncode == 0
    assert "Exit status" in r.stdout
    if command in (["check"], ["fix"]):
        for code in ("0  ", "1  ", "2  "):
            assert f"\n    {code}" in r.stdout


def test_stdin_filename_is_shown_like_a_path(proj):
    r = run_amplint("check", "--output-format", "concise", "--stdin-filename", "./pkg/../a.py", "-", cwd=proj, input=BUGGY)
    assert r.returncode == 1
    assert _paths(r.stdout) == ["a.py"]
    r = run_amplint("check", "--output-format", "json", "--stdin-filename", "a.py", "-", cwd=proj, input=BUGGY)
    assert {d["filename"] for d in json.loads(r.stdout)} == {str(proj / "a.py")}
    r = run_amplint("check", "--output-format", "json", "-", cwd=proj, input=BUGGY)
    assert {d["filename"] for d in json.loads(r.stdout)} == {"-"}
