#!/usr/bin/env bash
# The project's one test command (run by `make test` and by CI): installs what the tests need
# through the project scripts, then lint, type checks, the docs (the settings reference is fresh,
# the MkDocs site builds with no broken link) and every test. The servers themselves are started
# and stopped by the test fixtures, through the same scripts.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/prometheus.sh install
bash scripts/neo4j.sh install
bash scripts/chromium.sh install
bash scripts/cluster.sh build-helm

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python scripts/settings_reference.py --check
site=$(mktemp -d)
.venv/bin/mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
.venv/bin/pytest "$@"
