"""``memory-ledger import mem0|interchange`` and ``export --format interchange`` end to end
on a store written by mem0: the summary, the namespaces from the options, the refused secret
never echoed, reruns that write nothing, one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from memory_ledger.replay.cli.app import app

runner = CliRunner()


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def test_import_mem0_then_export_and_import_the_interchange_file(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, _ = mem0_store
    store = str(tmp_path / "store")
    db = str(folder / "history.db")
    maps = ["--map-user", "alice=acme/alice/mem0", "--map-user", "bob=acme/bob/mem0"]
    where = [*maps, "--qdrant-path", str(folder / "qdrant")]
    fallback = ["--tenant", "acme", "--principal", "others", "--scope-id", "mem0"]
    text = run("import", "mem0", "--history-db", db, *where, *fallback, "--store", store)
    assert "imported" in text and "secret_detected 1" in text and "sk-proj" not in text
    again = json.loads(
        run("import", "mem0", "--history-db", db, *where, *fallback, "--store", store, "--json")
    )
    assert again["imported"] == 0 and again["already"] > 0
    assert "sk-proj" not in json.dumps(again)

    out = tmp_path / "alice.jsonl"
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "mem0"]
    exported = json.loads(
        run("export", "--format", "interchange", "--out", str(out), *ns, "--store", store, "--json")
    )
    # a2 was deleted in mem0: its owner is unknown, so it went to the fallback namespace
    assert exported["memories"] == 1 and exported["versions"] == 3
    run("export", "--format", "interchange", "--out", str(out), *ns, "--store", store, code=2)

    other = str(tmp_path / "other")
    new_ns = ["--tenant", "newco", "--principal", "alice", "--scope-id", "agent"]
    imported = json.loads(
        run("import", "interchange", str(out), *new_ns, "--store", other, "--json")
    )
    assert imported["imported"] == 1
    back = tmp_path / "back.jsonl"
    again_out = json.loads(
        run(
            "export",
            "--format",
            "interchange",
            "--out",
            str(back),
            *new_ns,
            "--store",
            other,
            "--json",
        )
    )
    assert again_out["digest"] == exported["digest"]


def test_errors_are_one_line_with_status_2(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "mem0"]
    missing = run(
        "import", "mem0", "--history-db", str(tmp_path / "no.db"), *ns, "--store", store, code=2
    )
    assert "Mem0HistoryMissingError" in missing and "Traceback" not in missing
    nowhere = run(
        "import", "mem0", "--history-db", str(tmp_path / "no.db"), "--store", store, code=2
    )
    assert "--tenant" in nowhere
    unmapped = run(
        "import", "mem0", "--history-db", "x.db", "--map-user", "bob", "--store", store, code=2
    )
    assert "USER_ID=TENANT/PRINCIPAL/SCOPE" in unmapped


def test_a_refused_interchange_line_exits_1_and_the_rest_imports(tmp_path: Path) -> None:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.ledger.ids import Namespace
    from memory_ledger.replay.imports import export_interchange

    from .mem0_fixtures import SECRET

    out = tmp_path / "a.jsonl"
    with MemoryEngine.open(tmp_path / "source") as engine:
        namespace = Namespace("acme", "alice", "agent")
        engine.remember(namespace, "Alice lives in Lisbon.")
        engine.remember(namespace, "Alice plays chess.")
        export_interchange(engine, namespace, out)
    lines = out.read_text().splitlines()
    bad = json.loads(lines[2])
    bad["versions"][0]["statement"] = SECRET
    out.write_text("\n".join([*lines[:2], json.dumps(bad)]) + "\n")
    ns = ["--tenant", "newco", "--principal", "alice", "--scope-id", "agent"]
    store = str(tmp_path / "other")
    text = run("import", "interchange", str(out), *ns, "--store", store, code=1)
    assert "imported 1" in text and "secret_detected 1" in text and "sk-proj" not in text
    report = json.loads(
        run("import", "interchange", str(out), *ns, "--store", store, "--json", code=1)
    )
    assert report["already"] == 1 and [r["item"] for r in report["refused"]] == ["line 3"]
