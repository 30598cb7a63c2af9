#!/usr/bin/env bash
# Set up, then run the whole test suite (CI runs exactly this through .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# The browser test loads the dashboard in Debian's headless Chromium and the metrics test scrapes
# `replemu serve` with Debian's Prometheus server: install them when we can (root + apt), in the
# background while setup builds the venv (apt is mostly unpacking: ~30 s on a fresh machine that
# would otherwise come after setup). A package that cannot be installed skips its test.
apt_install() {  # apt_install NAME [apt-get options]
  local name=$1
  shift
  command -v "$name" >/dev/null 2>&1 && return 0
  echo "test: installing Debian's $name (log: /tmp/replemu-apt-$name.log)"
  { apt-get install -y -q "$@" "$name" || { apt-get update -q && apt-get install -y -q "$@" "$name"; }; } \
    >"/tmp/replemu-apt-$name.log" 2>&1 \
    || echo "test: $name could not be installed (see /tmp/replemu-apt-$name.log); its test will be skipped"
}
apt_job=""
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt_install chromium; apt_install prometheus --no-install-recommends; } &
  apt_job=$!
fi
bash scripts/setup.sh
[ -z "$apt_job" ] || wait "$apt_job" || true
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
