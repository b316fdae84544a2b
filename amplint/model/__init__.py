"""The AMP loop model: one pass over a file's syntax tree, queried by every rule.

``build_model(source, tree)`` walks each function (and the module body) that can hold AMP
code once, in evaluation order, and records:

* imports and aliases, so ``GS()``, ``amp.autocast`` or ``torch.GradScaler`` resolve to the
  torch object they denote (function-local imports included);
* which names hold a torch ``GradScaler`` (locals, ``self.x`` attributes set in any method,
  module globals, parameters that receive one from a call in the same file or whose
  annotation or name says so), with a certainty: ``CERTAIN`` or ``LIKELY``;
* the ordered AMP events (scale, backward, unscale_, clip, step, update, zero_grad, plain
  ``optimizer.step()``...) with their context: enclosing loops, branch literals (which
  ``if``/``else``/``except`` arm, including arms that ``return``/``continue`` early),
  autocast regions, version guards;
* call sites, so an update in a helper or another method counts.

The model is built from Python's ``ast`` (the C parser, ~12x faster than LibCST on this
workload); every fix is applied with LibCST (see ``amplint.fix.apply``).
"""

# Loaded on first use (PEP 562): the cache unpickles ``amplint.model.summary`` objects on a
# warm run, which must not pull in the builder and the rest of the model.
_WHERE = {
    "build_model": "builder", "iter_stmts": "builder", "FileModel": "filemodel", "amp_ish": "filemodel",
    **{n: "facts" for n in ("CERTAIN", "LIKELY", "NOT", "Assign", "Autocast", "CallSite", "ClassInfo", "Ctx", "Event",
                            "Func", "ImportInfo", "Key", "Lit", "Loop", "MethodCall", "Ref", "exclusive")},
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'amplint.model' has no attribute {name!r}")
    value = getattr(__import__(f"amplint.model.{where}", fromlist=(name,)), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
