"""Issue 11: random but valid training loops (generator.py), fixed and checked by execution.

Each example composes one program from parts (loop shapes, guards, statement layouts, comment
placement, one or two optimizers, helpers, misuse injections), then the oracle lints it, applies
the safe fixes and, separately, the unsafe fixes through the CLI, runs the original, the expected
loop and the fixed loops on the harness problem, and checks the same properties as the corpus
(oracle.py). A violation fails the test with the program and its record.

CI runs a fixed, derandomized sample (``CI_EXAMPLES`` programs, well under a minute on two
cores). The long run draws fresh programs:

    AMPLINT_FIXSAFETY_EXAMPLES=2000 .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/fixsafety/test_generated.py --hypothesis-show-statistics

(hypothesis stops at the first failing program and shrinks it; to count every violation over
many programs use ``tests/fixsafety/run_baseline.py --generated N``.)
"""

from __future__ import annotations

import itertools
import os

import pytest

pytest.importorskip("torch")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import event as _event  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import generator  # noqa: E402
import oracle  # noqa: E402

LONG = int(os.environ.get("AMPLINT_FIXSAFETY_EXAMPLES", "0"))
CI_EXAMPLES = 50

_names = itertools.count()


@pytest.fixture(scope="module")
def gen_oracle(tmp_path_factory):
    work = tmp_path_factory.mktemp("fixsafety-generated")
    cli = oracle.make_cli(default="server")
    try:
        yield oracle.Oracle(str(work), cli)
    finally:
        cli.close()


def check_program(orc: oracle.Oracle, prog: generator.Program) -> oracle.Record:
    rec = orc.run([(f"gen_{next(_names)}.py", prog.text)])[0]
    return rec


def generator_bugs(rec: oracle.Record) -> list[str]:
    """The generator must only produce valid programs: correct ones run, expected loops run."""
    bugs = []
    if rec.header.kind == "correct" and rec.original.error:
        bugs.append(f"generated correct loop raises: {rec.original.error}")
    if rec.expected is not None and rec.expected.error:
        bugs.append(f"generated expected loop raises: {rec.expected.error}")
    return bugs


@settings(
    max_examples=LONG or CI_EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
    # CI: no shrinking (each example runs the CLI and the loops); the long run shrinks
    phases=(Phase.explicit, Phase.generate, Phase.shrink) if LONG else (Phase.explicit, Phase.generate),
    print_blob=True,
)
@given(data=st.data())
def test_generated_loops_fix_safely(gen_oracle, data):
    # One drawn seed drives every choice: hypothesis's own choice sequences lean heavily towards
    # the first option of each part, which left the rarer layouts and injections unsampled.
    seed = data.draw(st.integers(min_value=0, max_value=2**64 - 1), label="seed")
    prog = generator.compose_seeded(seed)
    rec = check_program(gen_oracle, prog)
    _event(f"kind={prog.kind}")
    for inj in prog.plan.inject:
        _event(f"inject={inj}")
    for v in rec.violations:
        _event(f"violation ({v.prop}) {v.mode} {','.join(v.rules)}")
    bugs = generator_bugs(rec)
    assert not bugs, "generator bug\n" + "\n".join(bugs) + "\n" + prog.text
    if rec.violations:
        raise AssertionError(f"{len(rec.violations)} violation(s)\n{oracle.describe(rec)}\n"
                             f"----- program -----\n{prog.text}")
