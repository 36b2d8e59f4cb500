"""The tuner command line: plan output contract, kb commands, one-line errors with status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "cluster-dump.json"
SETTINGS = ROOT / "settings" / "example.json"


def tuner(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        check=False,
    )


def settings_file(tmp_path: Path, **overrides: object) -> Path:
    document = json.loads(SETTINGS.read_text())
    document["knowledge"] = {"backend": "embedded", "path": str(tmp_path / "kb.sqlite")}
    document.update(overrides)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(document))
    return path


def test_plan_json_follows_the_contract(tmp_path: Path) -> None:
    result = tuner(
        "plan",
        "--snapshot",
        str(EXAMPLE),
        "--settings",
        str(settings_file(tmp_path)),
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["decision"] in {"remove_nodes", "previous_deployment", "stay", "random_migration"}
    assert isinstance(plan["reason"], str) and plan["reason"]
    assert set(plan["cost"]) >= {"current", "after"}
    for when in ("before", "after"):
        assert set(plan["utilization"][when]) == {"cpu", "memory", "usable_cpu", "usable_memory"}
    assert plan["decision"] == "remove_nodes"
    assert plan["cost"]["after"] < plan["cost"]["current"]
    ops = [a["op"] for a in plan["actions"]]
    assert ops[-len(plan["removed_nodes"]) :] == ["remove_node"] * len(plan["removed_nodes"])
    for action in plan["actions"]:
        if action["op"] == "migrate":
            # the contract's fields, and how the new pod is placed (no Deployment in the
            # example dump is onboarded)
            assert set(action) == {"op", "pod", "workload", "from", "to", "placement"}
            assert (
                action["placement"]
                == "not controlled (not onboarded): lands where the scheduler puts it"
            )
            assert (
                action["from"] in plan["removed_nodes"]
                and action["to"] not in plan["removed_nodes"]
            )
    assert not (tmp_path / "kb.sqlite").exists()  # plan only reads


def test_plan_text_is_a_table(tmp_path: Path) -> None:
    result = tuner("plan", "--snapshot", str(EXAMPLE), "--settings", str(settings_file(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "decision: remove_nodes" in result.stdout
    assert "remove_node" in result.stdout and "migrate" in result.stdout
    assert "usable cpu" in result.stdout


def test_version() -> None:
    result = tuner("--version")
    assert result.returncode == 0, result.stderr
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert result.stdout == f"tuner {project['version']}\n"


def test_plan_says_which_prices_it_used(tmp_path: Path) -> None:
    """settings/example.json prices both node types of the dump; without settings the
    per-core/GiB formula prices them; a node's annotation wins over both."""
    typed = tuner("plan", "--snapshot", str(EXAMPLE), "--settings", str(settings_file(tmp_path)))
    assert (
        "prices:   e2-standard-4 x4 at 0.1340 USD/h (pricing.node_types); "
        "e2-standard-8 x2 at 0.2680 USD/h (pricing.node_types)\n"
    ) in typed.stdout
    default = tuner("plan", "--snapshot", str(EXAMPLE), "--format", "json")
    sources = {(p["node_type"], p["source"]) for p in json.loads(default.stdout)["prices"]}
    assert sources == {("e2-standard-4", "formula"), ("e2-standard-8", "formula")}
    dump = json.loads(EXAMPLE.read_text())
    node = next(i for i in dump["items"] if i["kind"] == "Node")
    node["metadata"].setdefault("annotations", {})["tuner.dev/price-per-hour"] = "0.5"
    annotated = tmp_path / "annotated.json"
    annotated.write_text(json.dumps(dump))
    priced = json.loads(tuner("plan", "--snapshot", str(annotated), "--format", "json").stdout)
    assert {
        "node_type": node["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        "nodes": 1,
        "price": 0.5,
        "source": "annotation",
    } in priced["prices"]


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_documented_sample_is_what_make_example_prints(page: str) -> None:
    """The sample under "make demo" prints in order what ``make example`` prints ("..." stands
    for lines left out)."""
    text = (ROOT / page).read_text()
    block = text.split("```\ndecision: ", 1)[1].split("```", 1)[0]
    sample = ["decision: " + block.splitlines()[0], *block.splitlines()[1:]]
    printed = tuner("plan", "--snapshot", str(EXAMPLE), "--settings", str(SETTINGS)).stdout
    out = "\n".join(line.rstrip() for line in printed.splitlines())
    chunks = "\n".join("..." if line.strip() == "..." else line.rstrip() for line in sample)
    at = 0
    for chunk in (c.strip("\n") for c in chunks.split("\n...")):
        found = out.find(chunk, at)
        assert found >= 0, f"{page}: not printed as shown (in order):\n{chunk}\n--- printed:\n{out}"
        at = found + len(chunk)


def test_plan_without_settings_uses_defaults() -> None:
    result = tuner("plan", "--snapshot", str(EXAMPLE), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cost"]["current"] > 0


def test_kb_round_trip_and_previous_deployment(tmp_path: Path) -> None:
    settings = settings_file(tmp_path, analyse={"remove_nodes": False, "excluded_namespaces": []})
    recorded = tuner(
        "kb", "record", "--snapshot", str(EXAMPLE), "--load", "1200", "--settings", str(settings)
    )
    assert recorded.returncode == 0, recorded.stderr
    entry = recorded.stdout.strip()
    listing = tuner("kb", "list", "--settings", str(settings))
    assert entry in listing.stdout and "1200" in listing.stdout
    shown = json.loads(tuner("kb", "show", entry, "--settings", str(settings)).stdout)
    assert shown["load"] == 1200 and len(shown["nodes"]) == 6
    # the same deployment at the same load costs the same: stay
    plan = json.loads(
        tuner(
            "plan",
            "--snapshot",
            str(EXAMPLE),
            "--settings",
            str(settings),
            "--load",
            "1250",
            "--format",
            "json",
        ).stdout
    )
    assert plan["decision"] in {"stay", "random_migration"}
    assert tuner("kb", "delete", entry, "--settings", str(settings)).returncode == 0
    missing = tuner("kb", "delete", entry, "--settings", str(settings))
    assert missing.returncode == 2 and f"no execution '{entry}'" in missing.stderr


def _assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert (
        lines[-1].startswith("tuner: error:")
        or lines[-1].startswith("usage:")
        or "error:" in lines[-1]
    )
    assert fragment in result.stderr


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("malformed_dump", "is not valid JSON"),
        ("unknown_key", "unknown key 'colour'"),
        ("out_of_range", "analyse.migration_chance: 2 is greater than the maximum of 1"),
        ("unknown_node", "is on unknown node 'ghost'"),
        ("negative_load", "load must be a finite number >= 0"),
        ("missing_dump", "cannot read dump"),
    ],
)
def test_bad_input_gives_one_line_and_status_2(tmp_path: Path, setup: str, fragment: str) -> None:
    dump, settings, load = EXAMPLE, settings_file(tmp_path), "100"
    if setup == "malformed_dump":
        dump = tmp_path / "bad.json"
        dump.write_text('{"items": [')
    elif setup == "unknown_key":
        settings = settings_file(tmp_path, colour="blue")
    elif setup == "out_of_range":
        settings = settings_file(tmp_path, analyse={"migration_chance": 2})
    elif setup == "unknown_node":
        document = json.loads(EXAMPLE.read_text())
        pod = next(i for i in document["items"] if i["kind"] == "Pod")
        pod["spec"]["nodeName"] = "ghost"
        dump = tmp_path / "ghost.json"
        dump.write_text(json.dumps(document))
    elif setup == "negative_load":
        load = "-5"
    elif setup == "missing_dump":
        dump = tmp_path / "nope.json"
    result = tuner(
        "kb", "record", "--snapshot", str(dump), "--settings", str(settings), "--load", load
    )
    _assert_one_line_error(result, fragment)
    assert not (tmp_path / "kb.sqlite").exists()  # never a partial write
    plan = tuner("plan", "--snapshot", str(dump), "--settings", str(settings), "--load", load)
    _assert_one_line_error(plan, fragment)
