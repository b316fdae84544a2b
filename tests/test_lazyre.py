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
