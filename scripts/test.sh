#!/usr/bin/env bash
# Set up (idempotent) and run every test. This is what .ci/run runs. It ends by printing its own
# wall time (the budget is 20 minutes on the 2-core machine, idle), after the 30 slowest tests.
#   bash scripts/test.sh            every test, in two lanes at once (see below)
#   bash scripts/test.sh ARGS...    one pytest with ARGS (a selection, --junitxml=...), as before
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
PY=${PYTHON:-python3}
pytest_started=$SECONDS
status=0
if [ $# -gt 0 ]; then
  "$PY" -m pytest -q --durations=30 "$@" || status=$?  # the slowest 30: where the budget goes
else
  # Two lanes at once, the browser tests and the rest; the rest's lane ends first, and then runs a
  # few self-contained browser modules (TAIL) that would otherwise run alone at the end of the
  # browser lane.
  # Each pytest process has its own session fixtures; the site's pinned inputs are fetched here
  # first so that two never fetch them at once. Each log is printed whole once all have ended.
  "$PY" -c "from chatlens.host import build as b; c = b.Checkout.at(); b.ensure_node_modules(c); b.ensure_wheels(c)"
  TAIL=(tests/test_firefox_browser.py tests/test_firefox_experiment_browser.py tests/test_store_browser.py
        tests/test_gpu_browser.py tests/test_plain_browser.py tests/test_inspect_browser.py tests/test_bench_browser.py)
  lanes=artifacts/tests
  mkdir -p "$lanes"
  lane() { local name=$1; shift; "$PY" -m pytest -q -p no:cacheprovider --durations=30 --junitxml="$lanes/$name.xml" "$@" >"$lanes/$name.log" 2>&1; }
  lane browser -m browser "${TAIL[@]/#/--ignore=}" &
  browser=$!
  rest=0
  lane rest -m "not browser" || rest=$?
  lane tail -m browser "${TAIL[@]}" || rest=$?
  wait "$browser" || status=$?
  [ "$rest" -eq 0 ] || status=$rest
  for name in rest tail browser; do echo "== $name ($lanes/$name.log)"; cat "$lanes/$name.log"; done
  echo "== the 30 slowest of all"
  grep -hE '^[0-9.]+s +(setup|call|teardown) ' "$lanes"/{rest,tail,browser}.log | sort -rn | head -30 || true
fi
echo "scripts/test.sh: $(took "$started") in all (pytest $(took "$pytest_started")); exit status $status"
exit "$status"
