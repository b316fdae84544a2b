"""The sanitizer inside each process ``amplint trace`` starts (installed by its start-up hook).

:func:`install` waits for the process to import torch (a ``sys.meta_path`` finder that wraps
torch's loader, so a process that never uses torch pays nothing), then enters a
:class:`~amplint.runtime.sanitizer.Sanitizer` for the rest of the process. When the process
ends (``atexit``; for a forked ``multiprocessing`` child, when its ``Process`` body returns) it
writes ``report-<pid>.json`` into the trace directory: pid, parent pid, rank
(``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` as torchrun and accelerate set them), argv, the
violations and :meth:`~amplint.runtime.sanitizer.Sanitizer.stats`. A process that saw no AMP
activity writes nothing. ``started-<pid>.json`` is written when the sanitizer starts, so the
parent can tell a process that died without reporting. A forked child forgets its parent's
findings and reports its own.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys
from typing import Any

__all__ = ["install", "write_report", "ENV_DIR", "ENV_PKGDIR"]

ENV_DIR = "AMPLINT_TRACE_DIR"
ENV_PKGDIR = "AMPLINT_TRACE_PKGDIR"

_state: dict[str, Any] = {"san": None, "dir": None, "written_pid": None}


def _rank_info() -> dict[str, Any]:
    def num(name: str) -> int | None:
        v = os.environ.get(name)
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None

    return {"rank": num("RANK"), "local_rank": num("LOCAL_RANK"), "world_size": num("WORLD_SIZE")}


def _dump(name: str, data: dict[str, Any]) -> None:
    out = _state["dir"]
    if not out:
        return
    path = os.path.join(out, name)
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def write_report() -> None:
    """Write this process's findings (once per pid; later calls rewrite the same file)."""
    san = _state["san"]
    if san is None:
        return
    try:
        raise_on = san.raise_on_violation
        san.raise_on_violation = False
        san.finish()
        san.raise_on_violation = raise_on
    except Exception:  # pragma: no cover - finish never raises with raise_on_violation off
        pass
    stats = san.stats()
    pid = os.getpid()
    if not stats["active"] and not san.violations:
        try:
            os.remove(os.path.join(_state["dir"], f"started-{pid}.json"))
        except OSError:
            pass
        return
    data = {"pid": pid, "ppid": os.getppid(), "argv": list(sys.argv), **_rank_info(),
            "violations": [v.as_dict() for v in san.violations], "stats": stats}
    _dump(f"report-{pid}.json", data)
    _state["written_pid"] = pid


def _after_fork_child() -> None:
    san = _state["san"]
    if san is not None:
        san.reset()


def _activate() -> None:
    if _state["san"] is not None:
        return
    from amplint.runtime.sanitizer import Sanitizer

    san = Sanitizer(report=False)
    san.__enter__()
    _state["san"] = san
    _dump(f"started-{os.getpid()}.json", {"pid": os.getpid(), "argv": list(sys.argv), **_rank_info()})
    atexit.register(write_report)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_child)
    try:  # forked multiprocessing children end with os._exit(): report when their body returns
        import multiprocessing.process as mpp

        orig = mpp.BaseProcess._bootstrap

        def _bootstrap(self: Any, *a: Any, **k: Any) -> Any:
            try:
                return orig(self, *a, **k)
            finally:
                write_report()

        mpp.BaseProcess._bootstrap = _bootstrap  # type: ignore[method-assign]
    except Exception:  # pragma: no cover - multiprocessing always imports
        pass


class _TorchLoader(importlib.abc.Loader):
    def __init__(self, orig: Any) -> None:
        self._orig = orig

    def create_module(self, spec: Any) -> Any:
        return self._orig.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._orig
        module.__loader__ = self._orig
        self._orig.exec_module(module)
        try:
            _activate()
        except Exception as exc:  # never break the traced program
            _dump(f"hook-error-{os.getpid()}.json", {"error": f"{type(exc).__name__}: {exc}"})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig, name)


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps torch's loader so the sanitizer starts right after torch loads."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _TorchLoader(spec.loader)
        return spec


def install(out_dir: str) -> None:
    """Start tracing this process as soon as it imports torch (now, if it already has)."""
    _state["dir"] = out_dir
    if "torch" in sys.modules:
        _activate()
    elif not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchFinder())
