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
  # Two lanes at once (the 2-core machine): the browser tests, and the rest followed by the browser
  # test files in SECOND, in one pytest process (they share its browser, site and Python snapshot:
  # tests/conftest.py marks them `second`). SECOND is chosen by the files' times in
  # artifacts/tests/*.xml so that each lane ends near the middle. The site's pinned inputs are
  # fetched here first so that the two never fetch them at once. Each lane's output is printed
  # whole once both have ended.
  "$PY" -c "from chatlens.host import build as b; c = b.Checkout.at(); b.ensure_node_modules(c); b.ensure_wheels(c)"
  lanes=artifacts/tests
  mkdir -p "$lanes"
  SECOND=(test_robust_browser.py test_store_browser.py test_firefox_browser.py test_compare_browser.py
          test_gpu_browser.py test_bench_browser.py test_continuity_browser.py test_persist_browser.py)
  export CHATLENS_SECOND_LANE="${SECOND[*]}"
  "$PY" -m pytest -q -p no:cacheprovider --durations=30 -m "browser and not second" --junitxml="$lanes/browser.xml" \
    >"$lanes/browser.log" 2>&1 &
  browser=$!
  rest=0
  "$PY" -m pytest -q -p no:cacheprovider --durations=30 -m "not browser or second" --junitxml="$lanes/rest.xml" \
    >"$lanes/rest.log" 2>&1 || rest=$?
  wait "$browser" || status=$?
  [ "$rest" -eq 0 ] || status=$rest
  for lane in rest browser; do echo "== the $lane lane ($lanes/$lane.log)"; cat "$lanes/$lane.log"; done
  echo "== the 30 slowest of both lanes"
  grep -hE '^[0-9.]+s +(setup|call|teardown) ' "$lanes/rest.log" "$lanes/browser.log" | sort -rn | head -30 || true
fi
echo "scripts/test.sh: $(took "$started") in all (pytest $(took "$pytest_started")); exit status $status"
exit "$status"
