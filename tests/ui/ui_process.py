"""``memory-ledger ui`` in a child process, for tests of how it serves and stops."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.mcp_harness import child_env

_MAIN = "from memory_ledger.replay.cli.app import main\nmain()\n"


def start_ui(*args: str) -> tuple[subprocess.Popen[str], str]:
    """``memory-ledger ui --json --port 0 *args`` started, and the URL (with its token) it
    announced once it listens. The caller stops the child."""
    child = subprocess.Popen(  # noqa: S603 (our own CLI)
        [sys.executable, "-c", _MAIN, "ui", *args, "--json", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert child.stdout is not None
    return child, str(json.loads(child.stdout.readline())["url"])
