"""Running a provider command (``execute.node_removal_command``, ``node_provision_command``):
no shell, bounded in time, a failure as one line."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from tuner.execute.retry import ActionFailed


def run_command(
    argv: Sequence[str], what: str, timeout_s: float, env: Mapping[str, str] | None = None
) -> None:
    """Run ``argv`` (``env`` added to the tuner's environment); :class:`ActionFailed` naming
    ``what`` when it cannot start, times out or exits non-zero (with its last stderr line)."""
    environment = {**os.environ, **env} if env else None
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=environment,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ActionFailed(f"{what} {argv[0]}: {err}") from err
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise ActionFailed(f"{what} exited {done.returncode}: {last}")
