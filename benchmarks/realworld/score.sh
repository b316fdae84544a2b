#!/usr/bin/env bash
# Score an amplint against the hand labels of the development and evaluation sets.
#
#   bash benchmarks/realworld/score.sh AMPLINT_BIN CORPUS_DIR [dev|dev_b|...|dev_i|eval|eval_b|...|eval_g|both]
#
# dev, dev_b, ..., dev_i: development sets (read and fixed against); eval, eval_b, ..., eval_g: the held-out sets.
# dev_d and dev_f judge findings only (their recall counts just the misses helpers happened to note).
# `both` (the default) scores all sixteen.
#
# CORPUS_DIR holds each repository of *_repos.txt at its listed commit, as CORPUS_DIR/OWNER+NAME
# (e.g. `git clone https://github.com/OWNER/NAME CORPUS_DIR/OWNER+NAME && git -C ... checkout COMMIT`).
# The scorer is shared/tools/score_labels.py (next to this checkout, or set SCORER=...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${1:?amplint binary}; corpus=${2:?corpus dir}; which=${3:-both}
scorer=${SCORER:-$here/../../../shared/tools/score_labels.py}
for set in dev dev_b dev_c dev_d dev_e dev_f dev_g dev_h dev_i eval eval_b eval_c eval_d eval_e eval_f eval_g; do
  [ "$which" = both ] || [ "$which" = "$set" ] || continue
  printf '%s: ' "$set"
  python3 "$scorer" "$bin" "$corpus" "$here/$set.tsv" | tail -n 1
done
