"""Every code block of the docs runs in a test, so the docs cannot go stale.

The docs are README.md, docs/*.md and the READMEs of the Python package,
the npm package and the relay. A block's info string is its language,
optionally followed by ``fragment``:

- ``python`` runs as a script in a fresh interpreter, in an empty working
  directory, with the environment below, and must exit 0. A ``python
  fragment`` is an illustration with names it does not define: it must
  compile.
- ``toml`` is a relay configuration: the relay must load it
  (``callpost-relay migrate --config``: every setting is read and checked,
  then a throwaway SQLite file is migrated).
- ``sh`` commands are checked without running what is costly: a script
  exists and parses, a directory exists, an npm script or a Cargo binary
  is there, a pip requirement names this repository's package or one of
  its extras, every flag given to the relay is in its ``--help``, and an
  exported variable is one the relay reads.
- ``text`` is what the ``sh`` block just before it prints: the relay
  command there runs, and the lines it logs up to "listening on" must be
  these (timestamps and the port aside).
- ``rust`` is the README example of the core: its lines must be those
  ``core/tests/readme.rs`` runs.
- ``json`` is something callpost writes: it must be, byte for byte, a
  string of the shared vectors in ``testdata/`` (which the three suites
  check the code against).
- ``js`` and ``mjs`` blocks are run by ``wasm/test/docs.test.mjs``.

Any other language, or a fence without one, fails here. Links between the
pages must reach a file, and a heading of it when they name one.

The examples read their settings from the environment, as a deployed app
does: ``WRITE_KEY``, ``RELAY_URL`` (here a local Tracking API that answers
200 to that write key), ``WEBHOOK_URL`` (a local receiver that checks
``X-Signature``) and ``WEBHOOK_SECRET``. Whatever either server refused
fails the block that sent it.
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import callpost
from callpost.__main__ import USAGE

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "python" / "README.md",
    ROOT / "wasm" / "README.md",
    ROOT / "relay" / "README.md",
]
HANDLED_HERE = {"python", "toml", "sh", "text", "rust", "json"}
HANDLED_BY_JS = {"js", "mjs"}
# go/e2e/docs_test.go builds and runs them (scripts/test-go.sh).
HANDLED_BY_GO = {"go"}
# Only illustrations in a language that can at least be compiled may be
# fragments; every other block runs or is checked whole.
MAY_BE_FRAGMENT = {"python", "js", "mjs"}

WRITE_KEY = "docs-write-key"
WEBHOOK_SECRET = "docs-webhook-secret"
# Long enough for anything that runs an example; only a hang reaches it.
RUN_TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    path: Path
    line: int
    lang: str
    options: tuple[str, ...]
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def fragment(self) -> bool:
        return "fragment" in self.options


def parse(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file. A fence must start its line
    (no indented or ~~~ fences: the tests would not see them)."""
    blocks: list[Block] = []
    opened: tuple[int, str] | None = None
    lines: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")) and (line != stripped or stripped.startswith("~~~")):
            raise AssertionError(f"{path.relative_to(ROOT)}:{number}: fences must be ``` at the start of a line")
        if not line.startswith("```"):
            if opened is not None:
                lines.append(line)
            continue
        if opened is None:
            opened, lines = (number, line[3:].strip()), []
            continue
        if line != "```":
            raise AssertionError(f"{path.relative_to(ROOT)}:{number}: a closing fence takes no info string")
        start, info = opened
        words = info.split()
        lang = words[0] if words else ""
        blocks.append(Block(path, start, lang, tuple(words[1:]), "\n".join(lines) + "\n"))
        opened = None
    if opened is not None:
        raise AssertionError(f"{path.relative_to(ROOT)}:{opened[0]}: a fence is never closed")
    return blocks


BLOCKS = [block for path in DOCS for block in parse(path)]


def blocks_of(lang: str) -> list[object]:
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.lang == lang]


def test_every_block_has_a_test() -> None:
    untested = [
        f"{b.where}: ```{' '.join((b.lang, *b.options))}"
        for b in BLOCKS
        if b.lang not in HANDLED_HERE | HANDLED_BY_JS | HANDLED_BY_GO
        or any(o != "fragment" for o in b.options)
        or (b.fragment and b.lang not in MAY_BE_FRAGMENT)
    ]
    assert not untested, "blocks no docs test runs (see this file's docstring):\n" + "\n".join(untested)
    assert len(BLOCKS) > 20, "the docs lost their examples, or the parser lost the docs"


# -- the servers the examples talk to ------------------------------------------


class Servers:
    """One server on 127.0.0.1 for both: a Tracking API (Basic auth with
    WRITE_KEY) and a webhook receiver (X-Signature under WEBHOOK_SECRET).
    Anything else is refused and remembered."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.received = 0
        lock = threading.Lock()
        servers = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = list(self.headers.items())
                basic = "Basic " + base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
                if self.headers.get("X-Signature") is not None:
                    ok = callpost.verify_request(body, headers, WEBHOOK_SECRET)
                else:
                    ok = self.path == "/v1/batch" and self.headers.get("Authorization") == basic
                with lock:
                    servers.received += 1
                    if not ok:
                        servers.refused.append(f"{self.path} {self.headers.get('User-Agent')}")
                reply = b'{"success":true}' if ok else b'{"code":"refused"}'
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def env(self) -> dict[str, str]:
        return {
            "WRITE_KEY": WRITE_KEY,
            "RELAY_URL": self.url,
            "WEBHOOK_URL": f"{self.url}/hook",
            "WEBHOOK_SECRET": WEBHOOK_SECRET,
        }


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.http.shutdown()
    s.http.server_close()


def clean_env() -> dict[str, str]:
    """This process's environment without the relay's settings, so that
    nothing but the block configures the relay (CALLPOST_RELAY_BIN, the
    build to run, stays)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CALLPOST_RELAY_") or k == "CALLPOST_RELAY_BIN"}


# -- python ----------------------------------------------------------------


@pytest.mark.parametrize("block", blocks_of("python"))
def test_python(block: Block, servers: Servers, tmp_path: Path) -> None:
    if block.fragment:
        compile(block.code, block.where, "exec")
        return
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    refused_before = len(servers.refused)
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**clean_env(), **servers.env()},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert run.returncode == 0, f"{block.where} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    assert servers.refused[refused_before:] == [], f"{block.where}: the local servers refused what it sent"


# -- toml: relay configurations ---------------------------------------------


def relay(*args: str) -> list[str]:
    """The relay's command line: the launcher runs CALLPOST_RELAY_BIN, or
    the binary the callpost-relay wheel installed."""
    return [sys.executable, "-m", "callpost", "relay", *args]


@pytest.mark.parametrize("block", blocks_of("toml"))
def test_toml(block: Block, tmp_path: Path) -> None:
    config = tmp_path / "relay.toml"
    config.write_text(block.code, encoding="utf-8")
    check = subprocess.run(
        relay("check", "--config", str(config)),
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert check.returncode == 0, f"{block.where}: the relay refused this configuration:\n{check.stderr}"
    assert "configuration ok" in check.stdout, check.stdout
    if "[shards]" in block.code:
        # Shard groups are Postgres databases: the configuration is checked,
        # and no SQLite file stands in for them.
        return
    run = subprocess.run(
        relay("migrate", "--config", str(config), "--database", f"sqlite:///{tmp_path}/relay.db"),
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert run.returncode == 0, f"{block.where}: the relay refused this configuration:\n{run.stderr}"
    assert "schema version" in run.stdout, run.stdout


# -- sh ----------------------------------------------------------------------


def commands(code: str) -> list[list[str]]:
    """The commands of a shell block: one per line, split further at
    ``&&``, ``||``, ``;``, ``|`` and ``&``; comments dropped."""
    out: list[list[str]] = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token in {"&&", "||", ";", "|", "&"}:
                if current:
                    out.append(current)
                current = []
            else:
                current.append(token)
        if current:
            out.append(current)
    return out


def relay_variables() -> set[str]:
    """The CALLPOST_RELAY_* variables the relay reads (its configuration
    loader and the Python launcher)."""
    source = (ROOT / "relay" / "src" / "config.rs").read_text(encoding="utf-8")
    names = set(re.findall(r'\bvar\("([A-Z_]+)"\)', source))
    names |= set(re.findall(r'\bfirst\(\s*&overrides\.\w+,\s*"([A-Z_]+)"', source))
    assert {"LISTEN", "DATABASE", "SHARED_SECRET"} <= names, f"the relay's config loader changed shape: {names}"
    return {f"CALLPOST_RELAY_{n}" for n in names} | {"CALLPOST_RELAY_BIN"}


_helps: dict[tuple[str, ...], str] = {}


def relay_help(*subcommand: str) -> str:
    if subcommand not in _helps:
        run = subprocess.run(
            relay(*subcommand, "--help"), env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        assert run.returncode == 0, f"callpost-relay {' '.join(subcommand)} --help: {run.stderr}"
        _helps[subcommand] = run.stdout
    return _helps[subcommand]


def relay_subcommands() -> set[str]:
    listed = relay_help().split("Commands:", 1)[1].split("Options:", 1)[0]
    return {line.split()[0] for line in listed.splitlines() if line.strip()} - {"help"}


def check_relay(args: list[str]) -> None:
    """Every flag is one the relay's --help lists (for the subcommand given,
    if any); a subcommand is one it has."""
    sub = [a for a in args[:1] if not a.startswith("-")]
    if sub:
        assert sub[0] in relay_subcommands(), f"callpost-relay has no subcommand {sub[0]!r}"
    listed = set(re.findall(r"--[a-z][a-z-]*", relay_help(*sub)))
    for flag in (a.split("=", 1)[0] for a in args if a.startswith("--")):
        assert flag in listed, f"callpost-relay {' '.join(sub)} has no flag {flag}"


def workspace_version() -> str:
    cargo = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    found = re.search(r'^\[workspace\.package\]\nversion = "([^"]+)"', cargo, re.M)
    assert found, "Cargo.toml has no [workspace.package] version"
    return found[1]


# podman's and docker's run options the docs use: with a value, and without.
RUN_OPTIONS = {"-p", "-v", "-e", "--name", "--stop-timeout"}
RUN_SWITCHES = {"-d", "--rm", "--read-only"}


def check_container(args: list[str]) -> None:
    """``load -i`` of the archive relay/deploy/image.sh writes, or ``run``
    of the tag it gives: every ``-e`` a variable the relay reads, every
    argument after the image one the relay takes."""
    version = workspace_version()
    script = (ROOT / "relay" / "deploy" / "image.sh").read_text(encoding="utf-8")
    if args[0] == "load":
        assert "archive=$out/callpost-relay-$version.tar" in script and "out=target/image" in script
        assert args[1:] == ["-i", f"target/image/callpost-relay-{version}.tar"], f"load {args[1:]}: not the archive"
        return
    assert args[0] == "run", f"{args[0]}: not a container command the docs test knows"
    rest, i = args[1:], 0
    while rest[i].startswith("-"):
        option = rest[i]
        assert option in RUN_OPTIONS | RUN_SWITCHES, f"run {option}: not an option the docs test knows"
        if option == "-e":
            name = rest[i + 1].split("=", 1)[0]
            assert name in relay_variables(), f"-e {name}: not a variable the relay reads"
        i += 2 if option in RUN_OPTIONS else 1
    assert "tag=localhost/callpost-relay:$version" in script
    assert rest[i] == f"localhost/callpost-relay:{version}", f"run {rest[i]}: not the image's tag"
    check_relay(rest[i + 1 :])


def check_command(argv: list[str], cwd: Path, exported: dict[str, str]) -> Path:
    """Checks one command; returns the working directory after it."""
    program, args = argv[0], argv[1:]
    if program == "cd":
        target = (cwd / args[0]).resolve()
        assert target.is_dir(), f"cd {args[0]}: no such directory"
        return target
    if program == "bash":
        script = cwd / args[0]
        assert script.is_file(), f"bash {args[0]}: no such script"
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=RUN_TIMEOUT)
    elif program == "npm":
        manifest = json.loads((cwd / "package.json").read_text(encoding="utf-8"))
        if args == ["ci"]:
            assert (cwd / "package-lock.json").is_file(), f"npm ci in {cwd}: no lock file"
        else:
            assert args[0] == "run" and args[1] in manifest["scripts"], f"npm {' '.join(args)}: no such script"
    elif program == "go" or argv[:3] == ["cargo", "build", "--release"]:
        pass  # the Go setup: go/e2e/docs_test.go runs it in a new module, as a reader does
    elif program == "cargo":
        assert args[:2] == ["install", "--path"], f"cargo {' '.join(args)}: not a command the docs test knows"
        crate = cwd / args[2]
        manifest_text = (crate / "Cargo.toml").read_text(encoding="utf-8")
        has_binary = "[[bin]]" in manifest_text or (crate / "src" / "main.rs").is_file()
        assert has_binary, f"cargo install --path {args[2]}: the crate has no binary"
    elif program == "pip":
        assert args[0] == "install", f"pip {args[0]}: not a command the docs test knows"
        for requirement in args[1:]:
            check_pip_requirement(requirement, cwd)
    elif program == "export":
        for assignment in args:
            name, _, value = assignment.partition("=")
            assert name in relay_variables(), f"export {name}: not a variable the relay reads"
            exported[name] = value
    elif program == "callpost-relay":
        check_relay(args)
    elif program in ("podman", "docker"):
        check_container(args)
    elif argv[:3] == ["python", "-m", "callpost"]:
        if argv[3:4] == ["relay"]:
            check_relay(argv[4:])
        else:
            usage = set(re.findall(r"[\w-]+", USAGE))
            assert set(argv[3:]) <= usage, f"{' '.join(argv)}: not in `python -m callpost`'s usage ({USAGE})"
    else:
        raise AssertionError(f"{' '.join(argv)}: a command the docs test does not know how to check")
    return cwd


def check_pip_requirement(requirement: str, cwd: Path) -> None:
    if requirement.startswith(("./", "/")):
        assert (cwd / requirement / "pyproject.toml").is_file(), f"pip install {requirement}: not a Python project"
        return
    match = re.fullmatch(r"([\w-]+)(?:\[([\w,-]+)\])?", requirement)
    assert match, f"pip install {requirement}: not a requirement the docs test knows"
    # The installed package's metadata: python/pyproject.toml as built.
    metadata = importlib.metadata.metadata("callpost")
    assert match[1] == metadata["Name"], f"pip install {requirement}: not this repository's package"
    extras = set(match[2].split(",")) if match[2] else set()
    assert extras <= set(metadata.get_all("Provides-Extra") or []), f"pip install {requirement}: no such extra"


@pytest.mark.parametrize("block", blocks_of("sh"))
def test_sh(block: Block) -> None:
    cwd = ROOT
    exported: dict[str, str] = {}
    argvs = commands(block.code)
    assert argvs, f"{block.where}: an empty block"
    for argv in argvs:
        cwd = check_command(argv, cwd, exported)


# -- text: what the relay prints -------------------------------------------------


def normalized(lines: list[str]) -> list[str]:
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\s+")
    port = re.compile(r"127\.0\.0\.1:\d+")
    return [port.sub("127.0.0.1:<port>", stamp.sub("<time> ", line)) for line in lines]


def preceding(block: Block) -> Block | None:
    same_file = [b for b in BLOCKS if b.path == block.path and b.line < block.line]
    return same_file[-1] if same_file else None


@pytest.mark.parametrize("block", blocks_of("text"))
def test_text(block: Block, tmp_path: Path) -> None:
    before = preceding(block)
    assert before is not None and before.lang == "sh", f"{block.where}: output with no sh block before it"
    exported: dict[str, str] = {}
    serve = None
    for argv in commands(before.code):
        check_command(argv, ROOT, exported)
        if argv[0] == "callpost-relay" and not (argv[1:2] and argv[1] in relay_subcommands()):
            serve = argv[1:]
    assert serve is not None, f"{block.where}: the sh block before it starts no relay"
    # Port 0: a relay already on 8088 must not fail the test; the port is
    # compared as <port>.
    env = {**clean_env(), **exported, "CALLPOST_RELAY_LISTEN": "127.0.0.1:0"}
    process = subprocess.Popen(relay(*serve), cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    printed: list[str] = []
    killer = threading.Timer(RUN_TIMEOUT, process.kill)
    killer.start()
    try:
        for line in process.stderr:
            printed.append(line.rstrip("\n"))
            if "listening on" in line:
                break
    finally:
        killer.cancel()
        process.kill()
        process.wait()
        process.stderr.close()
    assert normalized(printed) == normalized(block.code.splitlines())


# -- rust ----------------------------------------------------------------------


def squeezed(code: str) -> str:
    """Rust without comments, whitespace or trailing commas: rustfmt's
    layout and a doc's one-line layout of the same code compare equal."""
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r"\s+", "", code)
    return re.sub(r",([)\]}])", r"\1", code)


@pytest.mark.parametrize("block", blocks_of("rust"))
def test_rust(block: Block) -> None:
    test = squeezed((ROOT / "core" / "tests" / "readme.rs").read_text(encoding="utf-8"))
    for statement in squeezed(block.code).split(";"):
        assert statement in test, f"{block.where}: core/tests/readme.rs does not run {statement!r}"


# -- prose that names the relay's settings -----------------------------------


def test_the_documented_relay_variables_are_the_ones_it_reads() -> None:
    text = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    listed = text.split("Variables: ", 1)[1].split("Flags:", 1)[0]
    documented = {n if n.startswith("CALLPOST") else f"CALLPOST_RELAY{n}" for n in re.findall(r"`([A-Z_]+)`", listed)}
    assert documented == relay_variables() - {"CALLPOST_RELAY_BIN"}


# -- links between the pages ------------------------------------------------


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a file's headings."""
    out: set[str] = set()
    in_block = False
    for line in path.read_text(encoding="utf-8").splitlines():
        in_block ^= line.startswith("```")
        if not in_block and line.startswith("#"):
            heading = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return out


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in DOCS])
def test_links(path: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists() or (anchor and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == [], f"{path.relative_to(ROOT)}: links to nothing"


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in DOCS])
def test_a_contents_list_names_every_section(path: Path) -> None:
    """A page that opens with a list of its sections lists each one, in
    order: a section added later is not left out of it."""
    text = path.read_text(encoding="utf-8")
    head = text.split("\n## ", 1)[0]
    # The list's items, and each item's first link (an item may go on to
    # name parts of its section).
    items = re.findall(r"^- (?:\[[^\]]+\]|`[^`]+`)?[^(\n]*\(#([^)]+)\)", head, re.M)
    if not items:
        return
    in_block = False
    sections = []
    for line in text.splitlines():
        in_block ^= line.startswith("```")
        if not in_block and line.startswith("## "):
            sections.append(re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-"))
    listed = [a for a in items if a in sections]
    assert listed == sections, f"{path.relative_to(ROOT)}: the contents list is not its sections"


def vector_strings() -> set[str]:
    """Every string in the shared vectors."""
    found: set[str] = set()

    def walk(v: object) -> None:
        if isinstance(v, str):
            found.add(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for path in sorted((ROOT / "testdata").glob("*.json")):
        walk(json.loads(path.read_text()))
    return found


@pytest.mark.parametrize("block", blocks_of("json"))
def test_json(block: Block) -> None:
    assert block.code.strip() in vector_strings(), f"{block.where}: not a vector of testdata/"


# -- the operators' metrics table ------------------------------------------


def test_the_metrics_table_is_what_the_relay_exposes(tmp_path: Path) -> None:
    """docs/operators.md's metrics table names every metric the relay
    registers, and no other, with the type a running relay's /metrics
    gives it."""
    page = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^\s*\| `(callpost_relay_\w+)` \| (\w+) \|", page, re.M))
    assert len(documented) > 10, "the metrics table is gone"
    token = "a-docs-test-admin-token-of-32-chars"
    config = tmp_path / "relay.toml"
    config.write_text(
        f'listen = "127.0.0.1:0"\nadmin_token = "{token}"\ndatabase = "sqlite:///{tmp_path}/relay.db"\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        relay("--config", str(config)), cwd=tmp_path, env=clean_env(), stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    killer = threading.Timer(RUN_TIMEOUT, process.kill)
    killer.start()
    try:
        address = None
        for line in process.stderr:
            if found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
                address = found.group(1)
                break
        assert address, "the relay did not start"
        request = urllib.request.Request(f"{address}/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
    finally:
        killer.cancel()
        process.kill()
        process.wait()
    exposed = dict(re.findall(r"^# TYPE (callpost_relay_\w+) (\w+)$", text, re.M))
    # Families with labels appear once they have a sample; every metric the
    # relay registers must be in the table all the same.
    assert exposed.items() <= documented.items(), "exposed, and not in the table (or with another type)"
    source = (ROOT / "relay" / "src" / "metrics.rs").read_text(encoding="utf-8")
    registered = {f"callpost_relay_{n}" for n in re.findall(r'\br\.register\(\s*"(\w+)"', source)}
    assert len(registered) > 10, "the relay's metrics changed shape"
    assert set(documented) == registered
