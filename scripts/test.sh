#!/usr/bin/env bash
# Set up (idempotent) and run every test. This is what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The browser-side model store's pure logic and downloader (site/js/store/) and the page's pure
# modules (tests/page/), in node. The store hashes with @noble/hashes from the site build's
# pinned npm packages.
[ -f build/node_modules/@noble/hashes/sha2.js ] || npm ci --prefix build --no-audit --no-fund --ignore-scripts >/dev/null
node --test tests/store/ tests/page/
# Every test runs here: a missing reference or a test that skips fails the run (tests/conftest.py).
export CHATLENS_NO_SKIP=1
exec "${PYTHON:-python3}" -m pytest -q --durations=30 "$@"  # the slowest 30: where the 40-minute budget goes
