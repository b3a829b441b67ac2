"""The head roles: their names, the relations they score, and the columns of ``heads.csv``.
The table of what each role measures is in ``analyses.heads.probe`` and docs/head-roles.md."""

from __future__ import annotations

__all__ = ["ROLES", "LINGUISTIC_ROLES", "RELATIONS", "COLUMNS", "SET_ROLES", "OFFSET_ROLES", "BROAD_THRESHOLD"]

ROLES = (
    "local",
    "subject_verb",
    "anaphora",
    "delimiter",
    "previous_token",
    "next_token",
    "self_token",
    "attention_sink",
    "sep_eos",
    "punctuation",
    "broad",
    "induction",
    "duplicate_token",
)
LINGUISTIC_ROLES = ("subject_verb", "anaphora")
RELATIONS = {  # relation -> (forward direction: row=query, gold=target; reverse direction)
    "subject_verb": ("verb->subject", "subject->verb"),
    "anaphora": ("pronoun->antecedent", "antecedent->pronoun"),
}
COLUMNS = [
    "model", "layer", "head", "role", "direction", "metric", "score", "baseline", "baseline_kind",
    "ci_low", "ci_high", "n", "p_value", "p_adjusted", "label", "null_score", "mass",
    "offset_baseline", "candidate_baseline", "margin",
]  # fmt: skip
SET_ROLES = ("attention_sink", "sep_eos", "punctuation", "delimiter")
OFFSET_ROLES = {"previous_token": -1, "self_token": 0, "next_token": 1}
BROAD_THRESHOLD = 0.9
PATTERN_HOOK = "blocks.{layer}.attn.hook_pattern"
