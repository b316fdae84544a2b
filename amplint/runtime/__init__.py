"""Runtime checks for AMP training loops (needs torch; imported only by ``verify``/``trace``).

* :mod:`amplint.runtime.reference`   - the canonical AMP step/loop (accumulation, clipping,
  several optimizers);
* :mod:`amplint.runtime.harness`     - run a loop on a seeded tiny problem, observe it,
  ``check_all``, ``compare_to_reference``;
* :mod:`amplint.runtime.loader`      - load a script's definitions without running it;
* :mod:`amplint.runtime.static_info` - what verify reads from the static model (the only
  import of ``amplint.model``);
* :mod:`amplint.runtime.roles`       - map parameters/attributes/globals to harness objects;
* :mod:`amplint.runtime.discover`    - which functions of a script verify runs;
* :mod:`amplint.runtime.verify`      - ``verify(paths)``: the ``amplint verify`` table;
* :mod:`amplint.runtime.sanitizer`   - ``sanitize()``: catch misuse live with AMPxxx codes;
* :mod:`amplint.runtime.trace`       - ``amplint trace -- COMMAND``: run and merge reports;
* :mod:`amplint.runtime.childtrace`  - the sanitizer inside each traced process
  (started by ``tracehook/sitecustomize.py``);
* :mod:`amplint.runtime.commands`    - the click commands ``verify`` and ``trace``.

This package does not import torch at import time; harness, reference, sanitizer do. The
static core never imports this package.
"""

__all__ = ["reference", "harness", "loader", "static_info", "roles", "discover", "verify", "sanitizer",
           "trace", "childtrace", "commands"]
