"""The semantic core (issue 31), built beside the loop model and taking rules over one by one:

* ``cfg``: a statement-level control-flow graph of one function (branches, loops, ``try``,
  ``with``, ``match``, ``break``/``continue``/``return``/``raise``);
* ``typestate``: the GradScaler protocol as an automaton run over that graph, per abstract
  scaler (the model's keys: a local, ``self.<attr>``, a module global), with ``unknown`` for
  anything the analysis cannot follow (a call that may drive the scaler), which no rule reports;
* ``autocast``: what an autocast call selects (device, dtype, the flag enabling it) and which
  region is in effect at an event, a base class's regions included (project mode);
* ``dtypes``: the places that make a module's weights fp16;
* ``loops``: what a loop stores, whether an event runs on every iteration once it runs on one,
  accumulation-boundary tests;
* ``grads``: the gradients a scaled backward produced, over the same graph (scaled until
  ``unscale_``, closed by ``update()``, overwritten by a fresh backward), with the clips and
  ``zero_grad()`` calls followed forward to the step they reach; a call that may unscale is Top;
* ``lifetime``: which GradScaler object, by allocation site, a scaler key holds on each
  statement, and whether its restored state was used since (AMP302); with ``cfg.avoidable``,
  a path-sensitive "can a pass reach this use without building it first?";
* ``containers``: what a dict-valued local holds where it is saved or returned (the literal or
  parameter it grew from and the entries added on some path; Top once code we cannot read has
  it);
* ``persist``: which abstract objects' state a checkpoint holds where it is written or
  returned (an optimizer's, the scaler's, by the model's typing; nested containers, aliases and
  a project helper's returned dict, its parameters typed by the call's arguments), for the
  checkpoint rule (AMP301).

Rules ask it questions ("which scaler iteration is open on every path into this statement?")
instead of comparing line positions and branch literals themselves. The core imports only the
model's facts; it never imports rules, the CLI or torch.
"""
