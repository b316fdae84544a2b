import re

from amplint.lazyre import lazy


def test_compiles_on_first_use_and_then_is_the_pattern():
    p = lazy(r"sca(le)r", re.IGNORECASE)
    assert "search" not in vars(p)  # nothing compiled yet
    assert p.search("GradSCALER").group(1) == "LE"
    assert "search" in vars(p)  # the compiled pattern's bound methods, looked up directly now
    assert p.pattern == "sca(le)r" and p.flags & re.IGNORECASE and p.groups == 1
    assert p.sub("S", "scaler, Scaler") == "S, S"
    assert [m.start() for m in p.finditer("a scaler b scaler")] == [2, 11]


def test_bytes_patterns():
    p = lazy(rb"(?<![A-Za-z0-9_])amp(?![A-Za-z0-9_])")
    assert p.search(b"from apex import amp") and not p.search(b"example")


# ascii_fast: the plain-string answer for ASCII text equals the regex's; other text uses it

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAME_PIECES = ["opt", "OPT", "optim", "Optimizer", "optimiser", "s", "S", "_", "x", "7", "abcdef", "load_", "LOAD_",
               "state", "State", "\n", " ", ".", "ſ", "K", "ı", "İ", "é", "sched", "lr_", "scaler", "amp", "mixed",
               "SAVE", "ckpt", "step_optim", "optimizer_step", "optimi", "zer", "ser", "precision", "autocast"]


def _fast_patterns():
    from amplint.model.filemodel import NOT_OPTIMIZER, OPTIMIZER_NAME, WRAPPER_NAME
    from amplint.pipeline import CALL_WORDS

    return (OPTIMIZER_NAME, NOT_OPTIMIZER, WRAPPER_NAME, CALL_WORDS)


@settings(max_examples=4000, deadline=None)
@given(st.lists(st.sampled_from(NAME_PIECES), min_size=0, max_size=7).map("".join))
def test_ascii_fast_patterns_answer_as_their_regexes(text):
    for p in _fast_patterns():
        assert bool(p.search(text)) == bool(re.search(p.pattern, text, re.IGNORECASE)), (p, text)


def test_ascii_fast_patterns_on_names_of_the_rules_cases():
    names = ["optimizer", "opt", "opts", "optim_g", "g_optim", "optimizer_d_ab_cdefghijk", "my_optimizers_x",
             "opt_abcdefghijkl", "opt_abcdefghijklm", "optsabcdefghijkl", "optsabcdefghijklm", "optimus", "adopt",
             "lr_scheduler", "ema_model", "load_state_dict", "state_dict", "loadstate", "self.save_ckpt", "opt\n",
             "opt\n\n", "OPTIMISER", "ſcaler", "Kpt", "stıte"]
    for text in names:
        for p in _fast_patterns():
            assert bool(p.search(text)) == bool(re.search(p.pattern, text, re.IGNORECASE)), (p, text)
