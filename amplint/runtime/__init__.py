"""Runtime checks for AMP training loops (needs torch; imported only by ``verify``/``trace``).

* :mod:`amplint.runtime.reference` - the canonical AMP step/loop;
* :mod:`amplint.runtime.harness`   - run a loop on a seeded tiny problem, ``check_all``;
* :mod:`amplint.runtime.sanitizer` - ``sanitize()``: catch misuse live with AMPxxx codes;
* :mod:`amplint.runtime.trace`     - ``python -m amplint.runtime.trace -- script.py``;
* :mod:`amplint.runtime.verify`    - ``verify(paths)``: the ``amplint verify`` table;
* :mod:`amplint.runtime.commands`  - the click commands ``verify`` and ``trace``.

This package does not import torch at import time; the submodules above do.
"""

__all__ = ["reference", "harness", "sanitizer", "trace", "verify", "commands"]
