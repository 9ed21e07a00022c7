"""Running the kit in a fresh pytest process and reading back what it found (what the
kit's own tests and the published table use; a user may call it too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_ledger.replay.conformance.catalog import PropertyResult, summarize

__all__ = ["KitRun", "run_kit"]

AUTOLOAD_OFF = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""The kit's process loads no plugin but its own (half its start-up time on a busy
machine; the kit needs none); an ``env`` passed to :func:`run_kit` may set it back."""


@dataclass(frozen=True)
class KitRun:
    """One run of the kit: each test's row (``name property outcome why``), the properties'
    results, pytest's exit code and the tail of its output (for a run that broke)."""

    tests: list[dict[str, Any]]
    properties: list[PropertyResult]
    exit_code: int
    output: str

    def outcomes(self) -> dict[str, str]:
        """Property name -> ``passed``, ``failed`` or ``skipped``."""
        return {result.name: result.outcome for result in self.properties}


def run_kit(
    spec: str,
    *,
    folder: Path | None = None,
    dsn: str | None = None,
    examples: int = 20,
    env: Mapping[str, str] | None = None,
    timeout: float = 900.0,
) -> KitRun:
    """Run ``pytest -p memory_ledger.conformance --store-factory spec`` in a new process
    (``folder``/``dsn`` as ``--store-bytes``/``--store-dsn``; ``env`` added to this
    process's environment, no plugin autoloaded (:data:`AUTOLOAD_OFF`), ``sys.path`` passed
    as ``PYTHONPATH``) and read its report.

    :raises RuntimeError: pytest wrote no report (it could not start, or the factory could
        not be loaded): the message holds the end of its output.
    :raises subprocess.TimeoutExpired: the run took more than ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        report = Path(scratch) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "memory_ledger.conformance",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--store-factory={spec}",
            f"--store-examples={examples}",
            f"--conformance-report={report}",
            f"--rootdir={scratch}",
        ]
        if folder is not None:
            command.append(f"--store-bytes={folder}")
        if dsn is not None:
            command.append(f"--store-dsn={dsn}")
        path = os.pathsep.join(p for p in sys.path if p)
        done = subprocess.run(
            command,
            cwd=scratch,
            env={**os.environ, **AUTOLOAD_OFF, **(env or {}), "PYTHONPATH": path},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = (done.stdout + done.stderr)[-4000:]
        if not report.exists():
            msg = f"the kit wrote no report (exit {done.returncode}): {output[-1500:]}"
            raise RuntimeError(msg)
        tests = json.loads(report.read_text())["tests"]
    return KitRun(tests, summarize(tests), done.returncode, output)
