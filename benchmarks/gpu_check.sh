#!/usr/bin/env bash
# One prepared GPU check (issue 11, item 5), for the few minutes a GPU machine is lent:
# measure the quick suite on cuda:0, calibrate, validate, and predict a decode step of a
# bundled model on the calibrated spec beside the catalog spec. Everything it writes goes to
# $OUT (default docs/measurements/gpu-<date>); commit that folder with the figures.
# Run from the repository root: bash benchmarks/gpu_check.sh   (needs torch with CUDA)
set -euo pipefail
OUT=${OUT:-docs/measurements/gpu-$(date +%Y%m%d)}
mkdir -p "$OUT"
run() { echo "+ $*" | tee -a "$OUT/commands.txt"; "$@"; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv \
    > "$OUT/nvidia-smi.csv" || true
run python -m roofline measure --device cuda:0 --suite quick -o "$OUT/results.json"
run python -m roofline calibrate "$OUT/results.json" -o "$OUT/calibrated.yaml"
run python -m roofline validate "$OUT/results.json" > "$OUT/validate.txt" 2>&1 || true
name=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['environment']['device']\
.get('catalog_name') or 'h100-sxm')" "$OUT/results.json")
for hw in "$OUT/calibrated.yaml" "$name"; do
  tag=$(basename "$hw" .yaml)
  run python -m roofline estimate llama-3.1-8b --hardware "$hw" --engine none --batch 1,16 \
      --prompt 1024 --gen 128 --breakdown --json > "$OUT/estimate-$tag.json"
done
echo "wrote $OUT"
