#!/usr/bin/env bash
# Set everything up, then run the main job: the head-probing report on the default model(s).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-out}
.venv/bin/interp tour --model minilm --out "$OUT/tour-minilm"
