#!/usr/bin/env bash
# A NumPy built from its sdist without BLAS or LAPACK, as Pyodide's is, in a venv of its own:
# .cache/noblas-venv/. `python -m chatlens bench` adds a row for it when it exists. chatlens runs
# there from the checkout:
#   PYTHONPATH=py .cache/noblas-venv/bin/python -m chatlens bench --no-reference
#   PYTHONPATH=py .cache/noblas-venv/bin/python -m pytest -p no:cacheprovider tests/test_backend.py tests/test_numpy_paths.py
# About 8 minutes on 2 idle cores; a no-op once built. NUMPY_VERSION picks the version (default:
# the host Python's NumPy, else 2.4.6).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.cache/noblas-venv
VERSION=${NUMPY_VERSION:-$("$PY" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo 2.4.6)}
DEPS=("jinja2>=3.1" "pytest>=8" "wgpu==0.32.0")  # what chatlens and those tests import besides numpy (pyproject.toml)

has() {  # has numpy|all: the venv's numpy is $VERSION without BLAS (all: and DEPS import)
  "$VENV/bin/python" - "$VERSION" "$1" <<'EOF' 2>/dev/null
import sys, numpy
if sys.argv[2] == "all":
    import jinja2, pytest, wgpu  # noqa: F401
blas = numpy.__config__.CONFIG["Build Dependencies"]["blas"]
sys.exit(0 if numpy.__version__ == sys.argv[1] and not blas.get("found") else 1)
EOF
}

if [ -x "$VENV/bin/python" ] && has all; then
  echo "$VENV: numpy $VERSION without BLAS is already there"
  exit 0
fi
mkdir -p .cache
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
pip install "${DEPS[@]}"
if ! has numpy; then
  pip install --force-reinstall --no-deps --no-binary numpy "numpy==$VERSION" \
    -Csetup-args=-Dallow-noblas=true -Csetup-args=-Dblas=none -Csetup-args=-Dlapack=none
fi
has all || { echo "$VENV: numpy $VERSION without BLAS did not install" >&2; exit 1; }
echo "$VENV: numpy $VERSION without BLAS"
