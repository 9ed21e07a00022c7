"""The commands that write: ``convert-locomo`` (a LoCoMo conversation as a session script)
and ``run`` (replay a session script into a store)."""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import (
    JsonOption,
    LedgerOption,
    MasterKeyFileOption,
    StoreOption,
)
from memory_ledger.replay.cli.terminal_text import Table, escape

if TYPE_CHECKING:  # the engine's modules are imported by the command that runs
    from memory_ledger.commands.extraction.base import Extractor
    from memory_ledger.replay.scripts.script import RunReport, Step

__all__ = ["convert_locomo", "run"]

EXIT_PENDING = 1
"""Exit status of ``run`` when a turn's extraction failed (it stays pending)."""


def convert_locomo(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="LoCoMo JSON file (e.g. locomo10.json).")
    ],
    sample: Annotated[str, typer.Option("--sample", metavar="ID", help="Sample id, e.g. conv-26.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary on stderr as JSON.")
    ] = False,
) -> None:
    """Convert one LoCoMo conversation into a session script (JSON Lines on stdout)."""
    from memory_ledger.replay.scripts.locomo import (
        convert_sample,
        find_sample,
        load_samples,
        write_jsonl,
    )

    with common.user_errors():
        converted = convert_sample(find_sample(load_samples(file), sample))
        write_jsonl(converted.steps, sys.stdout.buffer)
        sys.stdout.flush()
        stats = converted.stats
        if as_json:
            sys.stderr.write(
                msgspec.json.encode({"sample": sample, **msgspec.to_builtins(stats)}).decode()
                + "\n"
            )
            return
        common.err.print(
            f"{sample}: {stats.sessions} sessions, {stats.turns} turns, {stats.facts} facts, "
            f"{len(stats.fallbacks)} fallbacks",
            highlight=False,
            markup=False,
        )


def _model_extractor(
    url: str | None, model: str | None, key_variable: str, timeout: float, max_items: int
) -> Extractor | None:
    """The OpenAI-compatible chat extractor ``--llm-url``/``--llm-model`` ask for, or None.

    :raises ValueError: only one of the two is given, or the URL is not http(s).
    """
    if url is None and model is None:
        return None
    if url is None or model is None:
        msg = "give both --llm-url and --llm-model, or neither"
        raise InvalidArgumentError(msg, parameter="--llm-url")
    from memory_ledger.commands.extraction.openai import OpenAIChatExtractor

    return OpenAIChatExtractor(
        url,
        model,
        os.environ.get(key_variable) or None,
        timeout=timeout,
        max_items=max_items,
    )


def run(
    ctx: typer.Context,
    script: Annotated[
        Path, typer.Argument(metavar="SCRIPT", help="Session script (JSON Lines) to replay.")
    ],
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
    no_sync: Annotated[
        bool, typer.Option("--no-sync", help="Skip the fsync of each command (not durable).")
    ] = False,
    record_recalls: Annotated[
        bool,
        typer.Option(
            "--record-recalls",
            help="Record each recall step as a RecallServed event (then a re-run writes "
            "them again). Off: recall steps run but write nothing.",
        ),
    ] = False,
    llm_url: Annotated[
        str | None,
        typer.Option(
            "--llm-url",
            metavar="URL",
            help="Extract every turn with the model behind this OpenAI-compatible endpoint "
            "(e.g. http://127.0.0.1:8000/v1) instead of the items recorded in the script.",
        ),
    ] = None,
    llm_model: Annotated[
        str | None,
        typer.Option("--llm-model", metavar="MODEL", help="Model name for --llm-url."),
    ] = None,
    llm_key_env: Annotated[
        str,
        typer.Option(
            "--llm-api-key-env",
            metavar="VARIABLE",
            help="Environment variable holding the --llm-url API key (never pass a key on "
            "the command line).",
        ),
    ] = "OPENAI_API_KEY",
    llm_timeout: Annotated[
        float,
        typer.Option(
            "--llm-timeout", metavar="SECONDS", min=0.1, help="Seconds per model request."
        ),
    ] = 30.0,
) -> None:
    """Replay a session script into a store (created if absent).

    Re-running a script writes nothing new: recorded turns, commands and finished sessions
    are skipped, and recall steps are not recorded unless --record-recalls. The summary
    (and --json) counts what this run wrote apart from what it found already written:
    turns_observed + turns_already_recorded = the script's turns, also when two runs of one
    script overlap. A command the engine refuses (e.g. a statement holding a secret:
    secret_detected) is listed with its reason code, nothing is recorded, and the script
    goes on. Exit status 1
    when a turn's extraction failed: its evidence is kept, its session is left open, and
    running the script again retries it.
    """
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.scripts.script import ScriptError, TurnStep, parse_script, run_script

    with common.user_errors(), ExitStack() as stack:
        config = common.settings(ctx)
        try:
            handle = script.open("rb")
        except OSError as e:  # a typed error naming the file, not a raw OSError
            msg = f"cannot read the script {str(script)!r}: {e.strerror or type(e).__name__}"
            raise ScriptError(0, msg, reason_code="script_unreadable") from None
        with handle:
            steps = parse_script(handle)
        extractor = _model_extractor(
            llm_url, llm_model, llm_key_env, llm_timeout, config.llm_extraction_max_items
        )
        if extractor is not None:
            stack.callback(getattr(extractor, "close", lambda: None))
        engine = stack.enter_context(
            MemoryEngine.open(common.store_folder(store, config), sync=not no_sync, config=config)
        )
        turns = sum(1 for _, step in steps if isinstance(step, TurnStep))
        with common.progress("turns", turns, unit="turns") as advance:
            done = 0

            def on_step(_: int, step: Step) -> None:
                nonlocal done
                if isinstance(step, TurnStep):
                    done += 1
                    advance(done)

            report = run_script(
                engine,
                steps,
                on_step=on_step,
                extractor=extractor,
                record_recalls=record_recalls,
            )
    if as_json:
        common.print_json(report)
    else:
        _print_summary(script, report)
    if report.pending_extractions:
        _print_pending(report)
        raise typer.Exit(EXIT_PENDING)


def _print_summary(script: Path, report: RunReport) -> None:
    table = Table(title=f"memory-ledger run {script.name}", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    rows: list[tuple[str, object]] = [
        ("events written", report.events_written),
        ("ledger head", f"{report.head_before} -> {report.head_after}"),
        ("turns observed (written by this run)", report.turns_observed),
        ("turns already recorded (found written)", report.turns_already_recorded),
        ("candidates", report.candidates),
        ("rejected items", report.rejected),
        ("turns pending extraction", len(report.pending_extractions)),
        ("sessions reconciled", report.sessions_finished),
        ("sessions already reconciled", report.sessions_already_finished),
        ("sessions left open", len(report.sessions_left_open)),
        ("memories activated", report.memories_activated),
        ("memories reinforced", report.memories_reinforced),
        ("memories superseded", report.memories_superseded),
        ("explicit commands", report.commands_applied),
        ("explicit commands already applied", report.commands_skipped),
        ("explicit commands refused", report.commands_refused),
        ("recalls (recorded)", f"{report.recalls} ({report.recalls_recorded})"),
        ("active memories", report.active_memories),
        ("time taken", f"{report.seconds:.2f} s"),
    ]
    if report.recorded_items_ignored:
        rows.insert(5, ("recorded items ignored (--llm-url)", report.recorded_items_ignored))
    for label, value in rows:
        table.add_row(label, str(value))
    common.out.print(table)
    if report.refusals:
        refused = Table(title="refused commands (nothing recorded)")
        for column in ("session", "turn", "line", "intent", "reason code", "detail"):
            refused.add_column(column, overflow="fold" if column == "detail" else "ellipsis")
        for command in report.refusals:
            refused.add_row(
                command.session,
                str(command.turn),
                str(command.line),
                command.intent,
                command.reason_code,
                command.detail,
            )
        common.out.print(refused)
    if report.rejections:
        rejected = Table(title="rejected items")
        for column in ("session", "turn", "item", "reason code", "detail"):
            rejected.add_column(column, overflow="fold" if column == "detail" else "ellipsis")
        for item in report.rejections:
            rejected.add_row(
                item.session, str(item.turn), f"#{item.index}", item.reason_code, item.detail
            )
        common.out.print(rejected)


def _print_pending(report: RunReport) -> None:
    """One line per turn pending extraction on stderr, then what to do."""
    for turn in report.pending_extractions:
        common.err.print(
            f"[bold red]extraction failed:[/] session {escape(turn.session)} turn {turn.turn}: "
            f"{turn.reason_code}: {escape(turn.detail)}",
            highlight=False,
            soft_wrap=True,
        )
    common.err.print(
        f"{len(report.pending_extractions)} turn(s) pending extraction; session(s) left open: "
        f"{escape(', '.join(report.sessions_left_open) or '-')}. Their evidence is recorded: "
        "run the script again to retry them and reconcile.",
        highlight=False,
        soft_wrap=True,
    )
