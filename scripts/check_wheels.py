"""Checks that wheels are ready for PyPI: each one's platform tags are ones
``auditwheel show`` finds the wheel consistent with.

    python scripts/check_wheels.py target/wheels/*.whl

PyPI refuses the local-only ``linux_x86_64`` tag. A ``manylinux_X_Y`` tag
(or its legacy alias) promises that the wheel runs with glibc X.Y or
later: the glibc version auditwheel finds in the wheel's ELF files'
symbol versions must be at most X.Y. A ``musllinux`` tag is only honest
for a wheel that needs no shared library at all (a static binary, such as
the relay's): auditwheel reads glibc symbol versions, not musl's.
Exits 1 with a line per wheel that fails.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_of(tag: str) -> tuple[int, int] | None:
    """The glibc version a manylinux platform tag promises, or None."""
    for alias, version in LEGACY.items():
        if tag.startswith(alias + "_"):
            return version
    m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    return (int(m.group(1)), int(m.group(2))) if m else None


def problems(wheel: pathlib.Path) -> list[str]:
    tags = wheel.name.removesuffix(".whl").split("-")[-1].split(".")
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=False
    )
    text = " ".join((shown.stdout + shown.stderr).split())
    found = re.search(r'consistent with the following platform tag: "(\S+)"', text)
    if shown.returncode != 0 or found is None:
        return [f"auditwheel cannot read it: {text[:300]}"]
    needs = glibc_of(found.group(1))
    static = "requires no external shared libraries" in text
    out: list[str] = []
    for tag in tags:
        promised = glibc_of(tag)
        if tag.startswith("linux_"):
            out.append(f"{tag}: a local-only tag, which PyPI refuses")
        elif promised is not None and needs is not None and promised < needs:
            out.append(f"{tag}: promises glibc {promised[0]}.{promised[1]}, but it needs {found.group(1)}")
        elif tag.startswith("musllinux_") and not static:
            out.append(f"{tag}: it needs shared libraries, checked for glibc only")
    return out


def main(paths: list[str]) -> int:
    failed = 0
    if not paths:
        print("check_wheels: no wheels given", file=sys.stderr)
        return 2
    for path in paths:
        wheel = pathlib.Path(path)
        found = problems(wheel)
        for p in found:
            print(f"{wheel.name}: {p}", file=sys.stderr)
        failed += bool(found)
        if not found:
            print(f"{wheel.name}: its tags agree with auditwheel")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
