#!/usr/bin/env bash
# The powered causal validation of SmolLM2's labels (issue 21 section 4; docs/validation.md): its own
# command, after the main job (it reads $OUT/smollm2/heads.csv), because it does not fit the main
# job's 20-minute budget. Up to 120 prompts per metric that the model solves, the labelled non-sink
# heads against a layer-matched null of 30 heads, and each role's group ablation against 30 random
# groups from the same layers. Output: $OUT/smollm2/powered/ (powered.md, powered.csv, groups.csv,
# accuracy.csv, powered.json with the seconds it took).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-out}
if [ -e "$OUT" ] && [ ! -d "$OUT" ]; then  # one line, not interp's "Not a directory" on $OUT/smollm2/heads.csv
  echo "scripts/powered.sh: OUT=$OUT is a file, not a folder; set OUT to the main job's output folder (default: out)" >&2
  exit 2
fi
start=$SECONDS
# each role's best 5 heads by score (SmolLM2 labels 32 local and 23 previous-token heads), alone and as
# one group; arguments after these replace them (--max-heads-per-role 10, --n 60, --n-null 20)
.venv/bin/interp validate --model smollm2 --labels "$OUT/smollm2/heads.csv" --out "$OUT/smollm2/powered" --powered \
  --max-heads-per-role 5 "$@"
echo "== smollm2 powered validation: $((SECONDS - start)) s; see $OUT/smollm2/powered/powered.md"
