"""The relay's image (``relay/deploy/image.sh`` from
``relay/deploy/Containerfile``) as an operator gets it.

The archive is unpacked the way a runtime unpacks it (``skopeo copy`` to an
OCI layout, ``umoci unpack`` to a root filesystem and a runtime
configuration), and its entrypoint runs from that root filesystem alone
(``unshare --root``: none of the host's files is visible, nothing is
mounted into it), as the image's user, with the image's environment and
working directory and nothing else. It starts, takes calls from Segment's
Python SDK, delivers them signed to a receiver on 127.0.0.1, answers its
own health check, and stops on SIGTERM. (Podman cannot start containers on
these machines: its runtime is refused the rlimits and cgroups it sets.)

The archive is ``CALLPOST_RELAY_IMAGE`` (``scripts/test.sh`` builds it once,
in the dev profile), else one this module builds. Running a root
filesystem as another user needs root; where the tools or root are missing
and no archive was given, the module says so as a skip.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from relay_support import ADMIN, SECRET, WRITE_KEY, Hook, free_port

ROOT = pathlib.Path(__file__).resolve().parents[3]
SDK = pathlib.Path(__file__).resolve().parent / "sdk"
TOOLS = ("skopeo", "umoci", "unshare", "readelf")
GIVEN = os.environ.get("CALLPOST_RELAY_IMAGE")
N = 10
"""Calls of each kind the SDK sends (six kinds)."""


def _missing() -> str | None:
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not installed (scripts/test.sh installs them)"
    if os.geteuid() != 0:
        return "running a root filesystem as another user needs root"
    return None


@pytest.fixture(scope="module")
def image() -> pathlib.Path:
    why = _missing()
    if why is not None:
        if GIVEN:
            pytest.fail(f"CALLPOST_RELAY_IMAGE is given, but {why}")
        pytest.skip(why)
    if GIVEN:
        return pathlib.Path(GIVEN)
    built = subprocess.run(
        ["bash", str(ROOT / "relay" / "deploy" / "image.sh"), "--profile", "dev"],
        capture_output=True,
        text=True,
        check=True,
        timeout=1200,
    )
    return pathlib.Path(built.stdout.strip().splitlines()[-1])


def image_config(archive: pathlib.Path) -> dict[str, Any]:
    """The image's configuration, read from the docker-archive itself (the
    file runtimes read; ``skopeo inspect --config`` leaves the health
    check out)."""
    with tarfile.open(archive) as tar:
        manifest = tar.extractfile("manifest.json")
        assert manifest is not None
        name = json.load(manifest)[0]["Config"]
        config = tar.extractfile(name)
        assert config is not None
        loaded: dict[str, Any] = json.load(config)
        return loaded


@pytest.fixture(scope="module")
def bundle(image: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The image unpacked: ``rootfs/`` and the runtime's ``config.json``."""
    where = tmp_path_factory.mktemp("image")
    subprocess.run(["skopeo", "copy", "-q", f"docker-archive:{image}", f"oci:{where / 'oci'}:relay"], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{where / 'oci'}:relay", str(where / "bundle")], check=True)
    return where / "bundle"


def files_of(rootfs: pathlib.Path) -> set[str]:
    return {str(p.relative_to(rootfs)) for p in rootfs.rglob("*") if not p.is_dir()}


def test_the_image_is_the_binary_its_ca_roots_and_a_user(image: pathlib.Path, bundle: pathlib.Path) -> None:
    rootfs = bundle / "rootfs"
    assert files_of(rootfs) == {
        "usr/bin/callpost-relay",
        "etc/passwd",
        "etc/group",
        "etc/ssl/certs/ca-certificates.crt",
    }
    binary = rootfs / "usr" / "bin" / "callpost-relay"
    # Static: no program interpreter, no shared library.
    headers = subprocess.run(["readelf", "-lW", str(binary)], capture_output=True, text=True, check=True).stdout
    dynamic = subprocess.run(["readelf", "-dW", str(binary)], capture_output=True, text=True, check=True).stdout
    assert "INTERP" not in headers and "(NEEDED)" not in dynamic
    # Root's and not writable by the relay; the state directory alone is
    # the user's.
    assert binary.stat().st_uid == 0 and binary.stat().st_mode & 0o022 == 0
    state = rootfs / "var" / "lib" / "callpost-relay"
    assert (state.stat().st_uid, state.stat().st_gid) == (65532, 65532)
    assert (rootfs / "var" / "lib").stat().st_uid == 0
    assert "callpost:x:65532:65532:" in (rootfs / "etc" / "passwd").read_text()

    config = image_config(image)["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/bin/callpost-relay"]
    assert config["WorkingDir"] == "/var/lib/callpost-relay"
    assert "8088/tcp" in config["ExposedPorts"]
    assert config["Healthcheck"]["Test"] == ["CMD", "/usr/bin/callpost-relay", "healthcheck"]
    assert "CALLPOST_RELAY_LISTEN=0.0.0.0:8088" in config["Env"]


class Contained:
    """A command of the image run from its root filesystem, as its user,
    with its environment (plus ``env``) and nothing of the host's."""

    def __init__(self, bundle: pathlib.Path, env: dict[str, str]) -> None:
        process = json.loads((bundle / "config.json").read_text())["process"]
        self.entrypoint: list[str] = process["args"]
        self.prefix = [
            "unshare",
            f"--root={bundle / 'rootfs'}",
            f"--wd={process['cwd']}",
            f"--setgid={process['user']['gid']}",
            f"--setuid={process['user']['uid']}",
            "--",
        ]
        self.env = dict(item.split("=", 1) for item in process["env"])
        self.env.update(env)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *self.entrypoint, *args], env=self.env, capture_output=True, text=True, timeout=30
        )

    def start(self, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
        proc = subprocess.Popen(
            [*self.prefix, *self.entrypoint, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log: list[str] = []
        listening = threading.Event()

        def drain() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.append(line.rstrip())
                if "listening on" in line:
                    listening.set()
            listening.set()

        threading.Thread(target=drain, daemon=True).start()
        if not listening.wait(60) or proc.poll() is not None:
            raise AssertionError("the image's relay did not start:\n" + "\n".join(log))
        return proc, log


@pytest.fixture
def hook(serve: Any) -> Iterator[Hook]:
    yield Hook(serve)


def test_the_image_runs_from_its_root_filesystem_alone(bundle: pathlib.Path, hook: Hook) -> None:
    port = free_port()
    # The image's own listen address (every address) on a free port.
    contained = Contained(
        bundle,
        {
            "CALLPOST_RELAY_LISTEN": f"0.0.0.0:{port}",
            "CALLPOST_RELAY_SHARED_SECRET": SECRET,
            "CALLPOST_RELAY_ADMIN_TOKEN": ADMIN,
        },
    )
    version = contained.run("--version")
    assert version.returncode == 0 and version.stdout.startswith("callpost-relay "), version.stderr
    proc, log = contained.start("--write-key", WRITE_KEY, "--webhook-url", hook.url, "--allow-private-networks")
    try:
        health = contained.run("healthcheck")
        assert health.returncode == 0, health.stderr
        assert f"http://127.0.0.1:{port}/healthz answered 200" in health.stdout

        sent = subprocess.run(
            [
                sys.executable,
                str(SDK / "send_python.py"),
                f"http://127.0.0.1:{port}",
                WRITE_KEY,
                str(N),
                "0",
                "img",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sent.returncode == 0, sent.stderr

        # One delivery per call: its Idempotency-Key is the call's.
        deadline = time.monotonic() + 60
        while len(hook.keys()) < 6 * N and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(hook.keys()) == 6 * N, "\n".join(log[-30:])
        assert set(hook.keys().values()) == {1}
        assert all(d.verified for d in hook.ok())
        # Stored where the image keeps its state, as its user.
        db = bundle / "rootfs" / "var" / "lib" / "callpost-relay" / "callpost-relay.db"
        assert db.stat().st_uid == 65532
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, "\n".join(log[-30:])
    # Nothing answers now: the check fails, so it can.
    assert contained.run("healthcheck").returncode == 1
