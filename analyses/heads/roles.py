"""The head roles: their names, the relations they score, and the columns of ``heads.csv``.
The table of what each role measures is in ``analyses.heads.probe`` and docs/head-roles.md."""

from __future__ import annotations

__all__ = [
    "ROLES",
    "LINGUISTIC_ROLES",
    "RELATIONS",
    "COLUMNS",
    "SET_ROLES",
    "OFFSET_ROLES",
    "BROAD_THRESHOLD",
    "SPECIALS",
    "WEIGHTINGS",
    "NORM_LABEL_ROLES",
    "MAP_ROLES",
]

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
    "rhyme",
    "line_structure",
)
LINGUISTIC_ROLES = ("subject_verb", "anaphora", "rhyme", "line_structure")
RELATIONS = {  # relation -> (forward direction: row=query, gold=target; reverse direction)
    "subject_verb": ("verb->subject", "subject->verb"),
    "anaphora": ("pronoun->antecedent", "antecedent->pronoun"),
    "rhyme": ("line_end->rhyme", "rhyme->line_end"),  # a line's last word -> its rhyme partner's
    "line_structure": ("line_start->previous_start", "previous_start->line_start"),
}
COLUMNS = [
    "model", "layer", "head", "role", "direction", "metric", "score", "baseline", "baseline_kind",
    "ci_low", "ci_high", "n", "p_value", "p_adjusted", "label", "null_score", "mass",
    "offset_baseline", "candidate_baseline", "margin",
    "specials", "source", "subset", "family", "sd_diff", "special_mass", "weighting",
    "heuristic", "heuristic_baseline", "gates", "n_clusters",
]  # fmt: skip
# heuristic  the best noun heuristic (relation rows looking back: "nearest noun", "first noun",
#           "noun k"), heuristic_baseline its accuracy on the row's items; gates: False where a
#           label-carrying row fails probe.LABEL_GATES (ci_low <= the best heuristic on a subset).
# n_clusters the clusters behind the row (analyses.data.Item.cluster): the test's and the interval's unit.
# Where a row comes from (the columns after ``margin``):
# specials  how special tokens ([CLS], [SEP], BOS) enter a word-relation argmax: "exclude" (Clark et
#           al. 2019: the largest weight among the sentence's other words) or "include" (special
#           tokens compete as columns of their own); "-" for the token-level roles.
# source    the data source of the items ("all": pooled; "generated", "winobias", "spacy-silver",
#           "conllu"); subset: a slice of them ("all", "antecedent=subject", "antecedent=other",
#           "attractor", "no attractor", "distance 1-2", "distance 3+").
# family    the multiple-comparison family the row's p_adjusted belongs to (the role's name) for the
#           rows that can carry a label; "" for descriptive rows (own p_value, no label).
# weighting "attention" (the pattern) or "norm" (Kobayashi et al. 2020: each weight times the norm of
#           what the key writes, ||a_ij v_j W_O||, renormalised per row). Labels come from the
#           attention rows, except that a boundary label (delimiter, punctuation, sep_eos) needs the
#           norm row to pass too (family "<role>@norm"); the other norm rows are descriptive.
# sd_diff   sample standard deviation of the per-sentence (score - baseline): what the power figure
#           uses. special_mass: mean attention from the row word to special tokens (relation rows).
SPECIALS = ("exclude", "include")  # the first is the convention that carries labels
WEIGHTINGS = ("attention", "norm")
# the boundary roles, whose norm-weighted rows carry a label too (family "<role>@norm"): a head labelled
# by weight only is a no-op sink in the map (attention_sink keeps its meaning: where the weight goes)
NORM_LABEL_ROLES = ("delimiter", "punctuation", "sep_eos")
MAP_ROLES = (*ROLES, "noop_sink")  # the map's names: noop_sink = a delimiter head by weight only
SET_ROLES = ("attention_sink", "sep_eos", "punctuation", "delimiter")
OFFSET_ROLES = {"previous_token": -1, "self_token": 0, "next_token": 1}
BROAD_THRESHOLD = 0.9
