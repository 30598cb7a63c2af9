#!/usr/bin/env bash
# Set up, then run the main job on its embedded default: the bundled scenarios in
# conf/scenarios, replayed by the core (checked against their expect blocks) and streamed
# through the Spark Structured Streaming job (local Spark) under every protocol variant of the
# variant table (emulator.VARIANT_NAMES: the headings and the results below are read from it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
R=.venv/bin/replemu
OUT="${1:-out/main}"
VARIANTS="$(.venv/bin/python -c 'import emulator; print(" ".join(emulator.VARIANT_NAMES))')"
echo "== the core: every bundled scenario under every variant ($VARIANTS) =="
$R run conf/scenarios/*.yaml --protocol all --check --summary
rm -rf "$OUT"
echo
echo "== the streaming job: bundled scenarios as events, 4 micro-batches per variant ($VARIANTS) =="
$R compile conf/scenarios/*.yaml --out "$OUT/events" --split 4
$R stream --input "$OUT/events" --output "$OUT/output" --checkpoint "$OUT/checkpoint" --protocol all --max-files-per-trigger 1
for p in $VARIANTS; do
  echo
  $R results "$OUT/output/$p"
done
echo
$R dashboard "$OUT/output" --output "$OUT" --partition s1-kip101-scenario-1/0
echo
echo "outputs (Parquet, one directory per kind and batch id): $OUT/output/<variant>/"
echo "expectation results: $OUT/output/<variant>/validations/, GX Data Docs: $OUT/output/<variant>/data_docs/index.html"
echo "dashboard (self-contained, opens offline): $OUT/dashboard.html"
echo "as contract results: $R results $OUT/output/<variant> --json"
