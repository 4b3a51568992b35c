"""scripts/bench_browser.py runs and prints its figures: its cheapest section (the tiny model's long
use) at the smallest sizes. No timing is checked: the figures are for reading."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from webapp import CHROMIUM, ROOT

pytestmark = pytest.mark.browser


def test_the_long_use_section_prints_its_figures():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_browser.py"), "--only", "long", "--turns", "3", "--replies", "2"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "== long use (issue 11)" in out
    assert re.search(r"previews, first 3: median [\d.]+ ms, max [\d.]+ ms; last 3: median [\d.]+ ms", out), out
    assert re.search(r"replies: first 2 median \d+ ms", out), out
    assert "page JS heap" in out and "worker wasm memory" in out and "GPU process RSS" in out, out
    for label in ("before", "1", "2"):  # a row of four memory figures at each sample
        assert re.search(rf"^ +{label}( +[\d.]+ MB){{4}}$", out, re.M), out
