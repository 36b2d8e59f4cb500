"""The daemon's image (Containerfile), built by buildah from Debian's packages without a
container engine daemon (scripts/image.sh): `tuner --version` and `tuner plan` run inside it,
as the non-root user the chart runs it as, and the simulator's extra is not in it.

Building takes minutes (the base from Debian's packages once, then the pip install), so the
test runs only when asked for: ``pytest -m image``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from testkit.scripts import SCRIPTS

pytestmark = pytest.mark.image
TAG = "tuner-test:latest"


def image(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / "image.sh"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=os.environ,
    )


@pytest.fixture(scope="module")
def built() -> str:
    if shutil.which("buildah") is None and image("install").returncode != 0:
        pytest.skip("buildah is not installed and could not be (scripts/image.sh install)")
    done = image("build", TAG)
    assert done.returncode == 0, done.stderr
    return TAG


def test_version_and_plan_run_inside(built: str) -> None:
    version = image("run", built, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "tuner 0.1.0"
    plan = image(
        "run",
        built,
        "plan",
        "--snapshot",
        "/data/cluster-dump.json",
        "--settings",
        "/settings/example.json",
        "--format",
        "json",
    )
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["decision"] == "remove_nodes"


def test_the_simulator_is_left_out(built: str) -> None:
    simulate = image("run", built, "simulate", "--scenario", "diurnal")
    assert simulate.returncode == 1
    assert "needs the simulator's extra" in simulate.stderr
    size = image("size", built)
    assert size.returncode == 0, size.stderr
    print(f"image size: {size.stdout.strip()}")
