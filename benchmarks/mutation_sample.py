"""The mutation-testing sample (issue 18): mutmut 3 on a few modules, in a scratch copy.

    python benchmarks/mutation_sample.py            # about 5-10 minutes on 2 cores
    python benchmarks/mutation_sample.py --jobs 4 --out benchmarks/out/mutation

Mutates SAMPLE (a few rule modules, noqa.py, selection.py, screen.py, report/) and runs, per
mutant, the in-process tests of TESTS that execute the mutated function (mutmut's own
selection). The checkout is copied to a scratch directory first, with ``[tool.mutmut]`` of
its pyproject.toml narrowed to the sample, so this never writes a ``mutants/`` directory
into the checkout; ``python -m mutmut run`` in the checkout is the full run (all of amplint/
except runtime/, same test selection; hours, not CI's job).

Prints the score (killed / (killed + survived + mutants no sample test runs); timeouts count
as killed) and writes
``summary.json`` and ``survivors.diff`` (every surviving or untested mutant's diff, as ``mutmut show`` gives it)
to ``--out``. benchmarks/README.md ("Mutation testing") states the last score and which
survivors were judged equivalent. Needs mutmut (`pip install -e '.[test]'`).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAMPLE = [
    "amplint/noqa.py",
    "amplint/selection.py",
    "amplint/screen.py",
    "amplint/report/*",
    "amplint/rules/amp008_repeated_unscale_or_step.py",
    "amplint/rules/amp102_unknown_grad_scaler_attribute.py",
    "amplint/rules/amp104_apex_amp.py",
]
# In-process tests (mutmut records which test runs which function only in its own process;
# the CLI tests' `python -m amplint` subprocesses are invisible to it, so they are left out).
# The screen-variant tests re-analyse thousands of renamed sources: they run the rules but
# add nothing to what the examples check of them, so they are left out for speed.
TESTS = [
    "tests/test_units.py",
    "tests/test_rule_examples.py",
    "tests/test_rule_cases.py",
    "tests/test_precision.py",
    "tests/test_speed_infra.py::test_screened_out_files_have_no_findings_when_analysed",
    "tests/test_speed_infra.py::test_a_file_whose_only_amp_token_is_gradscaler_is_analysed",
    "tests/test_speed_infra.py::test_a_scaler_name_with_a_torch_amp_mention_passes_the_screen",
    "tests/test_fixtures.py::test_fixtures_pass_the_prescreen",
    "-k", "not screen_skips_only_code",
]
# what mutmut's exit codes mean (mutmut.stats.status_by_exit_code, 3.x)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 35: "suspicious",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", 37: "caught by type check",
          -11: "segfault", -9: "segfault", None: "not checked"}


# `mutmut show` for many mutants in one process (mutmut 3's own functions)
_SHOW = """
import json, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
out = {}
for name in json.load(sys.stdin):
    try:
        out[name] = get_diff_for_mutant(name, path=find_mutant(name).path)
    except Exception as exc:
        out[name] = f"(no diff: {type(exc).__name__}: {exc})"
json.dump(out, sys.stdout)
"""


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def make_copy(dest: str) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache", ".amplint_cache")
    for d in ("amplint", "tests", "fixtures", "docs"):
        shutil.copytree(os.path.join(REPO, d), os.path.join(dest, d), ignore=ignore)
    for f in ("README.md", "pyproject.toml"):
        shutil.copy2(os.path.join(REPO, f), os.path.join(dest, f))
    pyproject = os.path.join(dest, "pyproject.toml")
    with open(pyproject, encoding="utf-8") as fh:
        text = fh.read()
    section = (
        "[tool.mutmut]\n"
        'source_paths = ["amplint"]\n'
        f"only_mutate = {_toml_list(SAMPLE)}\n"
        'do_not_mutate = ["amplint/runtime/*"]\n'
        'also_copy = ["fixtures", "README.md", "docs"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(TESTS)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x"]\n'
    )
    text, n = re.subn(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", lambda m: section, text)
    if n != 1:
        raise SystemExit("pyproject.toml has no [tool.mutmut] section to narrow")
    with open(pyproject, "w", encoding="utf-8") as fh:
        fh.write(text)


def collect(work: str) -> dict[str, str]:
    status: dict[str, str] = {}
    for meta in glob.glob(os.path.join(work, "mutants", "**", "*.py.meta"), recursive=True):
        with open(meta, encoding="utf-8") as fh:
            data = json.load(fh)
        for name, code in data["exit_code_by_key"].items():
            status[name] = STATUS.get(code, "suspicious")
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="mutmut --max-children (default 2)")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "out", "mutation"), help="where summary.json and survivors.diff go")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    ap.add_argument("--timeout", type=float, default=1800, help="stop mutmut after this many seconds (default 1800)")
    args = ap.parse_args(argv)
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutmut is not installed: pip install -e '.[test]'", file=sys.stderr)
        return 2

    work = tempfile.mkdtemp(prefix="amplint-mutation-")
    try:
        make_copy(work)
        env = {k: v for k, v in os.environ.items() if k not in ("MUTANT_UNDER_TEST", "PYTHONPATH")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        t0 = time.monotonic()
        log_path = os.path.join(args.out, "mutmut-run.log")
        os.makedirs(args.out, exist_ok=True)
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs)],
                                    cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)  # mutmut and its forked children
                proc.wait()
                rc = "timeout"
        wall = time.monotonic() - t0
        status = collect(work)
        if rc != 0 or not status:
            with open(log_path, encoding="utf-8", errors="replace") as fh:
                print(fh.read()[-3000:], file=sys.stderr)
            print(f"mutmut run failed ({rc}); log: {log_path}", file=sys.stderr)
            return 1
        counts = Counter(status.values())
        killed = counts["killed"] + counts["timeout"] + counts["caught by type check"]
        survived = sorted(n for n, s in status.items() if s == "survived")
        untested = sorted(n for n, s in status.items() if s == "no tests")
        # strict: a mutant no sample test runs counts against the score like a survivor
        judged = killed + len(survived) + len(untested)
        score = killed / judged if judged else 0.0
        per_module = Counter(n.rsplit(".", 1)[0].split(".x")[0] for n in survived)
        shown = subprocess.run([sys.executable, "-c", _SHOW], cwd=work, env=env, capture_output=True, text=True,
                               input=json.dumps(survived + untested))
        diff_by_name = json.loads(shown.stdout) if shown.returncode == 0 else {}
        diffs = [f"# {name} ({status[name]})\n{diff_by_name.get(name, '(no diff)').strip()}\n" for name in survived + untested]
        with open(os.path.join(args.out, "survivors.diff"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(diffs))
        summary = {
            "mutmut": __import__("importlib.metadata").metadata.version("mutmut"),
            "sample": SAMPLE, "tests": TESTS, "jobs": args.jobs, "wall_s": round(wall, 1),
            "mutants": len(status), "counts": dict(sorted(counts.items())), "score": round(score, 4),
            "survived": survived, "no_tests": untested,
        }
        with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2)
            fh.write("\n")
        print(f"{len(status)} mutants in {wall:.0f} s ({args.jobs} jobs): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        print(f"mutation score {score:.1%} = killed / (killed + survived + no tests); timeouts count as killed")
        for mod, n in sorted(per_module.items()):
            print(f"  survived in {mod}: {n}")
        print(f"details: {args.out}/summary.json, {args.out}/survivors.diff")
        return 0
    finally:
        if args.keep:
            print(f"scratch copy kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
