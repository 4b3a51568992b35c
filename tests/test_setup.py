"""scripts/setup.sh says when its `pip install -e .` repoints this Python's chatlens away from
another checkout or install (issue 43, item 8), also one whose folder was deleted (issue 50), and
says nothing when it was this checkout's or none. Run with a stand-in for Python that installs and fetches nothing: pip and `chatlens fetch`
are only logged, and the check runs in a real Python without site-packages (-S), with the given
folders first on its path."""

import json
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


def installed(site, folder, *, pth=True):
    """An editable install's record in `site`, as pip writes it, of a checkout whose package lies
    in folder/py/chatlens: its .pth (the folder it puts on the path) and its direct_url.json."""
    info = site / "chatlens-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: chatlens\nVersion: 0.1.0\n")
    (info / "direct_url.json").write_text(json.dumps({"dir_info": {"editable": True}, "url": folder.as_uri()}))
    files = ["chatlens-0.1.0.dist-info/METADATA", "chatlens-0.1.0.dist-info/direct_url.json"]
    if pth:
        (site / "__editable__.chatlens-0.1.0.pth").write_text(f"{folder / 'py'}\n")
        files.append("__editable__.chatlens-0.1.0.pth")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


@pytest.mark.parametrize("pth", [True, False], ids=["its .pth", "its direct_url.json alone"])
def test_setup_says_when_it_repoints_chatlens_from_a_checkout_since_deleted(tmp_path, pth):
    site, gone = tmp_path / "site", tmp_path / "deleted checkout"
    installed(site, gone, pth=pth)
    assert not gone.exists()
    was = gone / "py" / "chatlens" if pth else gone
    assert setup(tmp_path, [site]) == (
        f"scripts/setup.sh: {tmp_path / 'python3'}'s chatlens was {was} (a folder that no longer exists); it is now "
        f"this checkout's, {ROOT / 'py' / 'chatlens'} (pip install -e .)\n")


def test_setup_says_nothing_of_a_record_whose_folder_still_holds_chatlens(tmp_path):
    """Found by no import (its .pth not read) but there: this checkout's own, reinstalled."""
    site = tmp_path / "site"
    installed(site, ROOT)
    assert setup(tmp_path, [site]) == ""
