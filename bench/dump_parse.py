"""``tuner plan --snapshot`` on a given dump: where its time goes, medians over repeats.

    .venv/bin/python -m bench.dump_parse DUMP SETTINGS [--repeat 5]

Each repeat runs, in its own process under ``/usr/bin/time``: ``tuner plan --help`` (the
imports), ``load_dump`` alone and the whole ``tuner plan --snapshot DUMP --settings SETTINGS``.
Prints the medians of wall seconds, CPU seconds (user + sys) and peak RSS, with the load
average before the first run and after the last (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_LOAD = (
    "import sys; from pathlib import Path; from tuner.monitor.dump import load_dump; "
    "load_dump(Path(sys.argv[1]))"
)


def _timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + sys) and peak RSS in MB of ``command``."""
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(
            ["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", *command],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall, user, system, peak_kb = out.read().split()[-4:]
    return float(wall), float(user) + float(system), int(peak_kb) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("settings", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tuner = str(Path(sys.executable).with_name("tuner"))
    steps = {
        "imports (plan --help)": [tuner, "plan", "--help"],
        "load_dump": [sys.executable, "-c", _LOAD, str(args.dump)],
        "plan --snapshot": [
            tuner,
            "plan",
            "--snapshot",
            str(args.dump),
            "--settings",
            str(args.settings),
        ],
    }
    load_before = os.getloadavg()[0]
    runs: dict[str, list[tuple[float, float, int]]] = {step: [] for step in steps}
    for _ in range(args.repeat):
        for step, command in steps.items():
            runs[step].append(_timed(command))
    load_after = os.getloadavg()[0]
    print(
        f"{args.dump} ({args.dump.stat().st_size // 2**20} MiB), {args.repeat} runs, "
        f"load {load_before:.1f} -> {load_after:.1f}"
    )
    print("| step | wall s (median, min-max) | CPU s user+sys | peak MB |")
    print("|---|---|---|---|")
    for step, results in runs.items():
        walls = [r[0] for r in results]
        print(
            f"| {step} | {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}) "
            f"| {statistics.median(r[1] for r in results):.2f} "
            f"| {statistics.median(r[2] for r in results)} |"
        )


if __name__ == "__main__":
    main()
