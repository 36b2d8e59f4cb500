"""The tuner's own keys are spelled in one module, :mod:`tuner.model.conventions`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuner.model import conventions
from tuner.model.conventions import DEFAULT_PREFIX, POOL_LABEL_BY_SYSTEM, POOL_LABELS, Keys

ROOT = Path(__file__).resolve().parents[2]
TREES = ("tuner", "knowledge", "testkit")
"""The shipped package and the tests' kit (the replay's own label is built from the prefix)."""
HOME = Path(conventions.__file__).resolve()
SPELLINGS = (DEFAULT_PREFIX, *POOL_LABELS)
"""What only the conventions module may spell: the default prefix, the pool labels."""


def _literals(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module (f-string parts too), docstrings and other bare string
    statements (attribute docs) left out."""
    tree = ast.parse(path.read_text(), str(path))
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


def _spelled(roots: tuple[Path, ...]) -> list[str]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path.resolve() == HOME:
                continue
            for line, text in _literals(path):
                found += [
                    f"{path.relative_to(ROOT)}:{line}: {text!r}" for key in SPELLINGS if key in text
                ]
    return found


def test_no_module_but_conventions_spells_the_tuners_keys() -> None:
    assert _spelled(tuple(ROOT / tree for tree in TREES)) == []


def test_the_check_finds_a_key_in_code_not_in_prose(tmp_path: Path) -> None:
    """The check above is not vacuous: a literal is found, in an f-string too; prose is not."""
    module = tmp_path / "module.py"
    module.write_text(
        '"""Docs may name tuner.dev/managed."""\n'
        'KEY = "tuner.dev/managed"\n'
        '"""Attribute docs may too: tuner.dev/x."""\n'
        'LABEL = f"{KEY}-cloud.google.com/gke-nodepool"\n'
    )
    assert [(line, text) for line, text in _literals(module) if "tuner.dev" in text] == [
        (2, "tuner.dev/managed")
    ]
    assert any("gke-nodepool" in text for _, text in _literals(module))


def test_pool_labels_are_one_table_read_in_order() -> None:
    assert tuple(POOL_LABEL_BY_SYSTEM.values()) == POOL_LABELS
    assert POOL_LABELS[0] == POOL_LABEL_BY_SYSTEM["gke"]


@pytest.mark.parametrize("prefix", [DEFAULT_PREFIX, "example.com"])
def test_every_key_follows_the_configured_prefix(prefix: str) -> None:
    keys = Keys(prefix)
    built = [
        keys.managed,
        keys.changes,
        keys.taint,
        keys.left_for_removal,
        keys.placeholder,
        keys.provisional,
        keys.onboarded,
        keys.controller,
        keys.paused,
        keys.workload_label("shop", "web"),
    ]
    assert all(keys.owns(key) for key in built)
    assert not any(Keys("other.io").owns(key) for key in built)
    assert keys.journal == f"{prefix.replace('.', '-')}-journal"
    assert keys.evictions == f"{prefix.replace('.', '-')}-evictions"
