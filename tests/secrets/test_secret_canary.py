"""Issue 25, "Done when": a canary secret written into every caller-supplied string field of
every write path (Python sync and async, CLI and session scripts, MCP over stdio and HTTP,
workspace retrieval, knowledge binding) never appears in any byte under the store folder, in
an export (Parquet and JSON Lines), a backup, a log or an error.

One store is driven through every path in turn (the tests of this module run in order and
share it); the last tests grep everything: each file under the store folder byte for byte
and each DuckDB table row by row (DuckDB compresses strings, so its bytes alone prove
nothing), both export formats (Parquet row by row, for the same reason), the backup folder,
every stdout and stderr of the CLI and MCP child processes, every message, ``repr`` and
``.args`` of an exception raised to a Python caller, and every log record (DEBUG and up).

Where a path refuses a canary, the refusal is a typed error (a ``MemoryLedgerError`` with a
``reason_code``) that does not quote it; where a path accepts text (a transcript), only its
redacted form (``[REDACTED:<kind>]``) is stored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.commands.context import BoundKnowledge
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.commands.session import WorkspaceOptions
from memory_ledger.ledger.events import TranscriptObserved
from memory_ledger.replay import filter_events
from memory_ledger.replay.mcp import new_token
from memory_ledger.replay.mcp.tokens import token_entry_toml
from tests.conftest import make_item
from tests.knowledge_helpers import PackageProvider, binding
from tests.mcp_harness import cli, free_port, stdio_command
from tests.workspace_helpers import WordBagProvider, write_tree

GITHUB = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASSWORD = "Zq8!vR2#mK9pL4xW"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PROSE = f"Alice logs into the NAS as admin with {PASSWORD}"
"""A login told in prose: the password stands in a sentence, no keyword beside it."""

CANARIES = (GITHUB, PASSWORD, AWS_SECRET)
FRAGMENTS = (
    *CANARIES,
    "A1b2C3d4E5f6G7h8",
    "K1l2M3n4O5p6Q7r8",
    "wJalrXUtnFEMI",
    "bPxRfiCYEXAMPLEKEY",
    "Zq8!vR2#",
    "mK9pL4xW",
)
"""The canaries and long pieces of them: a cut or partly redacted canary is a leak too."""

NS = Namespace("acme", "alice", "assistant")
SECRET_NAMESPACES = (
    Namespace(GITHUB, "alice", "assistant"),
    Namespace("acme", AWS_SECRET, "assistant"),
    Namespace("acme", "alice", GITHUB),
)


def leaked(text: str | bytes) -> list[str]:
    """The fragments of a canary found in ``text``."""
    if isinstance(text, bytes):
        return [f for f in FRAGMENTS if f.encode() in text]
    return [f for f in FRAGMENTS if f in text]


@dataclass
class World:
    """The one store every path writes to, and everything said along the way."""

    root: Path
    store: Path
    said: list[tuple[str, str]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    refusals: list[tuple[str, str]] = field(default_factory=list)

    def hear(self, where: str, text: str) -> None:
        """Record ``text`` (an output or an error) and fail at once if it holds a canary."""
        self.said.append((where, text))
        assert not leaked(text), (where, leaked(text), text[-3000:])

    def refused(self, where: str, error: BaseException) -> None:
        """A typed refusal that does not quote the canary (message, repr, args, cause)."""
        assert isinstance(error, MemoryLedgerError), (where, type(error), error)
        code = getattr(error, "reason_code", None)
        assert isinstance(code, str) and code, (where, error)
        self.refusals.append((where, code))
        chain: list[BaseException] = [error]
        while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
            nxt = chain[-1].__cause__ or chain[-1].__context__
            assert nxt is not None
            if len(chain) > 10 or nxt in chain:
                break
            chain.append(nxt)
        for link in chain:
            self.hear(where, f"{link}\n{link!r}\n{link.args!r}\n{vars(link)!r}")

    def expect_refusal(self, where: str, call: Callable[[], Any]) -> MemoryLedgerError:
        """Run ``call``; it must raise a typed refusal that does not quote a canary."""
        try:
            outcome = call()
        except Exception as error:  # judged below
            self.refused(where, error)
            assert isinstance(error, MemoryLedgerError)
            return error
        self.hear(where, repr(outcome))
        raise AssertionError(f"{where}: accepted a canary: {outcome!r}")

    def attempt(self, where: str, call: Callable[[], Any]) -> Any:
        """Run ``call``: its result (handed back to the caller who gave the text, so not
        judged here), or a typed refusal that does not quote a canary (returned)."""
        try:
            return call()
        except Exception as error:  # judged below
            self.refused(where, error)
            return error

    async def aexpect_refusal(self, where: str, call: Callable[[], Any]) -> None:
        try:
            outcome = await call()
        except Exception as error:  # judged below
            self.refused(where, error)
            return
        self.hear(where, repr(outcome))
        raise AssertionError(f"{where}: accepted a canary: {outcome!r}")

    def run_cli(self, where: str, *args: str, ok: tuple[int, ...] = (0, 1, 2)) -> str:
        """``memory-ledger ARGS`` in a child process; its stdout and stderr are heard."""
        done = subprocess.run(cli(*args), capture_output=True, text=True, timeout=120)
        self.hear(f"{where} stdout", done.stdout)
        self.hear(f"{where} stderr", done.stderr)
        assert done.returncode in ok, (where, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout


CLIENT_LOGGERS = ("mcp.client", "httpx", "httpcore")
"""The test's own MCP client and HTTP libraries log, at DEBUG, each message they send (the
canaries the test sends): the client's logs, not the engine's or the server's (the server's
are its child process's stderr, heard whole)."""


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(CLIENT_LOGGERS):
            return
        text = f"{record.name} {record.levelname} {record.getMessage()}"
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + record.stack_info
        self.sink.append(text)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("canary")
    found = World(root=root, store=root / "store")
    handler = _Collect(found.logs)
    logger = logging.getLogger()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def secret_items() -> list[dict[str, Any]]:
    """Extracted items, each with a canary in one field (and one clean item)."""
    return [
        make_item(GITHUB),
        make_item(PROSE),
        make_item("Alice has a token.", subject=GITHUB),
        make_item("Alice has a token.", predicate=GITHUB, value="yes"),
        make_item("Alice set a database password.", predicate="password", value=PASSWORD),
        make_item("Alice has a cloud key.", predicate="cloud key", value=AWS_SECRET),
        make_item("Alice has a cloud key.", subject="Alice", predicate="holds", value=GITHUB),
        make_item("Alice keeps her keys safe.", tags=[AWS_SECRET]),
        make_item("Alice keeps her keys safe.", tags=[GITHUB]),
        make_item("Alice keeps her keys safe.", reason=f"because {GITHUB}"),
        make_item("Alice keeps her keys safe.", evidence=[GITHUB]),
        make_item("Alice keeps her keys safe.", supersedes=GITHUB),
        make_item("Alice keeps her keys safe.", conflicts_with=[AWS_SECRET]),
        make_item("Alice keeps her keys safe.", kind=GITHUB),
        make_item("Alice keeps her keys safe.", source=GITHUB),
        make_item("Alice keeps her keys safe.", scope=GITHUB),
        make_item("Alice waters the basil on Sundays."),
    ]


def item_turns() -> list[list[dict[str, Any]]]:
    """:func:`secret_items` four to a turn (a turn keeps at most five items)."""
    items = secret_items()
    return [items[i : i + 4] for i in range(0, len(items), 4)]


TRANSCRIPT = (
    f"user: my GitHub token is {GITHUB}\n"
    f"user: the database password: {PASSWORD}\n"
    f"user: aws_secret_access_key = {AWS_SECRET}\n"
    f"user: {PROSE}\n"
    "assistant: noted, I will not keep those."
)


# Python, sync ----------------------------------------------------------------------------


def _direct_commands(world: World, mem: Any, label: str) -> None:
    """remember / correct / forget / pin with a canary in each field (sync ``mem``)."""
    for fields in (
        {"statement": GITHUB},
        {"statement": PROSE},
        {"statement": "Alice's NAS login.", "subject": GITHUB},
        {"statement": "Alice's NAS login.", "predicate": GITHUB},
        {"statement": "Alice's NAS login.", "value": GITHUB},
        {"statement": "Alice's NAS login.", "value": AWS_SECRET},
        {"statement": "Alice's NAS login.", "predicate": "password", "value": PASSWORD},
        {"statement": "Alice's NAS login.", "tags": [AWS_SECRET]},
        {"statement": "Alice's NAS login.", "tags": [GITHUB]},
    ):
        statement = fields.pop("statement")
        world.expect_refusal(
            f"{label} remember {sorted(fields)}",
            lambda s=statement, f=fields: mem.remember(NS, s, **f),  # type: ignore[misc]
        )
    for secret in (GITHUB, PROSE, AWS_SECRET):
        world.attempt(f"{label} correct statement", lambda s=secret: mem.correct(NS, s))
        world.attempt(
            f"{label} correct target",
            lambda s=secret: mem.correct(NS, "Alice's NAS sits in the attic.", target=s),
        )
        world.attempt(f"{label} forget", lambda s=secret: mem.forget(NS, s))
        world.attempt(f"{label} pin", lambda s=secret: mem.pin(NS, s))
    for namespace in SECRET_NAMESPACES:
        world.expect_refusal(
            f"{label} remember in a secret namespace",
            lambda n=namespace: mem.remember(n, "Alice waters the basil."),
        )


def test_python_sync_direct_commands(world: World) -> None:
    with memory_ledger.open(world.store) as mem:
        mem.remember(NS, "Alice's NAS sits under the desk.", subject="Alice", predicate="nas")
        _direct_commands(world, mem, "sync")
        for secret in (GITHUB, PROSE):
            world.attempt("sync recall", lambda s=secret: mem.recall(NS, s))
        world.attempt("sync forget_all secret ns", lambda: mem.forget_all(SECRET_NAMESPACES[0]))


def test_python_sync_sessions(world: World) -> None:
    with MemoryEngine.open(world.store) as mem:
        for namespace in SECRET_NAMESPACES:
            world.expect_refusal(
                "session in a secret namespace", lambda n=namespace: mem.session(n, "chat")
            )
        for session_id in (GITHUB, f"chat-{AWS_SECRET}", f"chat {PROSE}"):
            world.expect_refusal(
                "session with a secret id", lambda s=session_id: mem.session(NS, s)
            )
        extractor = RecordedExtractor()
        session = mem.session(NS, "canary-chat", extractor=extractor)
        for turn, items in enumerate(item_turns(), start=1):
            extractor.provide(turn, items)
            outcome = world.attempt(
                "observe_final_transcript",
                lambda t=turn: session.observe_final_transcript(t, f"turn {t}\n{TRANSCRIPT}"),
            )
            assert not isinstance(outcome, BaseException), outcome
            assert outcome.rejected == len(items) - (turn == len(item_turns())), outcome
        for statement in (GITHUB, PROSE):
            world.expect_refusal(
                "apply_explicit_command statement",
                lambda s=statement: session.apply_explicit_command("remember", s, 9),
            )
        for item in secret_items()[:-1]:
            world.expect_refusal(
                "apply_explicit_command item",
                lambda i=item: session.apply_explicit_command(  # type: ignore[misc]
                    "remember", "Alice keeps her keys safe.", 9, item=i
                ),
            )
        for intent in ("forget", "pin", "correct"):
            for target in (GITHUB, AWS_SECRET):
                world.attempt(
                    f"apply_explicit_command {intent} target",
                    lambda i=intent, t=target: session.apply_explicit_command(
                        i, "Alice's NAS sits under the desk.", 9, target=t
                    ),
                )
        world.attempt(
            "remember_success", lambda: session.remember_success(GITHUB, ["git"], "pushed")
        )
        world.attempt(
            "remember_success tools",
            lambda: session.remember_success("deploy", [AWS_SECRET], "deployed"),
        )
        world.attempt("remember_failure", lambda: session.remember_failure("login", PROSE, ["ssh"]))
        for query in (GITHUB, PROSE):
            world.attempt("session recall", lambda q=query: session.recall(q))
            world.attempt("session recall_by_tags", lambda q=query: session.recall_by_tags([q]))
        world.attempt("session admit", lambda: session.admit(3, [(GITHUB, 1)]))
        world.attempt("session record_use", lambda: session.record_use(3, GITHUB))
        report = world.attempt("session finish", session.finish)
        assert not isinstance(report, BaseException), report
        transcripts = [
            e.transcript
            for _, e in filter_events(mem)
            if isinstance(e, TranscriptObserved) and e.session_id == "canary-chat"
        ]
        assert len(transcripts) == len(item_turns())
        for stored in transcripts:
            assert stored.count("[REDACTED:") == 4 and not leaked(stored), stored
            assert stored.endswith("assistant: noted, I will not keep those.")


# Python, async ---------------------------------------------------------------------------


def test_python_async(world: World) -> None:
    async def main() -> None:
        async with AsyncMemoryEngine.open(world.store) as mem:
            for fields in (
                {"statement": GITHUB},
                {"statement": PROSE},
                {"statement": "Alice's NAS login.", "subject": GITHUB},
                {"statement": "Alice's NAS login.", "predicate": "password", "value": PASSWORD},
                {"statement": "Alice's NAS login.", "value": AWS_SECRET},
                {"statement": "Alice's NAS login.", "tags": [AWS_SECRET]},
            ):
                statement = fields.pop("statement")
                await world.aexpect_refusal(
                    f"async remember {sorted(fields)}",
                    lambda s=statement, f=fields: mem.remember(NS, s, **f),  # type: ignore[misc]
                )
            for secret in (GITHUB, PROSE, AWS_SECRET):
                for name, call in (
                    ("correct", lambda s=secret: mem.correct(NS, s)),
                    ("correct target", lambda s=secret: mem.correct(NS, "A fact.", target=s)),
                    ("forget", lambda s=secret: mem.forget(NS, s)),
                    ("pin", lambda s=secret: mem.pin(NS, s)),
                ):
                    try:
                        world.hear(f"async {name}", repr(await call()))
                    except Exception as error:
                        world.refused(f"async {name}", error)
            await world.aexpect_refusal("async session secret id", lambda: mem.session(NS, GITHUB))
            extractor = RecordedExtractor()
            session = await mem.session(NS, "canary-async", extractor=extractor)
            for turn, items in enumerate(item_turns(), start=1):
                extractor.provide(turn, items)
                observed = await session.observe_final_transcript(turn, TRANSCRIPT + str(turn))
                world.hear("async observe", repr(observed))
            await world.aexpect_refusal(
                "async apply_explicit_command",
                lambda: session.apply_explicit_command("remember", PROSE, 9),
            )
            world.hear("async finish", repr(await session.finish()))

    asyncio.run(main())


# Workspace and knowledge binding -----------------------------------------------------------


def test_workspace_retrieval(world: World) -> None:
    repo = write_tree(
        world.root / "repo",
        {
            "docs/deploy.md": "# Deploy\n\nRun make release on Fridays.\n",
            "docs/nas.md": f"# NAS\n\n{PROSE}\n",
            "config/ci.md": f"# CI\n\nThe CI release token is {GITHUB}\n",
            f"notes/{GITHUB}.md": "Release notes: make release on Fridays.\n",
            f"{GITHUB}/readme.md": "Release readme: make release on Fridays.\n",
            f"keys/{AWS_SECRET[:12]}.md": f"Release keys rotate: {AWS_SECRET}\n",
        },
    )
    with MemoryEngine.open(world.store) as mem:
        options = WorkspaceOptions(repo, embeddings=WordBagProvider())
        opened = world.attempt(
            "workspace session", lambda: mem.session(NS, "canary-ws", workspace=options)
        )
        assert not isinstance(opened, BaseException), opened
        with opened as session:
            status = session.wait_for_workspace(30)
            world.hear("workspace status", repr(status))
            for query in ("release Fridays", GITHUB, PROSE):
                for mode in session.workspace_modes:
                    world.attempt(
                        f"workspace search {mode}",
                        lambda q=query, m=mode: session.search_workspace(q, m, 5, turn_id=1),
                    )
            world.attempt(
                "workspace context", lambda: session.assemble_context(1, "release on Fridays")
            )
        secret_root = write_tree(world.root / GITHUB, {"a.md": "Release on Fridays.\n"})
        world.attempt(
            "workspace secret root",
            lambda: mem.session(NS, "canary-ws-root", workspace=WorkspaceOptions(secret_root)),
        )


class _SecretDocs(PackageProvider):
    """Serves one document whose id, title and Markdown hold canaries."""

    def fetch(self, request: Any) -> Any:
        from memory_ledger.commands.context import KnowledgeResponse

        self.requests.append(request)
        generation = self.binding.generation
        docs = (
            self.document(f"{GITHUB}.md", f"Token {AWS_SECRET}", PROSE, generation),
            self.document("deploy.md", "Deploying", "Deploy with make release.", generation),
        )
        return KnowledgeResponse(
            binding=self.binding, request_id=request.request_id, documents=docs
        )


def test_knowledge_binding(world: World) -> None:
    from memory_ledger.commands.context import KnowledgeBinding

    plain = binding()
    for changes in ({"package_id": GITHUB}, {"version": AWS_SECRET}, {"package_id": PROSE}):
        fields = {**{n: getattr(plain, n) for n in plain.__struct_fields__}, **changes}
        made = world.attempt("knowledge binding", lambda f=fields: KnowledgeBinding(**f))
        if isinstance(made, BaseException):
            continue
        provider = PackageProvider(made)
        with MemoryEngine.open(world.store) as mem:
            world.expect_refusal(
                f"knowledge session {sorted(changes)}",
                lambda p=provider: mem.session(
                    NS, f"canary-kb-{len(world.refusals)}", knowledge=BoundKnowledge(p.binding, p)
                ),
            )
    provider = _SecretDocs(plain)
    with MemoryEngine.open(world.store) as mem:
        with mem.session(
            NS, "canary-kb-docs", knowledge=BoundKnowledge(provider.binding, provider)
        ) as session:
            world.attempt("knowledge context", lambda: session.assemble_context(1, GITHUB))
            world.attempt("knowledge context 2", lambda: session.assemble_context(2, "deploy"))


# CLI and session scripts -------------------------------------------------------------------


def _script(world: World, name: str, steps: list[dict[str, Any]]) -> Path:
    path = world.root / name
    path.write_text("".join(json.dumps(step) + "\n" for step in steps), encoding="utf-8")
    return path


def test_cli_session_scripts_and_forget(world: World) -> None:
    ns = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}
    steps: list[dict[str, Any]] = [
        {"op": "open", "session": "canary-script", "namespace": ns},
        *(
            {
                "op": "turn",
                "session": "canary-script",
                "turn": turn,
                "transcript": f"{TRANSCRIPT} ({turn})",
                "extracted": items,
            }
            for turn, items in enumerate(item_turns(), start=1)
        ),
    ]
    for number, statement in enumerate((GITHUB, PROSE, f"the key is {AWS_SECRET}"), start=10):
        for intent in ("remember", "forget", "correct", "pin"):
            steps.append(
                {
                    "op": "command",
                    "session": "canary-script",
                    "turn": number,
                    "intent": intent,
                    "statement": statement,
                }
            )
    steps += [
        {"op": "recall", "session": "canary-script", "query": GITHUB, "turn": 12},
        {"op": "recall", "session": "canary-script", "query": PROSE, "turn": 12},
        {"op": "finish", "session": "canary-script"},
    ]
    script = _script(world, "canary.jsonl", steps)
    for extra in ((), ("--json",)):
        said = world.run_cli(
            "run", "run", str(script), "--store", str(world.store), "--record-recalls", *extra
        )
    report = json.loads(said)  # the second run: the turns were recorded by the first
    assert report["turns_already_recorded"] == len(item_turns()), report
    assert report["commands_refused"] == 12, report
    assert {r["reason_code"] for r in report["refusals"]} == {"secret_detected"}, report
    for name, opened in (
        ("secret-session.jsonl", {"op": "open", "session": GITHUB, "namespace": ns}),
        (
            "secret-namespace.jsonl",
            {"op": "open", "session": "s", "namespace": {**ns, "principal": AWS_SECRET}},
        ),
    ):
        bad = _script(world, name, [opened, {"op": "finish", "session": opened["session"]}])
        world.run_cli(
            f"run {name}", "run", str(bad), "--store", str(world.store), "--json", ok=(2,)
        )
    for tenant, principal in ((GITHUB, "alice"), ("acme", AWS_SECRET)):
        world.run_cli(
            "forget",
            "forget",
            "--all",
            "--tenant",
            tenant,
            "--principal",
            principal,
            "--scope-id",
            "assistant",
            "--store",
            str(world.store),
            ok=(2,),
        )
    world.run_cli("explain", "explain", GITHUB, "--store", str(world.store), ok=(2,))


# MCP over stdio and HTTP -----------------------------------------------------------------


MCP_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("remember", {"statement": GITHUB}),
    ("remember", {"statement": PROSE}),
    ("remember", {"statement": "Alice's NAS login.", "subject": GITHUB}),
    ("remember", {"statement": "Alice's NAS login.", "predicate": GITHUB}),
    ("remember", {"statement": "Alice's NAS login.", "value": AWS_SECRET}),
    ("remember", {"statement": "Alice's NAS login.", "predicate": "password", "value": PASSWORD}),
    ("correct", {"statement": GITHUB}),
    ("correct", {"statement": PROSE}),
    ("correct", {"statement": "Alice's NAS sits in the attic.", "target": GITHUB}),
    ("correct", {"statement": "Alice's NAS sits in the attic.", "target": AWS_SECRET}),
    ("forget", {"memory": GITHUB}),
    ("forget", {"memory": PROSE}),
    ("forget", {"memory": AWS_SECRET}),
    ("pin", {"memory": GITHUB}),
    ("recall", {"query": GITHUB}),
    ("recall", {"query": PROSE}),
    ("recall", {"query": "NAS", "about": GITHUB, "attribute": AWS_SECRET}),
    ("recall", {"query": "NAS", "as_of": GITHUB}),
    ("explain", {"memory_id": GITHUB}),
    ("explain", {"memory_id": PROSE}),
    ("remember", {"statement": "Alice waters the basil.", GITHUB: "x"}),
    (GITHUB, {}),
]


def _tool_said(result: Any) -> str:
    parts = [getattr(block, "text", repr(block)) for block in result.content]
    return "\n".join(parts) + repr(result.structured_content)


async def _drive_mcp(world: World, session: Any, label: str) -> None:
    for tool, arguments in MCP_CALLS:
        try:
            result = await session.call_tool(tool, arguments)
        except Exception as error:  # a protocol error: heard, not stored
            world.hear(f"{label} {tool} raised", f"{error}\n{error!r}\n{error.args!r}")
            continue
        world.hear(f"{label} {tool} {sorted(arguments)}", _tool_said(result))
    try:
        await session.read_resource("memory://" + GITHUB)
    except Exception as error:
        world.hear(f"{label} resource", f"{error}\n{error!r}\n{error.args!r}")
    mapped = await session.read_resource("memory://map")
    world.hear(f"{label} map", repr(mapped))


def test_mcp_over_stdio(world: World) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp_types import Implementation

    errlog = world.root / "mcp-stdio.stderr"
    command = stdio_command(world.store, NS)

    async def main() -> None:
        params = StdioServerParameters(command=command[0], args=command[1:])
        client = Implementation(name=GITHUB, version=AWS_SECRET)
        with errlog.open("w", encoding="utf-8") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write, client_info=client) as session:
                    await session.initialize()
                    await _drive_mcp(world, session, "stdio")

    asyncio.run(main())
    time.sleep(0.5)  # the child's last lines are flushed once it exited
    world.hear("mcp stdio stderr", errlog.read_text(encoding="utf-8"))


def test_mcp_over_http(world: World) -> None:
    from mcp_types import Implementation

    from tests.mcp_harness import http_session

    plain, secret_named = new_token(), new_token()
    tokens = world.root / "tokens.toml"
    tokens.write_text(
        token_entry_toml("alice-laptop", plain, NS) + token_entry_toml(GITHUB, secret_named, NS)
    )
    port = free_port()
    out, err = world.root / "mcp-http.stdout", world.root / "mcp-http.stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(
            cli(
                "mcp",
                "--store",
                str(world.store),
                "--http",
                f"127.0.0.1:{port}",
                "--tokens",
                str(tokens),
                "--embeddings",
                "none",
            ),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while "serving" not in err.read_text() and child.poll() is None:
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        assert child.poll() is None, err.read_text()
        url = f"http://127.0.0.1:{port}/mcp"

        async def main() -> None:
            client = Implementation(name=AWS_SECRET, version=GITHUB)
            async with http_session(url, plain, client=client) as session:
                await _drive_mcp(world, session, "http")
            async with http_session(url, secret_named) as session:
                kept = await session.call_tool("remember", {"statement": "Alice likes figs."})
                world.hear("http secret-named token", _tool_said(kept))

        asyncio.run(main())
    finally:
        child.terminate()
        child.wait(30)
    world.hear("mcp http stdout", out.read_text())
    world.hear("mcp http stderr", err.read_text())


# The greps ---------------------------------------------------------------------------------


def _duckdb_rows(path: Path) -> str:
    """Every row of every table of the DuckDB file ``path``, as text."""
    import duckdb

    rows: list[str] = []
    with duckdb.connect(str(path), read_only=True) as db:
        tables = db.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
        ).fetchall()
        for schema, table in tables:
            for row in db.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall():
                rows.append(repr(row))
    return "\n".join(rows)


def _parquet_rows(path: Path) -> str:
    import duckdb

    with duckdb.connect() as db:
        return "\n".join(
            repr(row) for row in db.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        )


def _grep_folder(folder: Path) -> dict[str, list[str]]:
    """Each file under ``folder`` holding a canary fragment: its bytes, and for DuckDB and
    Parquet files their decoded rows."""
    found: dict[str, list[str]] = {}
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    assert files, folder
    for path in files:
        data = path.read_bytes()
        hits = leaked(data)
        if data.startswith(b"PAR1"):
            hits += leaked(_parquet_rows(path))
        elif data[8:12] == b"DUCK":
            hits += leaked(_duckdb_rows(path))
        if hits:
            found[str(path.relative_to(folder))] = hits
    return found


def test_no_byte_under_the_store_holds_a_canary(world: World) -> None:
    assert world.refusals, "no path refused a canary"
    with memory_ledger.open(world.store) as mem:
        assert mem.head > 0
        sessions = {getattr(e, "session_id", "") for _, e in filter_events(mem)}
    assert {"canary-chat", "canary-async", "canary-script", "canary-ws"} <= sessions
    assert _grep_folder(world.store) == {}


def test_exports_and_backup_hold_no_canary(world: World) -> None:
    for fmt in ("parquet", "jsonl"):
        out = world.root / f"export-{fmt}"
        world.run_cli(
            f"export {fmt}",
            "export",
            "--store",
            str(world.store),
            "--out",
            str(out),
            "--format",
            fmt,
            ok=(0,),
        )
        assert _grep_folder(out) == {}, fmt
    backup = world.root / "backup"
    world.run_cli("backup", "backup", "--store", str(world.store), "--out", str(backup), ok=(0,))
    assert _grep_folder(backup) == {}


def test_no_output_error_or_log_holds_a_canary(world: World) -> None:
    assert len(world.said) > 50, len(world.said)
    assert [(w, leaked(t)) for w, t in world.said if leaked(t)] == []
    assert [t[-500:] for t in world.logs if leaked(t)] == []
    codes = {code for _, code in world.refusals}
    assert "secret_detected" in codes, codes


# The defects the canary found, one test each ------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [{"kind": GITHUB}, {"source": GITHUB}, {"scope": GITHUB}, {GITHUB: "x"}],
    ids=["kind", "source", "scope", "unknown-field"],
)
def test_a_schema_rejection_never_quotes_the_items_text(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    """msgspec quotes an invalid enum value (and an unknown field's name) in its message; the
    rejection's detail held it, so a command's error echoed the canary and the turn's
    CandidateRejected record was refused at the door (the whole turn failed)."""
    from memory_ledger.commands.extraction import validate_item

    raw = make_item("Alice keeps her keys safe.", **fields)
    rejected = validate_item(raw)
    assert not isinstance(rejected, dict) and getattr(rejected, "reason_code", None) == (
        "schema_invalid"
    )
    assert not leaked(repr(rejected)), rejected
    with MemoryEngine.open(tmp_path / "store") as mem:
        extractor = RecordedExtractor()
        with mem.session(NS, "s", extractor=extractor) as session:
            extractor.provide(1, [raw])
            outcome = session.observe_final_transcript(1, "user: keep my keys safe")
            assert outcome.rejected == 1
            with pytest.raises(MemoryLedgerError) as refused:
                session.apply_explicit_command("remember", "Alice keeps keys.", 2, item=raw)
            assert refused.value.reason_code == "schema_invalid"
            assert not leaked(f"{refused.value} {refused.value.args!r}")
    assert _grep_folder(tmp_path / "store") == {}


def test_forget_all_refuses_a_secret_namespace_part(tmp_path: Path) -> None:
    """``memory-ledger forget --all --tenant <token>`` printed the token back ("nothing to
    forget in <token>/..."); a namespace part holding a secret is refused, as a session's."""
    from memory_ledger.ledger.ids import InvalidNamespaceError

    with MemoryEngine.open(tmp_path / "store") as mem:
        for namespace in SECRET_NAMESPACES[:1] + SECRET_NAMESPACES[2:]:
            with pytest.raises(InvalidNamespaceError) as refused:
                mem.forget_all(namespace)
            assert refused.value.reason_code == "secret_detected"
            assert not leaked(f"{refused.value} {refused.value.args!r}")
        assert mem.forget_all(NS) == 0


def test_a_workspace_file_whose_path_holds_a_secret_is_left_out(tmp_path: Path) -> None:
    """A hit on such a file made its WorkspaceSearched record refused at the door when the
    session's reads were flushed: ``close()`` raised and WorkspaceReleased was lost (and the
    path was shown to the model). The file is left out of retrieval, counted as ``secret``."""
    from memory_ledger.ledger.events import WorkspaceReleased

    repo = write_tree(
        tmp_path / "repo",
        {
            "docs/deploy.md": "Run make release on Fridays.\n",
            f"notes/{GITHUB}.md": "Release notes: make release on Fridays.\n",
            f"{GITHUB}/readme.md": "Release readme: make release on Fridays.\n",
        },
    )
    with MemoryEngine.open(tmp_path / "store") as mem:
        with mem.session(NS, "ws", workspace=WorkspaceOptions(repo)) as session:
            status = session.wait_for_workspace(30)
            assert status.files_indexed == 1 and status.excluded.get("secret") == 2, status
            hits = session.search_workspace("release Fridays", "lexical", 5, turn_id=1).hits
            assert [hit.path for hit in hits] == ["docs/deploy.md"]
        released = [e for _, e in filter_events(mem) if isinstance(e, WorkspaceReleased)]
        assert len(released) == 1
    assert _grep_folder(tmp_path / "store") == {}


def test_a_knowledge_citation_whose_id_holds_a_secret_fails_closed(tmp_path: Path) -> None:
    """Such a document was served, and its KnowledgeServed record refused at the door when
    the session's reads were flushed (``close()`` raised). The response is refused as a
    ``malformed_citation`` instead, its message without the id."""
    from memory_ledger.commands.context import KnowledgeBindingError

    provider = _SecretDocs(binding())
    with MemoryEngine.open(tmp_path / "store") as mem:
        knowledge = BoundKnowledge(provider.binding, provider)
        with mem.session(NS, "kb", knowledge=knowledge) as session:
            with pytest.raises(KnowledgeBindingError) as refused:
                session.assemble_context(1, "how do I deploy?")
            assert refused.value.reason_code == "malformed_citation"
            assert not leaked(f"{refused.value} {refused.value.args!r}")
    assert _grep_folder(tmp_path / "store") == {}


def test_admit_refuses_an_id_that_is_no_uuid_typed(tmp_path: Path) -> None:
    """``admit`` raised a bare ``ValueError`` (badly formed hexadecimal UUID string) for an
    item whose memory id is not a UUID; it is an ``UnknownMemoryError`` (``not_a_memory_id``)
    that does not quote a secret given as the id."""
    from memory_ledger.commands.errors import UnknownMemoryError

    with MemoryEngine.open(tmp_path / "store") as mem:
        with mem.session(NS, "s") as session:
            for wrong in (GITHUB, "kangaroo"):
                with pytest.raises(UnknownMemoryError) as refused:
                    session.admit(1, [(wrong, 1)])
                assert refused.value.reason_code == "not_a_memory_id"
                assert not leaked(f"{refused.value} {refused.value.args!r}")


def test_an_unknown_target_is_never_quoted_as_a_secret(tmp_path: Path) -> None:
    """``UnknownMemoryError`` echoed the target a caller named ("unknown memory ghp_...");
    every surface raises it, so it shows the target redacted."""
    from memory_ledger.commands.errors import UnknownMemoryError

    with MemoryEngine.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice's NAS sits under the desk.")
        with mem.session(NS, "s") as session:
            for target in (GITHUB, AWS_SECRET):
                with pytest.raises(UnknownMemoryError) as refused:
                    session.apply_explicit_command("forget", "the NAS", 1, target=target)
                said = f"{refused.value} {refused.value!r} {refused.value.args!r}"
                assert not leaked(said) and "[REDACTED:" in said, said
        assert str(UnknownMemoryError("0f0e")) == "unknown memory 0f0e"  # ids still shown
