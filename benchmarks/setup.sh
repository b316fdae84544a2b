#!/usr/bin/env bash
# Create benchmarks/.venv with the tools that benchmarks/bench.py compares.
#
#   bash benchmarks/setup.sh                 # ruff (pinned) + amplint (editable)
#   WITH_FIXIT=1 bash benchmarks/setup.sh    # ... and fixit, for the optional fixit row
#
# Environment knobs:
#   PYTHON=python3.12      interpreter used to create the venv (default: python3)
#   RUFF_VERSION=0.17.6    ruff release to pin
#   FIXIT_VERSION=2.2.1    fixit release to pin (only with WITH_FIXIT=1)
#   SKIP_AMPLINT=1         do not install the amplint checkout
#
# torch is never installed: a constraint that no torch release satisfies is passed
# to every pip call, so anything that tries to pull torch in fails loudly instead.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PYTHON="${PYTHON:-python3}"
RUFF_VERSION="${RUFF_VERSION:-0.17.6}"
FIXIT_VERSION="${FIXIT_VERSION:-2.2.1}"
VENV="$HERE/.venv"

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"benchmarks need Python >= 3.10, got {sys.version.split()[0]}")
PY

if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

NO_TORCH="$(mktemp)"
trap 'rm -f "$NO_TORCH"' EXIT
printf 'torch<0\n' > "$NO_TORCH"
pip_install() {
    "$PY" -m pip install --disable-pip-version-check -c "$NO_TORCH" "$@"
}

echo "==> installing ruff==$RUFF_VERSION"
pip_install "ruff==$RUFF_VERSION"

if [ "${SKIP_AMPLINT:-0}" != "1" ]; then
    echo "==> installing amplint checkout (editable) from $ROOT"
    if ! pip_install -e "$ROOT"; then
        echo "WARNING: 'pip install -e $ROOT' failed; amplint rows of bench.py will show errors." >&2
    fi
    # An editable install leaves no .pyc files; with PYTHONDONTWRITEBYTECODE set (common in
    # containers) every run would recompile amplint's sources. A regular `pip install`
    # compiles at install time, so compile here too for a fair start-up figure.
    PYTHONDONTWRITEBYTECODE= "$PY" -m compileall -q "$ROOT/amplint" >/dev/null || true
fi

if [ "${WITH_FIXIT:-0}" = "1" ]; then
    echo "==> installing fixit==$FIXIT_VERSION"
    pip_install "fixit==$FIXIT_VERSION"
fi

if "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; then
    echo "ERROR: torch ended up in $VENV; the benchmark venv must stay torch-free." >&2
    exit 1
fi

echo
echo "ruff:    $("$VENV/bin/ruff" --version)"
if [ -x "$VENV/bin/amplint" ]; then
    echo "amplint: $VENV/bin/amplint"
fi
echo "Done. Next:"
echo "  $PY $HERE/bench.py synth --files 2000 --out $HERE/out/corpus --seed 0 --verify"
echo "  $PY $HERE/bench.py run $HERE/out/corpus --json $HERE/out/results.json"
