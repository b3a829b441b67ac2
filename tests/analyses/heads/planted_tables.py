"""A heads.csv by hand, for the readers of the labels v4 columns (``reading``, ``real_text``): every
head's rows as the probe writes them, with labels planted where a test wants them.

Two layers x three heads of a causal model:
- L0H0: subject_verb labelled in the predictive reading only (pre-verb->subject), templates only;
- L1H1: subject_verb labelled in both readings (retrospective stronger), supported by spaCy-silver;
- L1H0: ioi (predictive), supported (templates: the IOI prompts are generated, so "templates only");
- L0H1: attention_sink by weight and by norm (a sink writer); L0H2: by weight only (a no-op sink);
- L1H2: nothing. Anaphora is measured (retrospective, antecedent=other) and labels no head.
On spaCy-silver's "attractor, distance 3+" items the strongest heuristic ("nearest noun or pronoun",
0.86) is beaten by L1H1's verb row (ci_low 0.88) and not by the best predictive head (L1H1, 0.70)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses.heads.roles import COLUMNS

GATE_SUBSET = "attractor, distance 3+"
SV_RETRO, SV_PRED, IOI = "verb->subject", "pre-verb->subject", "final->indirect_object"
READING = {SV_RETRO: "retrospective", SV_PRED: "predictive", IOI: "predictive", "all": "-"}
READING["pronoun->antecedent"] = "retrospective"
# (layer, head, role, direction, weighting) -> (score on the label-carrying row, real_text)
LABELS = {
    (0, 0, "subject_verb", SV_PRED, "attention"): (0.80, "templates only"),
    (1, 1, "subject_verb", SV_RETRO, "attention"): (0.95, "supported (spacy-silver)"),
    (1, 1, "subject_verb", SV_PRED, "attention"): (0.70, "supported (spacy-silver)"),
    (1, 0, "ioi", IOI, "attention"): (0.90, "templates only"),
    (0, 1, "attention_sink", "all", "attention"): (0.95, "-"),
    (0, 1, "attention_sink", "all", "norm"): (0.90, "-"),
    (0, 2, "attention_sink", "all", "attention"): (0.95, "-"),
}
GATE_SCORES = {(1, 1, SV_RETRO): (0.95, 0.88), (1, 1, SV_PRED): (0.70, 0.62), (0, 0, SV_PRED): (0.60, 0.50)}


def _row(layer, head, role, direction, weighting="attention", source="all", subset="all", family="", **kw):
    metric = "accuracy" if direction != "all" else "mass"
    row = dict(
        model="planted-v4", layer=layer, head=head, role=role, direction=direction, metric=metric, score=0.2,
        baseline=0.3, baseline_kind="best offset" if metric == "accuracy" else "uniform", ci_low=0.1, ci_high=0.3,
        n=200, p_value=0.9 if family else np.nan, p_adjusted=1.0 if family else np.nan, label=False,
        null_score=0.2, mass=0.1, offset_baseline=0.3, candidate_baseline=np.nan, margin=0.05,
        specials="exclude" if metric == "accuracy" else "-", source=source, subset=subset, family=family,
        sd_diff=0.4, special_mass=0.0, weighting=weighting, heuristic="-", heuristic_baseline=np.nan, gates=True,
        n_clusters=200, reading=READING[direction], real_text="-",
    )  # fmt: skip
    row.update(kw)
    return row


def _family(role, direction, weighting):
    if direction == SV_PRED:
        return f"{role}@predictive"
    return role if weighting == "attention" else f"{role}@{weighting}"


def planted_heads(old: bool = False) -> pd.DataFrame:
    """The planted table; ``old``: as a heads.csv from before labels v4 (no ``reading``,
    ``real_text`` or ``gate_low`` column, no predictive or ioi rows)."""
    rows = []
    for layer in range(2):
        for head in range(3):
            tests = [(r, "all", w) for r in ("attention_sink", "delimiter") for w in ("attention", "norm")]
            tests += [("previous_token", "all", "attention"), ("subject_verb", SV_RETRO, "attention")]
            tests += [("anaphora", "pronoun->antecedent", "attention")]
            if not old:
                tests += [("subject_verb", SV_PRED, "attention"), ("ioi", IOI, "attention")]
            for role, direction, weighting in tests:
                key = (layer, head, role, direction, weighting)
                score, real = LABELS.get(key, (0.2, "-"))
                lab = key in LABELS
                lab_kw = dict(score=score, ci_low=score - 0.05, ci_high=min(1.0, score + 0.05), label=lab)
                lab_kw.update(p_value=1e-8 if lab else 0.9, p_adjusted=1e-6 if lab else 1.0, real_text=real)
                fam = _family(role, direction, weighting)
                if direction == "all":  # a token role: one row, label-carrying
                    rows.append(_row(layer, head, role, direction, weighting, family=fam, **lab_kw))
                    continue
                # a relation: the pooled descriptive row, the label-carrying row, the real-text gate's row
                pooled = dict(score=score, ci_low=score - 0.05, ci_high=min(1.0, score + 0.05))
                rows.append(_row(layer, head, role, direction, source="all", subset="all", **pooled))
                subset = "antecedent=other" if role == "anaphora" else "all"
                rows.append(_row(layer, head, role, direction, source="generated", subset=subset, family=fam, **lab_kw))
                if role == "subject_verb":
                    s, lo = GATE_SCORES.get((layer, head, direction), (0.30, 0.20))
                    rows.append(
                        _row(layer, head, role, direction, source="spacy-silver", subset=GATE_SUBSET, score=s,
                             ci_low=lo, ci_high=s + 0.05, n=48, baseline=0.86, baseline_kind="nearest noun or pronoun",
                             heuristic="nearest noun or pronoun", heuristic_baseline=0.86)
                    )  # fmt: skip
    df = pd.DataFrame(rows)
    df["model"] = "planted-v4"
    df.attrs.update(model="planted-v4", causal=True, alpha=0.05)
    df["gate_low"] = df["ci_low"]  # the decisions' interval end: the bootstrap's, in this planted table
    cols = [c for c in COLUMNS if not (old and c in ("reading", "real_text", "gate_low"))]
    return df[cols]
