"""The settings reference page (docs/settings.md) is generated from the JSON Schema and fresh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "settings_reference.py"
SCHEMA = ROOT / "settings" / "settings.schema.json"


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args], capture_output=True, text=True, check=False
    )


def test_the_settings_page_is_fresh() -> None:
    result = generate("--check")
    assert result.returncode == 0, result.stderr


def test_a_schema_change_makes_the_page_stale(tmp_path: Path) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    schema["properties"]["windows"]["properties"]["measure_s"]["default"] = 1234
    changed = tmp_path / "schema.json"
    changed.write_text(json.dumps(schema), encoding="utf-8")
    stale = generate("--schema", str(changed), "--check")
    assert stale.returncode == 1
    assert "docs/settings.md is stale" in stale.stderr
    page = tmp_path / "settings.md"
    assert generate("--schema", str(changed), "--output", str(page)).returncode == 0
    assert "| `windows.measure_s` | number | `1234` |" in page.read_text(encoding="utf-8")


def test_every_setting_has_a_row() -> None:
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for section, spec in schema["properties"].items():
        for key in spec.get("properties", {}):
            assert f"`{section}.{key}`" in page
        if spec.get("deprecated"):
            assert f"| `{section}` |" in page


def test_a_missing_schema_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = generate("--schema", str(tmp_path / "absent.json"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("--schema: cannot read")


def test_every_key_is_described(tmp_path: Path) -> None:
    """Sections, keys at every depth (a pool's keys under ``pools.<name>``, a taint's under
    ``taints[]``) and the 2019 keys: each says what it does, or the page is not made."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    schema["properties"]["windows"]["properties"]["brand_new"] = {"type": "number"}
    pool = schema["properties"]["pools"]["additionalProperties"]
    pool["properties"]["template"]["properties"]["zone"] = {"type": "string"}
    changed = tmp_path / "schema.json"
    changed.write_text(json.dumps(schema), encoding="utf-8")
    page = tmp_path / "settings.md"
    refused = generate("--schema", str(changed), "--output", str(page))
    assert refused.returncode == 1
    assert refused.stderr == (
        "--schema: keys without a description: pools.<name>.template.zone, windows.brand_new\n"
    )
    assert not page.exists()


def test_maps_and_lists_of_objects_get_rows() -> None:
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert "| `pools.<name>.min` | integer |" in page
    assert "| `pools.<name>.template.taints[].effect` |" in page
    assert "| `measure_window` | number | > 0, ≤ 315360000 | 2019 key: windows.measure_s. |" in page
