#!/usr/bin/env bash
# CI leg: fastfc on the minimum versions its pyproject.toml declares. Builds a venv with every
# runtime dependency pinned (==) to its floor, as served for this Python (3.11: the oldest wheels
# that exist for it), installs fastfc from the working tree, and runs a small but real subset of
# the tests. tests/test_phase_api.py checks that these pins equal the declared floors.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV=${FASTFC_MIN_VENV:-.ci/.min-venv}
PINS=(numpy==1.23.2 scipy==1.10.0 scikit-learn==1.6.0 numba==0.58.0 threadpoolctl==3.1.0)
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --only-binary :all: "${PINS[@]}" "pytest>=7" "pytest-benchmark>=4" "hypothesis>=6" >&2
# fastfc itself, built in an isolated build env (as a user's pip would) from this tree
"$VENV/bin/pip" install -q --force-reinstall --no-deps . >&2
"$VENV/bin/python" - "${PINS[@]}" <<'PY'
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    got = version(name)
    assert got == want, f"{name}: installed {got}, pinned {want}"
print("min-versions venv:", ", ".join(sys.argv[1:]))
PY
# run the installed fastfc (not the source tree: its kernels are not built in place here)
cd tests
# Fed-HIRE/GOLD are left out: compiling their Numba CPL kernels from cold takes minutes
# (about 3 min on 2 busy cores even with the newest Numba); the main suite runs them.
NUMBA_CACHE_DIR="$(mktemp -d)" "../$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
  -k "not fedhire and not gold and not restart and not progress" \
  test_phase_api.py test_kernels_assign.py test_kfed.py test_protocol.py
echo "min-versions leg: $(( $(date +%s) - start )) s"
