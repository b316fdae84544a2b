"""Measure amplint's fixes against the corpus and a long generator run; write a markdown report.

    .venv/bin/python tests/fixsafety/run_baseline.py --generated 1000 --out /tmp/fixsafety.md

Unlike the tests, this never stops at a violation: it counts them all. For a violation that
several rules' fixes could have caused, each rule's fix is also applied alone
(`fix --select CODE`) and run, to name the rule that breaks the code.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import generator  # noqa: E402
import oracle  # noqa: E402

DEFECT_TITLES = {
    1: "statements on semicolon lines anchored to the whole line",
    2: "AMP004 on an optional (None) scaler emits an unguarded step",
    3: "AMP006 with clipping every micro-batch under an accumulation guard",
    4: "AMP001 on `return self.scaler.step(...)`",
    5: "AMP101 on an alias `GS = torch.cuda.amp.GradScaler` called with positional init_scale",
    6: "AMP002 moves a backward that also computes the forward out of autocast",
    7: "false positives with a wrong fix",
    8: "comments lost in rewritten calls and imports",
    9: "[*] counts of check / fix / --diff disagree; fixes never applied",
    10: "writing: hard links, read-only files",
}


def runs_of(rec: oracle.Record) -> int:
    n = 1 + (rec.expected is not None)
    n += sum(1 for m in rec.modes.values() if m.changed and m.parses)
    return n * len(oracle.CONFIGS)


def attribute(orc: oracle.Oracle, rec: oracle.Record, work: str) -> dict[tuple[str, str], str]:
    """(mode, code) -> what fixing only that rule does, for fix violations naming several rules."""
    out: dict[tuple[str, str], str] = {}
    for mode in oracle.MODES:
        vs = [v for v in rec.violations if v.mode == mode and v.cause == "fix" and len(v.rules) > 1]
        if not vs:
            continue
        codes = sorted({c for v in vs for c in v.rules})
        for code in codes:
            d = os.path.join(work, f"attr_{mode}_{code}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, rec.name)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(rec.subject)
            args = ["fix", *oracle.COMMON_ARGS, "--select", code, *(["--unsafe-fixes"] if mode == "unsafe" else []), rec.name]
            orc.cli(args, d)
            with open(path, encoding="utf-8", newline="") as fh:
                text = fh.read()
            if text == rec.subject:
                out[(mode, code)] = "no change"
                continue
            o = oracle.outcome_of(path, text, oracle.LOOP_NAMES)
            if o.error and (rec.original is None or o.errors_by_config() != rec.original.errors_by_config()):
                out[(mode, code)] = f"alone: raises {o.error[:160]}"
            elif rec.expected is not None and o.differs(rec.expected) and rec.original is not None and o.differs(rec.original):
                out[(mode, code)] = "alone: changes the numbers (neither original nor expected)"
            else:
                out[(mode, code)] = "alone: harmless"
    return out


def effect(vs: list[oracle.Violation]) -> str:
    text = " ".join(v.detail for v in vs)
    if "does not parse" in text:
        return "breaks (syntax)"
    if "raises" in text or "error" in text:
        return "breaks (raises)"
    if "differs" in text or "changed what" in text:
        return "changes the numbers"
    return "rewrites correct code"


def table(rows: list[list[str]], header: list[str]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in r) + " |" for r in rows]
    return out


def short(text: str, n: int = 170) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generated", type=int, default=1000, help="generated programs (seeds start..start+N)")
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--out", default="fixsafety-baseline.md")
    ap.add_argument("--json", default=None, help="also write every record as JSON here")
    ap.add_argument("--label", default="baseline")
    args = ap.parse_args()

    import torch  # noqa: F401  (the import and the first optimizer are paid once)

    t0 = time.time()
    work = tempfile.mkdtemp(prefix="fixsafety-")
    cli = oracle.make_cli(default="server")
    try:
        corpus = oracle.run_corpus(os.path.join(work, "corpus"), cli=cli)
        t_corpus = time.time() - t0
        orc_c = oracle.Oracle(os.path.join(work, "corpus-attr"), cli)
        attributions = {r.name: attribute(orc_c, r, os.path.join(work, "attr", r.name[:-3])) for r in corpus
                        if any(v.cause == "fix" and len(v.rules) > 1 for v in r.violations)}
        t1 = time.time()
        gen_orc = oracle.Oracle(os.path.join(work, "gen"), cli)
        gen: list[tuple[int, generator.Program, oracle.Record]] = []
        for k in range(args.generated):
            seed = args.seed_start + k
            prog = generator.compose_seeded(seed)
            rec = gen_orc.run([(f"gen_{seed}.py", prog.text)])[0]
            gen.append((seed, prog, rec))
            for o in [rec.original, rec.expected, *(m.outcome for m in rec.modes.values())]:
                for run in (o.runs.values() if o is not None else ()):  # keep memory flat
                    run.params = ()
            if (k + 1) % 100 == 0:
                print(f"generated {k + 1}/{args.generated} ({time.time() - t1:.0f} s)", file=sys.stderr)
        t_gen = time.time() - t1
    finally:
        cli.close()
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"corpus": [r.as_json() for r in corpus],
                       "generated": [dict(r.as_json(), seed=s, plan=generator.describe_plan(p.plan)) for s, p, r in gen]},
                      fh, indent=1)

    L: list[str] = []
    kinds = collections.Counter(r.header.kind for r in corpus)
    L += [f"# amplint fix safety: {args.label} measurement (issue 11)", "",
          f"amplint as of `{_git_head()}` (the last commit touching `amplint/`), torch 2.13.0 CPU, measured {time.strftime('%Y-%m-%d %H:%M')}. "
          f"Produced by `tests/fixsafety/run_baseline.py --generated {args.generated}` "
          f"({t_corpus:.0f} s corpus, {t_gen:.0f} s generator).", ""]

    # ---------------------------------------------------------------- corpus summary
    findings = collections.Counter(m.code for r in corpus for m in r.findings)
    fixed = {mode: sum(r.modes[mode].fix_fixed for r in corpus) for mode in oracle.MODES}
    changed = {mode: sum(r.modes[mode].changed for r in corpus) for mode in oracle.MODES}
    viol = [(r, v) for r in corpus for v in r.violations]
    files_viol = {r.name for r, _ in viol}
    L += ["## Corpus (`tests/fixsafety/loops`)", "",
          f"* files: **{len(corpus)}** ({kinds['misuse']} misuse, {kinds['correct']} correct); loop runs executed: "
          f"**{sum(runs_of(r) for r in corpus)}** ({len(oracle.CONFIGS)} configs each: "
          + ", ".join(c.name for c in oracle.CONFIGS) + ")",
          f"* findings before fixing: **{sum(findings.values())}** ("
          + ", ".join(f"{c} {n}" for c, n in sorted(findings.items())) + ")",
          f"* fixes applied (as reported by `fix`): safe **{fixed['safe']}** in {changed['safe']} files; "
          f"with `--unsafe-fixes` **{fixed['unsafe']}** in {changed['unsafe']} files",
          f"* property violations: **{len(viol)}** in **{len(files_viol)}** files "
          f"(safe mode {sum(v.mode == 'safe' for _, v in viol)}, unsafe mode {sum(v.mode == 'unsafe' for _, v in viol)}); "
          f"failing tests `test_fix_safety[...]`: {len({(r.name, v.mode) for r, v in viol})} of {2 * len(corpus)}",
          ""]
    by_prop = collections.Counter((v.prop, v.mode) for _, v in viol)
    L += table([[p, by_prop[(p, 'safe')], by_prop[(p, 'unsafe')]] for p in "abcdef"],
               ["property", "safe mode", "unsafe mode"]) + [""]
    by_rule: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r, v in viol:
        for c in v.rules or ("-",):
            by_rule[c][(v.prop, v.mode)] += 1
    L += ["### Violations per rule (a violation naming several rules counts for each)", ""]
    L += table([[c, sum(cnt.values()), ", ".join(f"({p}) {m}: {n}" for (p, m), n in sorted(cnt.items())),
                 ", ".join(sorted({r.name for r, v in viol if c in v.rules}))]
                for c, cnt in sorted(by_rule.items())], ["rule", "violations", "by property/mode", "files"]) + [""]

    # ---------------------------------------------------------------- broken / changed
    L += ["### Fixes that broke code or changed what it computes", "",
          "Each (file, mode) once; `cause=fix` violations of (a)/(b)/(c)/(d) only.", ""]
    rows = []
    for r in corpus:
        for mode in oracle.MODES:
            vs = [v for v in r.violations if v.mode == mode and v.cause == "fix" and v.prop in "abcd"]
            if not vs:
                continue
            vs.sort(key=lambda v: "dbca".index(v.prop))
            rules = sorted({c for v in vs for c in v.rules})
            att = attributions.get(r.name, {})
            who = "; ".join(f"{c}: {att[(mode, c)]}" for c in rules if (mode, c) in att)
            rows.append([r.name, r.header.kind, mode, ",".join(rules), effect(vs),
                         short(vs[0].detail) + (f" ({who})" if who else "")])
    L += table(rows, ["file", "kind", "mode", "rule", "effect", "what happened"]) + [""]
    eff = collections.Counter((x[2], x[4]) for x in rows)
    L += [f"Safe fixes that broke or changed code: **{sum(1 for x in rows if x[2] == 'safe')}** files ("
          + ", ".join(f"{e} {n}" for (m, e), n in sorted(eff.items()) if m == "safe") + "); with `--unsafe-fixes`: "
          f"**{sum(1 for x in rows if x[2] == 'unsafe')}** files ("
          + ", ".join(f"{e} {n}" for (m, e), n in sorted(eff.items()) if m == "unsafe")
          + "). A file broken by a safe fix is broken under `--unsafe-fixes` too.", ""]

    # ---------------------------------------------------------------- per defect
    L += ["### Issue 11 defects: the reproducers", ""]
    rows = []
    for d in range(1, 11):
        for r in corpus:
            if d not in r.header.defects:
                continue
            vs = r.violations
            res = "no violation" if not vs else "; ".join(sorted({f"({v.prop}) {v.mode} {','.join(v.rules)}: {short(v.detail, 90)}" for v in vs}))
            rows.append([d, r.name, r.header.kind, ", ".join(m.short() for m in r.findings) or "none", res])
    L += table(rows, ["defect", "file", "kind", "findings", "baseline result"]) + [""]
    L += ["Defect 10 (hard links, read-only files) is checked by `test_fix_writes_through_hard_links` and "
          "`test_fix_leaves_read_only_files` on `d10_hardlinked_readonly.py` (see the test run).", ""]

    # ---------------------------------------------------------------- other
    fp = [r for r in corpus if r.header.kind == "correct" and r.findings]
    L += ["### False positives on correct files", ""]
    L += table([[r.name, ", ".join(m.short() for m in r.findings), "yes" if r.modes["safe"].changed else "no",
                 "yes" if r.modes["unsafe"].changed else "no"] for r in fp],
               ["file", "findings", "safe fix rewrites it", "unsafe fix rewrites it"]) + [""]
    misses = [(r, sorted(set(r.header.codes) - {m.code for m in r.findings})) for r in corpus if r.header.kind == "misuse"]
    misses = [(r, c) for r, c in misses if c]
    L += ["### Misuse the linter does not report (information; not a property of issue 11)", ""]
    L += table([[r.name, ", ".join(c), ", ".join(m.short() for m in r.findings) or "none"] for r, c in misses],
               ["file", "expected but not reported", "reported"]) + [""]

    # ---------------------------------------------------------------- generator
    gk = collections.Counter(p.kind for _, p, _ in gen)
    ginj = collections.Counter(i for _, p, _ in gen for i in p.plan.inject)
    gviol = [(s, p, r, v) for s, p, r in gen for v in r.violations]
    gfix = {mode: sum(r.modes[mode].fix_fixed for _, _, r in gen) for mode in oracle.MODES}
    gchg = {mode: sum(r.modes[mode].changed for _, _, r in gen) for mode in oracle.MODES}
    progs_viol = {s for s, _, _, _ in gviol}
    L += [f"## Generator (`tests/fixsafety/generator.py`), seeds {args.seed_start}..{args.seed_start + args.generated - 1}", "",
          f"* programs: **{len(gen)}** ({gk['misuse']} misuse, {gk['correct']} correct); loop runs executed: "
          f"**{sum(runs_of(r) for _, _, r in gen)}**; {t_gen / max(1, len(gen)):.2f} s per program",
          "* injections: " + ", ".join(f"{i} {n}" for i, n in sorted(ginj.items())),
          f"* fixes applied: safe **{gfix['safe']}** in {gchg['safe']} programs, unsafe **{gfix['unsafe']}** in {gchg['unsafe']} programs",
          f"* programs with a violation: **{len(progs_viol)}** ({100 * len(progs_viol) / max(1, len(gen)):.1f}%); "
          f"violations: **{len(gviol)}**", ""]
    def progs(pred) -> int:
        return len({s for s, _, _, v in gviol if pred(v)})

    L += table([[mode,
                 progs(lambda v, m=mode: v.mode == m and v.cause == "fix" and v.prop in "bcd"),
                 progs(lambda v, m=mode: v.mode == m and v.cause == "missed"),
                 progs(lambda v, m=mode: v.mode == m and v.cause == "count"),
                 progs(lambda v, m=mode: v.mode == m and v.cause == "comment"),
                 progs(lambda v, m=mode: v.mode == m and v.cause == "finding")]
                for mode in oracle.MODES],
               ["mode", "programs where the fix broke/changed code", "... where an unreported misuse remained",
                "... with a count mismatch", "... that lost a comment", "... correct but reported"]) + [""]
    sig = collections.Counter((v.prop, v.mode, v.cause, ",".join(v.rules)) for _, _, _, v in gviol)
    first: dict[tuple, int] = {}
    for s, _, _, v in gviol:
        first.setdefault((v.prop, v.mode, v.cause, ",".join(v.rules)), s)
    ex: dict[tuple, str] = {}
    for s, p, r, v in gviol:
        ex.setdefault((v.prop, v.mode, v.cause, ",".join(v.rules)), short(v.detail, 120))
    L += table([[p, m, c, ru, n, len({s for s, _, _, v in gviol if (v.prop, v.mode, v.cause, ",".join(v.rules)) == (p, m, c, ru)}),
                 first[(p, m, c, ru)], ex[(p, m, c, ru)]]
                for (p, m, c, ru), n in sorted(sig.items(), key=lambda kv: -kv[1])],
               ["property", "mode", "cause", "rules", "violations", "programs", "first seed", "example"]) + [""]
    L += ["`cause`: fix = the fix broke or changed the code; missed = the fix was harmless but a misuse in "
          "the program was never reported, so \"no finding remains\" was false; finding = a finding on a correct "
          "program; count = check/fix/--diff counts; comment = a comment lost. Reproduce one program with "
          "`python -c \"import sys; sys.path.insert(0, 'tests/fixsafety'); import generator; "
          "print(generator.compose_seeded(SEED).text)\"`.", ""]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(L) + "\n")
    print(f"wrote {args.out}: corpus {len(viol)} violations in {len(files_viol)} files; generator "
          f"{len(gviol)} violations in {len(progs_viol)}/{len(gen)} programs", file=sys.stderr)
    return 0


def _git_head() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "log", "-1", "--format=%h %s", "--", "amplint"], cwd=os.path.dirname(os.path.dirname(HERE)),
                              capture_output=True, text=True, check=True).stdout.strip()[:90]
    except (OSError, subprocess.CalledProcessError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
