#!/usr/bin/env bash
# Set up (idempotent) and run every test. This is what .ci/run runs. It ends by printing its own
# wall time (the budget is 20 minutes on the 2-core machine, idle), after pytest's 30 slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
took() { local s=$((SECONDS - $1)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }
bash scripts/setup.sh --test
# The browser-side model store's pure logic and downloader (site/js/store/) and the page's pure
# modules (tests/page/), in node. The store hashes with @noble/hashes from the site build's
# pinned npm packages.
[ -f build/node_modules/@noble/hashes/sha2.js ] || npm ci --prefix build --no-audit --no-fund --ignore-scripts >/dev/null
node --test tests/store/ tests/page/
# Every test runs here: a missing reference or a test that skips fails the run (tests/conftest.py).
export CHATLENS_NO_SKIP=1
pytest_started=$SECONDS
status=0
"${PYTHON:-python3}" -m pytest -q --durations=30 "$@" || status=$?  # the slowest 30: where the budget goes
echo "scripts/test.sh: $(took "$started") in all (pytest $(took "$pytest_started")); exit status $status"
exit "$status"
