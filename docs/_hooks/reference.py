"""mkdocs hook: the generated references (issue 38 item 4).

- **API pages.** Every nav entry under ``api/`` names a face (a package whose ``__init__``
  lists its public names in ``__all__``): ``api/memory_ledger.replay.md`` becomes a page
  holding ``::: memory_ledger.replay``, which mkdocstrings renders from the docstrings. The
  nav of ``mkdocs.yml`` is the one list of faces: a new face is one nav line.
- **CLI page.** ``cli.md`` is written from the click command tree of the typer app
  (``memory_ledger.replay.cli.app``; typer carries its own copy of click, so the tree is read
  by its attributes, not by ``isinstance``): every command and group, its help, usage, arguments and
  options, in the order ``--help`` lists them. Nothing runs and nothing reaches the network,
  so the page is the same on every build.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mkdocs.structure.files import File, Files

API_FOLDER = "api/"
CLI_PAGE = "cli.md"


def _nav_paths(nav: Any) -> Iterator[str]:
    """Every page path of a (nested) mkdocs nav."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for entry in nav:
            yield from _nav_paths(entry)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_paths(value)


def faces(config: Any) -> list[str]:
    """The dotted names of the faces the nav lists under ``api/``, in nav order."""
    return [
        path.removeprefix(API_FOLDER).removesuffix(".md")
        for path in _nav_paths(config["nav"])
        if path.startswith(API_FOLDER)
    ]


def api_page(face: str) -> str:
    """The Markdown of one face's page: its name as the title, then the mkdocstrings block."""
    return f"# `{face}`\n\n::: {face}\n"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _kind(param: Any) -> str:
    """What a parameter takes: its metavar, else its choices, else its type's name."""
    choices = getattr(param.type, "choices", None)
    if param.metavar:
        return str(param.metavar)
    if choices:
        return "|".join(str(choice) for choice in choices)
    return str(param.type.name)


def _parameter_rows(command: Any, ctx: Any) -> list[str]:
    rows: list[str] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "option":
            names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
            kind = "flag" if param.is_flag else _kind(param)
            default = param.default if param.show_default is not False else None
            shown = "" if default in (None, False, "", ()) or callable(default) else f"{default}"
            help_text = param.help
        else:
            names = f"`{param.human_readable_name}`"
            kind = _kind(param)
            shown = ""
            help_text = getattr(param, "help", None)
        required = " (required)" if param.required else ""
        rows.append(
            f"| {names} | `{_cell(kind)}`{required} | {_cell(help_text)} | {_cell(shown)} |"
        )
    return rows


def _command_section(command: Any, path: list[str], parent: Any) -> Iterator[str]:
    ctx = command.context_class(command, info_name=path[-1], parent=parent)
    level = "#" * min(len(path) + 1, 6)
    yield f"{level} `{' '.join(path)}`\n"
    help_text = (command.help or "").split("\f")[0].replace("\b\n", "").strip()
    if help_text:
        yield f"{help_text}\n"
    usage = " ".join(command.collect_usage_pieces(ctx))
    yield f"```text\n{' '.join(path)} {usage}\n```\n"
    rows = _parameter_rows(command, ctx)
    if rows:
        yield "| Name | Type | Help | Default |\n| --- | --- | --- | --- |"
        yield "\n".join(rows) + "\n"
    if hasattr(command, "list_commands"):  # a group
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _command_section(sub, [*path, name], ctx)


def cli_page() -> str:
    """The Markdown of the CLI reference, from the typer app's click command tree."""
    import typer.main

    from memory_ledger.replay.cli.app import app

    root = typer.main.get_command(app)
    intro = (
        "# CLI reference\n\n"
        "Generated from the command tree of `memory-ledger` at build time "
        "(`docs/_hooks/reference.py`); `memory-ledger COMMAND --help` prints the same.\n"
    )
    return intro + "\n" + "\n".join(_command_section(root, ["memory-ledger"], None))


def on_files(files: Files, config: Any) -> Files:
    """Add the API page of every face in the nav and the CLI page."""
    for face in faces(config):
        files.append(File.generated(config, f"{API_FOLDER}{face}.md", content=api_page(face)))
    files.append(File.generated(config, CLI_PAGE, content=cli_page()))
    return files
