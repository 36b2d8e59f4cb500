"""Running the project's server scripts (``scripts/*.sh``) from the test harnesses."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def run_script(name: str, args: tuple[str, ...], env: Mapping[str, str], timeout: float) -> str:
    """Run ``scripts/NAME ARGS`` with ``env``; its output, or RuntimeError naming the failure."""
    proc = subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"scripts/{name} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return proc.stdout + proc.stderr
