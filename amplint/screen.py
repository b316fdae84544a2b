"""The pre-screen: plain byte searches that decide whether a file can hold AMP code at all.

A file is parsed only when the tokens some rule needs are present:

* a scaler (``GradScaler``, or a name containing ``scaler``): every loop-order rule
  (AMP001, AMP003-AMP009), AMP102, AMP202, AMP203, AMP301. A scaler is only recognised
  through a ``GradScaler`` construction or annotation, or a ``scaler`` name; a helper that
  receives one under another name (``def step(s, opt)``) is understood from its call site in
  the same file, whose text names the scaler, so that file passes too;
* a deprecated or apex AMP module (``cuda.amp``, ``cpu.amp``, ``import amp``, ``apex``): AMP101, AMP104;
* ``autocast`` together with ``backward``: AMP002, AMP201;
* ``autocast(`` followed by ``)`` or a keyword other than ``device_type``: AMP103.

The test suite checks that every fixture and every rule example passes the screen.
"""

from __future__ import annotations

import re

_ALWAYS = (b"GradScaler", b"scaler", b"cuda.amp", b"cpu.amp", b"import amp", b"apex")
_AUTOCAST_NO_DEVICE = re.compile(rb"autocast\(\s*(?:\)|(?!device_type\b)[A-Za-z_]\w*\s*=(?!=))")


def may_contain_amp(data: bytes) -> bool:
    for tok in _ALWAYS:
        if tok in data:
            return True
    if b"autocast" in data:
        if b"backward" in data:
            return True
        return _AUTOCAST_NO_DEVICE.search(data) is not None
    return False
