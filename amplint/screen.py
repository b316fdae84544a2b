"""The pre-screen: plain byte searches that decide whether a file can hold AMP code at all.

A file is parsed only when the tokens some rule needs are present:

* a ``GradScaler`` (construction, import or annotation), timm's ``NativeScaler`` wrapper
  (AMP301), or a deprecated or apex AMP module
  (``cuda.amp``, ``cpu.amp``, ``import amp``, ``apex`` with an ``amp`` name): every rule;
* a scaler known only by its name (``scaler``, ``self.grad_scaler``, ``SCALER``, in any
  case): the model treats such a name as a ``GradScaler`` only in a file that mentions torch
  AMP (``autocast`` or ``torch.amp``; see ``FileModel.mentions_torch_amp``), so the name
  counts only together with one of those. A helper that receives the scaler under another
  name (``def step(s, opt)``) is understood from its call site in the same file, whose text
  names the scaler, so that file passes too;
* ``autocast`` together with ``backward``: AMP002, AMP201;
* ``autocast`` in a helper that hands it out (``return torch.autocast(...)``, or a file with
  a ``@contextmanager`` that yields): project mode finds the callers that use AMP through it;
* ``with ...autocast(...):`` whose first lines call ``self.<method>(...)``: a base class whose
  subclasses' method runs under the region (AMP002, AMP201 in project mode);
* ``autocast(`` followed by ``)`` or a keyword other than ``device_type``: AMP103;
* a framework that does AMP itself (AMP4xx): accelerate, the HF ``TrainingArguments`` or
  DeepSpeed together with ``fp16``, or Lightning together with ``16``: every fp16 setting those
  rules act on is spelled with these bytes (``mixed_precision="fp16"``, ``fp16=True``,
  ``{"fp16": ...}``, ``precision="16-mixed"``/``16``).

False negatives are kept out by design: every way the model can recognise a scaler, an
autocast region or a deprecated AMP reference needs one of these byte strings in the file
(``GradScaler`` for a construction or annotation, whatever the import alias; the module
path for a deprecated reference). The test suite checks that every rule example and every
fixture passes the screen, and that a file the screen rejects has no finding when it is
analysed anyway. On the 11,438-file corpus of benchmarks/README.md (41 real repositories
plus the synthetic corpus) analysing every file without the screen gives exactly the same
findings (benchmarks/README.md, "Pre-screen").

Cost: a handful of ``bytes.__contains__`` scans (memchr-speed, ~1.5 GB/s per token); the
regexes run only on files that already hold ``apex`` or ``autocast``. Without the framework
rules (the default selection), a file holding none of five tokens that every way in needs
(``_NEEDED``) is rejected after those five scans (62 MB of the perf corpus: 0.27 s -> 0.21 s).
"""

from __future__ import annotations

from amplint.lazyre import lazy

# Any of these alone: a GradScaler or a deprecated AMP module is named.
_STRONG = (b"GradScaler", b"NativeScaler", b"cuda.amp", b"cpu.amp", b"import amp")
# torch AMP is mentioned: a scaler-named variable may then be a GradScaler.
_MENTION = (b"autocast", b"torch.amp")
# apex.amp is only reached through a name or attribute spelled `amp` (`from apex import amp`,
# `apex.amp.initialize`, `import apex.amp as A`).
_AMP_WORD = lazy(rb"(?<![A-Za-z0-9_])amp(?![A-Za-z0-9_])")
_RETURNS_AUTOCAST = lazy(rb"return[ \t]+[\w.]*autocast[ \t]*\(")
_AUTOCAST_NO_DEVICE = lazy(rb"autocast\(\s*(?:\)|(?!device_type\b)[A-Za-z_]\w*\s*=(?!=))")
# `with ...autocast(...):` whose body calls a method of self within its first lines
# (`self.step(data)`, `out = self.train_step(batch)`): a base class whose subclass's method runs
# under that region (AMP002, AMP201 in project mode)
_AUTOCAST_SELF_CALL = lazy(
    rb"with\s[^\n]*autocast\([^\n]*:[ \t]*(?:#[^\n]*)?\n(?:[ \t]+[^\n]*\n){0,3}?[ \t]+(?:\w+(?:\s*,\s*\w+)*\s*=\s*)?self\.\w+\(")


_FRAMEWORK_FP16 = (b"ccelerat", b"TrainingArguments", b"deepspeed")

# Whether a framework rule (AMP4xx) runs: the framework tokens let a file through only then
# (in a Lightning or DeepSpeed checkout they alone pass most files). Set by
# ``amplint.analyze.configure`` from the run's rule selection.
FRAMEWORKS = True

# Whether the checkpoint rule (AMP301) runs: only it asks which files may restore an optimizer
# state or save a scaler's (amplint.runner), so those byte scans of every file of the project
# are skipped without it. Set by ``amplint.analyze.configure`` too.
CHECKPOINTS = True


# Without the framework rules, every way through ``may_contain_amp`` needs one of these (each
# token of _STRONG, _MENTION and ``apex`` holds one): a file with none fails in five scans.
_NEEDED = (b"Scaler", b".amp", b"autocast", b"import amp", b"apex")


def may_contain_amp(data: bytes) -> bool:
    if not FRAMEWORKS:
        for tok in _NEEDED:
            if tok in data:
                break
        else:
            return False
    for tok in _STRONG:
        if tok in data:
            return True
    if FRAMEWORKS:
        if b"fp16" in data and any(tok in data for tok in _FRAMEWORK_FP16):
            return True
        if b"lightning" in data and b"16" in data:
            return True
    if b"apex" in data and _AMP_WORD.search(data) is not None:
        return True
    has_autocast = b"autocast" in data
    if not has_autocast and b"torch.amp" not in data:
        return False
    if b"scaler" in data.lower():  # "scaler" in any case (bytes: ASCII case, as (?i) on bytes)
        return True
    if has_autocast:
        if b"backward" in data:
            return True
        if _RETURNS_AUTOCAST.search(data) is not None or (b"contextmanager" in data and b"yield" in data):
            return True  # an autocast helper (`return torch.autocast(...)`, a @contextmanager): its callers' AMP
        if b"self." in data and _AUTOCAST_SELF_CALL.search(data) is not None:
            return True  # a base class calling a method under autocast: a subclass's step runs there
        return _AUTOCAST_NO_DEVICE.search(data) is not None
    return False


# ---------------------------------------------------------------- project facts from bytes

_RESTORE_CALLS = (b"_checkpoint(", b"_ckpt(", b"resume(", b"restore(", b"restart(", b"load_state(")


_SCALER_STATE = None


def may_hold_scaler_state(data: bytes) -> bool:
    """May the file save or load a scaler's state (``trainer.scaler.state_dict()``,
    ``self.grad_scaler.load_state_dict(...)``)? Whether a scaler a class was handed can be
    checkpointed by other code (AMP301); when in doubt, it can."""
    global _SCALER_STATE
    if data.find(b"caler") == -1 or data.find(b"state_dict") == -1:
        return False
    if _SCALER_STATE is None:
        import re

        _SCALER_STATE = re.compile(rb"caler\w*(?:\(\))?\s*\.\s*(?:load_)?state_dict\b")
    return _SCALER_STATE.search(data) is not None


def may_restore_optimizer(data: bytes) -> bool:
    """May the file restore an optimizer state? A ``load_state_dict(`` on a line that names
    ``opt`` (``optimizer.load_state_dict(...)``, ``x.load_state_dict(ckpt["optimizer"])``), or
    a restore helper called with an optimizer (``restart_from_checkpoint(path, model=model,
    optimizer=optimizer)``, ``load_checkpoint(path, model, optimizer)``), or an fvcore
    ``checkpointer.resume_or_load(...)``. Whether the project
    resumes training (AMP301); when in doubt, it does. Plain finds: a regex costs 6x more."""
    if data.find(b"resume_or_load(") != -1:
        return True  # fvcore/detectron2 checkpointers: restores every registered checkpointable
    if data.find(b"opt") == -1:
        return False  # most files: one pass, not eight
    pos = data.find(b"load_state_dict(")
    while pos != -1:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        if data.find(b"opt", start, end if end != -1 else len(data)) != -1:
            return True
        pos = data.find(b"load_state_dict(", pos + 16)
    for marker in _RESTORE_CALLS:
        pos = data.find(marker)
        while pos != -1:
            start = pos
            while start > 0 and (data[start - 1:start].isalnum() or data[start - 1] == 95):  # back over the name
                start -= 1
            name = data[start:pos].lower()
            if not any(w in name for w in (b"save", b"write", b"dump", b"export")):
                seg = data[pos:pos + 400]
                close = seg.find(b")\n")
                if seg.find(b"opt", 0, close if close != -1 else len(seg)) != -1:
                    return True
            pos = data.find(marker, pos + len(marker))
    return False
