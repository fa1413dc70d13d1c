"""``python -m callpost relay``: the relay is a native program,
``callpost-relay`` (the Rust crate in ``relay/``), installed by
``pip install 'callpost[relay]'``. This launcher finds it and ``exec``s it
in this process's place, so signals, the PID and the exit status are the
relay's own. Every argument goes to it unchanged; ``python -m callpost
relay --help`` lists them.

``CALLPOST_RELAY_BIN`` names another binary to run (a build of your own).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

__all__ = ["exec_relay", "relay_binary"]

NAME = "callpost-relay"


def relay_binary() -> str | None:
    """The relay binary this launcher runs: ``CALLPOST_RELAY_BIN``, else
    the one installed beside this Python (the ``callpost-relay`` wheel puts
    it in the environment's scripts directory), else one on ``PATH``."""
    chosen = os.environ.get("CALLPOST_RELAY_BIN")
    if chosen:
        return chosen
    for scripts in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scripts, NAME)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(NAME)


def exec_relay(args: list[str]) -> int:
    """Replaces this process with the relay; returns only when it cannot
    be started (exit status 2, with the reason on stderr)."""
    binary = relay_binary()
    if binary is None:
        print(
            "callpost relay: the relay is not installed: pip install 'callpost[relay]'"
            " (from a clone of the repository: pip install ./relay)",
            file=sys.stderr,
        )
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(binary, [binary, *args])
    except OSError as e:
        print(f"callpost relay: cannot run {binary}: {e.strerror}", file=sys.stderr)
    return 2
