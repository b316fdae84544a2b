"""amplint trace's start-up hook (not for import: Python runs it as ``sitecustomize``).

``amplint trace`` puts this directory first on ``PYTHONPATH`` and sets ``AMPLINT_TRACE_DIR``, so
every Python process the traced command starts (torchrun's workers, ``python -m
torch.distributed.run``, ``accelerate launch``, multiprocessing spawn children) runs this file
at start-up. It installs :mod:`amplint.runtime.childtrace`, which starts the sanitizer when the
process imports torch and writes what it saw to ``AMPLINT_TRACE_DIR`` when the process ends,
and then runs the ``sitecustomize`` this one hides, if any. Without ``AMPLINT_TRACE_DIR`` it
does nothing else. It never stops the program: any failure of the hook is recorded, not raised.
"""

import os
import sys


def _amplint_trace_hook() -> None:
    out = os.environ.get("AMPLINT_TRACE_DIR")
    if not out:
        return
    try:
        try:
            from amplint.runtime import childtrace
        except ImportError:
            # another interpreter than amplint's: load amplint from where amplint trace runs
            import importlib.machinery
            import importlib.util

            pkgdir = os.environ.get("AMPLINT_TRACE_PKGDIR", "")
            spec = importlib.machinery.PathFinder.find_spec("amplint", [pkgdir])
            if spec is None or spec.loader is None:
                raise
            mod = importlib.util.module_from_spec(spec)
            sys.modules["amplint"] = mod
            spec.loader.exec_module(mod)
            from amplint.runtime import childtrace
        childtrace.install(out)
    except Exception as exc:  # never break the traced program
        try:
            with open(os.path.join(out, f"hook-error-{os.getpid()}.txt"), "w") as fh:
                fh.write(f"{type(exc).__name__}: {exc}\n")
        except OSError:
            pass


def _chain() -> None:
    """Run the next ``sitecustomize`` on sys.path (the one this file shadows)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception:  # a broken sitecustomize elsewhere is not amplint's to report
        pass


_amplint_trace_hook()
_chain()
