#!/usr/bin/env bash
# Set up (idempotent) and run every test. This is what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
exec "${PYTHON:-python3}" -m pytest -q "$@"
