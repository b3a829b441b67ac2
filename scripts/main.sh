#!/usr/bin/env bash
# Set everything up, then run the main job: the head-probing report on both embedded real models
# (MiniLM encoder, SmolLM2 causal LM), the invariance checks, the causal validation of the labels,
# and a one-page summary with the cross-model comparison. Output in $OUT (default: out/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-out}
I=.venv/bin/interp
# Probing data: generated families (gold) plus real text: WinoBias (gold antecedents), spaCy-parsed
# XSum news sentences (silver subject-verb arcs) and XSum punctuation. --n items per relation and source.
SOURCES=generated,winobias,spacy,xsum
for model in minilm smollm2; do
  n=300; [ "$model" = smollm2 ] && n=150   # SmolLM2's 30 layers cost ~5x MiniLM's 6 per sentence
  $I probe --model "$model" --out "$OUT/$model" --n "$n" --sources "$SOURCES"
  # exits non-zero when a measurement disagrees with theory: a finding for the report, not a crash
  $I invariance --model "$model" --out "$OUT/$model/invariance" \
    || echo "interp invariance: some measurements on $model disagree with theory; see $OUT/$model/invariance/invariance.md"
  $I validate --model "$model" --labels "$OUT/$model/heads.csv" --out "$OUT/$model/validation"
done
$I summary --out "$OUT"
echo "main job done: $OUT/summary.md, $OUT/minilm/report.html, $OUT/smollm2/report.html"
