"""The pre-screen: a byte search that decides whether a file can hold AMP code at all.

A file is parsed only when it contains one of these tokens. Every rule needs one of them
to fire: a scaler method (``.scale(``/``.step(``/``.update(``) needs a scaler, which is only
recognised through a ``GradScaler`` construction/annotation or a ``scaler`` name; autocast
rules need ``autocast``; API rules need ``amp``/``custom_fwd``; numerics/state rules need
``GradScaler``/``scaler``/``autocast``. A helper that receives a scaler under another name
(``def step(s, opt): s.step(opt)``) is only understood from its call site in the same
file, whose text contains ``scaler``/``GradScaler``, so it passes the screen too. The test
suite checks that every fixture and rule example passes.
"""

from __future__ import annotations

import re

SCREEN = re.compile(rb"GradScaler|autocast|scaler|Scaler|cuda\.amp|cpu\.amp|torch\.amp|custom_fwd|custom_bwd|apex|\bamp\b")


def may_contain_amp(data: bytes) -> bool:
    return SCREEN.search(data) is not None
