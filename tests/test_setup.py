"""scripts/setup.sh says when its `pip install -e .` repoints this Python's chatlens away from
another checkout or install (issue 43, item 8), and says nothing when it was this checkout's or
none. Run with a stand-in for Python that installs and fetches nothing: pip and `chatlens fetch`
are only logged, and the check runs in a real Python without site-packages (-S), with the given
folders first on its path."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def setup(tmp_path, path):
    python = tmp_path / "python3"
    python.write_text('#!/usr/bin/env bash\n'
                      'if [ "$1" = -c ]; then PYTHONPATH="$ON_PATH" exec python3 -S "$@"; fi\n'
                      'echo "$*" >> "$LOG"\n')
    python.chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "PYTHON": str(python), "ON_PATH": os.pathsep.join(map(str, path)), "LOG": str(log)}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["-m pip install --disable-pip-version-check -q -e .",
                                            "-m chatlens fetch"]
    return done.stderr


def test_setup_says_when_it_repoints_chatlens_from_another_checkout(tmp_path):
    other = tmp_path / "other" / "py"
    (other / "chatlens").mkdir(parents=True)
    (other / "chatlens" / "__init__.py").write_text("")
    said = setup(tmp_path, [other])
    assert said == (f"scripts/setup.sh: {tmp_path / 'python3'}'s chatlens was {other.resolve() / 'chatlens'}; it is now "
                    f"this checkout's, {ROOT / 'py' / 'chatlens'} (pip install -e .)\n")


@pytest.mark.parametrize("path", [[], [ROOT / "py"]], ids=["none", "this checkout"])
def test_setup_says_nothing_when_chatlens_was_none_or_this_checkouts(tmp_path, path):
    assert setup(tmp_path, path) == ""
