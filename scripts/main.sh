#!/usr/bin/env bash
# Set up, then run the main job on its embedded default: every bundled scenario in
# conf/scenarios replayed under all four protocol variants, checked against its expect block.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/replemu run conf/scenarios/*.yaml --protocol all --check "$@"
