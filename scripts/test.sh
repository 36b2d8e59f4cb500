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
# The control plane's binaries, Karpenter's and metrics-server's, built here on a fresh machine
# (about 25 minutes on 2 cores) rather than inside the first test that needs them, where
# pytest's per-test timeout would end the build and fail every control-plane test.
bash scripts/cluster.sh build

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python scripts/settings_reference.py --check
site=$(mktemp -d)
# Not --quiet: it drops the warnings that --strict fails on. The log is shown only on failure.
if ! .venv/bin/mkdocs build --strict --site-dir "$site" >"$site.log" 2>&1; then
  cat "$site.log"
  exit 1
fi
rm -rf "$site" "$site.log"
if [[ $# -gt 0 ]]; then
  exec .venv/bin/pytest "$@"
fi
# Every test, in two pytest processes at once: the control-plane tests (tests/cluster, tests/e2e)
# mostly wait on the API server and the daemon's cycles, the others mostly compute. Each process
# starts the servers it needs on free ports. The control-plane part's report is printed after
# the other's; the run fails if either does.
control_log=$(mktemp)
.venv/bin/pytest -p no:cacheprovider tests/cluster tests/e2e >"$control_log" 2>&1 &
control=$!
trap 'kill "$control" 2>/dev/null || true; rm -f "$control_log"' EXIT
status=0
.venv/bin/pytest --ignore=tests/cluster --ignore=tests/e2e || status=$?
wait "$control" || status=$?
echo "---------------- tests/cluster and tests/e2e ----------------"
cat "$control_log"
exit "$status"
