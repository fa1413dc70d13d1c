"""The systemd unit (``relay/deploy/callpost-relay.service``) as systemd
reads it: ``systemd-analyze verify`` finds nothing wrong with it (its
directives, and its ``ExecStart`` pointed at the tests' build of the
relay), and ``systemd-analyze security`` rates its sandbox at 2.0 or less
(0 is locked down, 10 is exposed: a unit with none of it rates 8 and
more). Where systemd is not installed there is nothing to check it with,
and the test says so as a skip.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest
from relay_support import RELAY_BIN

UNIT = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "callpost-relay.service"
ANALYZE = shutil.which("systemd-analyze")
# ``--threshold`` is on systemd's 0–100 scale: 20 is an exposure of 2.0.
THRESHOLD = 20

pytestmark = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


def unit_at(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "callpost-relay.service"
    path.write_text(text.replace("/usr/local/bin/callpost-relay", str(pathlib.Path(RELAY_BIN).resolve())))
    return path


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run([ANALYZE, *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_unit_verifies(tmp_path: pathlib.Path) -> None:
    unit = unit_at(tmp_path, UNIT.read_text())
    done = analyze("verify", "--man=no", str(unit))
    assert done.returncode == 0, done.stderr
    # verify prints what it finds wrong (unknown directives, a missing
    # binary) and exits 0 for some of it.
    assert done.stderr.strip() == "", done.stderr


def test_the_sandbox_rates_2_or_less(tmp_path: pathlib.Path) -> None:
    unit = unit_at(tmp_path, UNIT.read_text())
    done = analyze("security", "--offline=true", f"--threshold={THRESHOLD}", str(unit))
    assert done.returncode == 0, done.stdout
    # The check can fail: the same unit without its sandbox is refused.
    bare = "\n".join(
        line
        for line in UNIT.read_text().splitlines()
        if not line.startswith(("Protect", "Private", "Restrict", "SystemCall", "NoNewPrivileges", "Capability"))
    )
    done = analyze("security", "--offline=true", f"--threshold={THRESHOLD}", str(unit_at(tmp_path, bare)))
    assert done.returncode != 0, done.stdout
