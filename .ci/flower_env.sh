#!/usr/bin/env bash
# Build a virtualenv with Flower 1.42 and fastfc for the real-deployment tests (tests/test_flower.py)
# and print its bin directory. flwr 1.42.0 pins certifi>=2026.10.19. Where the index holds such a
# certifi (2026.10.19.post1 is on the index as of 2026-11-25) `pip install flwr==1.42.0` resolves and is
# used; where it does not, pip would fail (or silently fall back to 1.41, whose CLI differs), so the
# wheel is installed without dependencies and its requirements with the newest certifi available.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTFC_FLOWER_VENV:-.ci/.flwr-venv}
FLWR=1.42.0
if [ ! -x "$VENV/bin/flwr" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  if ! "$VENV/bin/pip" install -q "flwr==$FLWR" >&2; then
    echo "flower_env.sh: flwr==$FLWR does not resolve on this index; installing its wheel without dependencies" >&2
    tmp=$(mktemp -d)
    "$VENV/bin/pip" download -q "flwr==$FLWR" --no-deps -d "$tmp" >&2
    "$VENV/bin/python" - "$tmp" <<'PY' > "$tmp/deps.txt"
import sys, zipfile, glob, re
whl = glob.glob(sys.argv[1] + "/flwr-*.whl")[0]
meta = zipfile.ZipFile(whl).read([n for n in zipfile.ZipFile(whl).namelist() if n.endswith("METADATA")][0]).decode()
for line in meta.splitlines():
    if line.startswith("Requires-Dist:") and "extra ==" not in line:
        req = line.split(":", 1)[1].strip()
        if not req.startswith("certifi"):
            print(req)
print("certifi")
PY
    "$VENV/bin/pip" install -q "$tmp"/flwr-*.whl --no-deps >&2
    "$VENV/bin/pip" install -q -r "$tmp/deps.txt" >&2
    rm -rf "$tmp"
  fi
fi
# build requirements of fastfc (its Cython kernels cimport scipy's BLAS)
"$VENV/bin/pip" install -q "cython>=3.0.11,<4" setuptools wheel numpy scipy >&2
# always the working tree's fastfc (not one left from an earlier run)
"$VENV/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps . >&2
"$VENV/bin/pip" install -q --no-build-isolation . >&2
# checks and warm-up run from / so that the venv's fastfc is imported, not this checkout's
VPY="$(cd "$VENV/bin" && pwd)/python"
(cd / && "$VPY" -c "import flwr, fastfc.flower; assert flwr.__version__ == '$FLWR', flwr.__version__") >&2
# warm the on-disk Numba cache of this install (a SuperNode's first task must not spend the reply
# time-out compiling): `fastfc warmup` compiles every kernel of the installed package, in the venv the
# SuperNodes run from (from / so that the venv's fastfc is imported, not this checkout's)
(cd / && "$VPY" -c "import fastfc; assert '/.ci/' in fastfc.__file__ or 'site-packages' in fastfc.__file__, fastfc.__file__" \
  && "$(dirname "$VPY")/fastfc" warmup --quiet) >&2
echo "$(cd "$VENV/bin" && pwd)"
