#!/usr/bin/env bash
# Create .venv (Python 3.11) and install replemu with its pinned dependencies. Idempotent:
# re-running only reinstalls when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.replemu-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing replemu and its dependencies into .venv (a minute or two on a fresh machine)"
  log=.venv/pip-install.log
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[dev]"; } >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "setup: pip install failed; the full log is $log" >&2
    exit 1
  fi
  touch "$stamp"
fi
