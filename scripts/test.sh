#!/usr/bin/env bash
# Set up, then run the whole test suite (CI runs exactly this through .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The dashboard test loads the page in Debian's headless Chromium; install it when we can.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test: installing Debian's chromium for the dashboard test"
  { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/tmp/replemu-apt.log 2>&1 \
    || echo "test: chromium could not be installed (see /tmp/replemu-apt.log); its test will be skipped"
fi
# The metrics test starts Debian's Prometheus server and scrapes `replemu serve` with it.
if ! command -v prometheus >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test: installing Debian's prometheus for the metrics test"
  { apt-get install -y -q --no-install-recommends prometheus || { apt-get update -q && apt-get install -y -q --no-install-recommends prometheus; }; } \
    >/tmp/replemu-apt-prometheus.log 2>&1 \
    || echo "test: prometheus could not be installed (see /tmp/replemu-apt-prometheus.log); its test will be skipped"
fi
# The linter first (its rules: pyproject.toml [tool.ruff.lint]); a finding fails the run.
echo "test: ruff check"
.venv/bin/ruff check --no-cache .
# CI has a 20-minute budget on a 2-core machine. Two pytest processes share the test files (a whole
# file each at a time, so a file's module fixtures are built once): the suite waits on JVMs, servers
# and subprocesses often enough that a second process fills the gaps. REPLEMU_TEST_WORKERS=0 runs it
# in this one process. The slowest tests are listed at the end.
workers="${REPLEMU_TEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
  exec .venv/bin/python -m pytest --durations=20 "$@"
fi
# Files are handed out in collection order, the long ones first (tests/conftest.py LONG_FILES).
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder --durations=20 "$@"
