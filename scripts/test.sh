#!/usr/bin/env bash
# Set up, then run the whole test suite (CI runs exactly this through .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
