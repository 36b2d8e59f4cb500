"""Helm for the chart's tests: the binary ``scripts/cluster.sh build-helm`` caches, and the
chart (``charts/deployment-tuner``) rendered, linted or installed with it.

The tests using the ``helm`` fixture are skipped when the binary has not been built (``make
test`` builds it first), or fail when ``CI`` or ``TUNER_REQUIRE_HELM`` is set.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from .scripts import run_script

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "deployment-tuner"

__all__ = ["CHART", "Helm", "helm"]


class Helm:
    """The cached helm binary, with its own cache and config directories (never the user's)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``helm ARGS``; the completed process (its status is the caller's to check)."""
        return subprocess.run(
            [str(self.binary), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, timeout: float = 120) -> str:
        """``helm ARGS``, which must succeed; its output."""
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}{done.stdout}"
        return done.stdout

    def template(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "deployment-tuner",
        namespace: str = "tuner-system",
        values_file: Path | None = None,
    ) -> list[dict[str, Any]]:
        """The chart rendered with ``values`` (written to ``values_file`` when given): its
        objects."""
        args = ["template", release, str(CHART), "--namespace", namespace]
        if values:
            path = values_file or Path(self.env["HELM_CACHE_HOME"]).parent / "values.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(dict(values)))
            args += ["--values", str(path)]
        return [doc for doc in yaml.safe_load_all(self.ok(*args)) if doc]


def _binary() -> Path | None:
    """The cached helm, as ``scripts/cluster.sh env`` names it (nothing is built here)."""
    for line in run_script("cluster.sh", ("env",), os.environ, 30).splitlines():
        if line.startswith("export TUNER_HELM="):
            path = Path(line.partition("=")[2])
            return path if path.is_file() else None
    return None


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The cached helm binary (``scripts/cluster.sh build-helm``)."""
    binary = _binary()
    if binary is None:
        msg = "helm is not built: run scripts/cluster.sh build-helm"
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_HELM"):
            pytest.fail(msg)
        pytest.skip(msg)
    return Helm(binary, tmp_path_factory.mktemp("helm"))
