"""A real, private Prometheus that already holds weeks of a synthetic series, for the load
history and the forecast.

Prometheus takes samples only near now when it scrapes, so the past is written directly as
TSDB blocks: the series goes into an OpenMetrics file, ``promtool tsdb create-blocks-from
openmetrics`` (the Debian package's backfilling tool) turns it into blocks in the TSDB
directory, and Prometheus is started on it through ``scripts/prometheus.sh`` with a retention
long enough to keep them. From then on it scrapes a :class:`~testkit.exporter.TestExporter`
serving the same series live, so the history continues into the present (the backfilled
samples carry the scrape's ``job`` and ``instance`` labels: they are the very series the scrape
goes on with, not a second one beside it)::

    with backfilled(tmp_path, samples) as harness:   # samples: (labels, epoch s, value)
        harness.exporter.set_gauge("tuner_test_load", {"app": "a"}, 42.0)
        ...
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .exporter import TestExporter
from .prometheus_fixture import JOB, PrometheusHarness, free_port, require_prometheus, started

METRIC = "tuner_test_load"
MARKER = ".tuner-prometheus"
"""The file scripts/prometheus.sh leaves in a state directory it may adopt and wipe."""

Sample = tuple[Mapping[str, str], float, float]
"""(labels, epoch seconds, value) of :data:`METRIC`."""


def openmetrics(samples: Iterable[Sample], scrape: Mapping[str, str]) -> str:
    """The samples as an OpenMetrics text file (a gauge, in the order given), each with the
    ``scrape`` labels too."""
    lines = [f"# HELP {METRIC} synthetic load history", f"# TYPE {METRIC} gauge"]
    for labels, at, value in samples:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted({**labels, **scrape}.items()))
        lines.append(f"{METRIC}{{{inner}}} {value!r} {at:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def backfilled(
    state_dir: Path, samples: Iterable[Sample], retention: str = "60d"
) -> Iterator[PrometheusHarness]:
    """A started Prometheus whose TSDB holds ``samples`` (sorted by time per series), scraping
    a fresh exporter; stopped and wiped afterwards."""
    require_prometheus()
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    data = state_dir / "data"
    data.mkdir(parents=True)
    (state_dir / MARKER).touch()
    exporter = TestExporter().start()
    try:
        source = state_dir / "history.om"
        scrape = {"job": JOB, "instance": exporter.target}
        source.write_text(openmetrics(samples, scrape), encoding="utf-8")
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        source.unlink()
    except BaseException:
        exporter.stop()
        raise
    with started(PrometheusHarness(exporter, free_port(), state_dir, retention)) as harness:
        yield harness
