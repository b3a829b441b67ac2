"""Head-probing reports: ``heads.csv`` and ``report.md`` (its tables and text; the figures are
``analyses.heads.figures``; ``analyses.report.compose`` adds other analyses to them, e.g. retrieval
heads, and writes the cross-model comparison).
Every file is written through ``interp.io.atomic_write``, so a reader never sees half a report. The
HTML page a person opens (``report.html``: the head explorer, the labelled heads, invariances and
validation) is rendered from these files by ``analyses.report.page``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.heads.figures import heatmap_figure, lens_figure, pattern_figure, role_map_figure
from analyses.heads.labels import has_norm_rows, headline, label_names, labelled_roles, map_sensitivity, role_map
from analyses.heads.roles import COLUMNS, LABEL_NAMES, LINGUISTIC_ROLES
from analyses.heads.summaries import REAL_TEXT_GATE, detectable_effect, heuristic_table, no_label_bound, real_text
from interp.display import fmt, md_table
from interp.io import atomic_write

__all__ = [
    "ROLE_TEXT",
    "sensitivity_text",
    "Section",
    "report_sections",
    "read_sections",
    "sections_markdown",
    "write_csv",
    "write_report",
    "heatmap_figure",
    "pattern_figure",
    "role_layers",
]

STATS_TEXT = (
    "Each (head, role, direction) is tested over **clusters**, not sentences: items that are not "
    "independent share a cluster (the windows of one sonnet, a WinoBias pro/anti pair, the sentences of "
    "one XSum article, the two sentences of a minimal pair; every other item is its own cluster). The "
    "test is a one-sided t-test of the mean per-item difference score minus baseline against a minimum "
    "effect (margin {margin} of accuracy for `subject_verb`/`anaphora`, {mass_margin} of attention mass "
    "for the mass roles; for `broad`, no margin over its per-row reference, the normalised entropy a "
    "random row over the same keys has on average), with the cluster-robust (Liang-Zeger) standard "
    "error of that mean and clusters - 1 degrees of freedom (`n_clusters`). **One family per role**: "
    "Holm-Bonferroni over the role's label-carrying tests ({n_tests} tests in all) keeps the chance that "
    "the role's list holds even one false head at or below {alpha}, whatever the dependence between "
    "heads. **The map as a whole is not controlled at {alpha}**: it joins {n_families} families (the "
    "roles, the boundary roles' norm rows, and each reading of a relation), so the chance of some false "
    "label anywhere in it is bounded only by {n_families} x {alpha} = {map_bound} (union bound); to hold "
    "the whole map at {alpha}, run with alpha = {alpha} / {n_families}. One family per role rather than "
    "one per model because each role is its own claim: a reader checks the anaphora heads against the "
    "anaphora evidence, and a head's anaphora label should not depend on how many unrelated roles were "
    "tested beside it. FWER rather than FDR because a label is a claim about one specific head that later"
    " work (ablations, circuits) acts on. The intervals shown are 95% percentile cluster-bootstrap "
    "intervals (one Poisson weight per cluster, {n_boot} replicates), per head; accuracy intervals are "
    "widened to the Wilson score interval at the number of clusters, so a small all-correct sample is not "
    "[1, 1]. Decisions read another lower end, `gate_low`: the 95% cluster-robust t interval's (the "
    "test's own standard error, clusters - 1 degrees of freedom; for accuracies at most the Wilson end), "
    "exact given the run's sums, where a percentile end at {n_boot} replicates moves by a few thousandths "
    "between seeds. A head gets a label only where the Holm-adjusted p <= {alpha}, `gate_low` is above "
    "the baseline, and (except `broad`, a descriptive role: random-init heads are even too) above the same "
    "head's score in a randomly initialised model of the same architecture (`null_score`); the gates and "
    "real-text support read `gate_low` too."
)

CONVENTIONS_TEXT = (
    "**Which row carries the label.** Word relations are scored per data source, and each source is "
    "tested on its own: a head that resolves generated pronouns but not WinoBias (whose antecedents "
    "need world knowledge, not a pronoun cue) is an anaphora head on that source, and pooling the "
    "two would hide it. The label-carrying rows (`family` = the role) are: for `subject_verb`, every "
    "source on all its items; for `anaphora`, every source on the items whose antecedent is neither "
    "the sentence's first noun (its subject) nor the noun nearest to the pronoun (`subset` = "
    "`antecedent=other`: a distractor of the wrong gender or number stands nearer), so that neither a "
    "subject-attending nor a nearest-noun head can pass; for the token-level roles, one row per head. "
    "All of them take the special-token convention `specials = exclude`. Every other row is "
    "descriptive (`family` empty): its own p-value, no label, outside the multiple-comparison family: "
    "sources pooled (`source = all`), the subsets (antecedent = subject / nearest / other; attractor "
    "or not; distance 1-2 or 3+), and `specials = include`.\n\n"
    "**Special tokens** ([CLS], [SEP], BOS). `specials = exclude` takes, as Clark et al. (2019) do "
    "(their analysis keeps `attn[1:-1, 1:-1]`), the row word's largest weight among the sentence's "
    "other words; `specials = include` lets special tokens compete as columns of their own, so a row "
    "whose largest weight goes to [SEP] counts as wrong. `special_mass` is the attention the row word "
    "puts on special tokens, reported beside the accuracy. A model whose inputs have no special tokens "
    "gets identical rows under both conventions.\n\n"
    "**The sink.** Every model has an explicit sink position, position 0, and it is a special token: "
    "MiniLM's [CLS]; SmolLM2, whose tokenizer adds no BOS, gets `<|endoftext|>` (its pre-training "
    "document separator) prepended for the head analyses, so that its first word is free to be a "
    "subject and `specials = exclude` leaves the sink out of every word argmax (the model's own "
    "`to_tokens` still adds nothing). `delimiter` leaves the sink out too and is scored on the "
    "sink-excluded row, renormalised: a delimiter head attends to delimiters when it is not idling."
)

POWER_TEXT = (
    "**Power.** The smallest true effect over the baseline (margin included) that this run labels "
    "with probability 0.8, at the observed variance of the per-sentence differences (median over "
    "heads), tested at Holm's strictest level alpha / m (m: the role's family size): "
    "margin + (t(1 - alpha/m, n-1) + t(0.8, n-1)) sd / sqrt(n). A head whose true effect is larger is "
    "labelled with at least 80% probability; a role with no label and a detectable effect of, say, "
    "0.15 has no head that beats its baseline by 0.15."
)

MAP_TEXT = (
    "Every head with its primary role: what it does when it is not idling on the sink. Its labelled "
    "roles other than the sink roles (`attention_sink`, `noop_sink`) are ranked by the "
    "ceiling-normalised effect (score - baseline) / (ceiling - baseline), the share of the way from "
    "the baseline to the best score the metric allows (1 for accuracies, masses and entropy; 0.5 for "
    "the induction and duplicate-token scores, which only the repeated half of a sequence can earn), "
    "so roles with different ceilings share one scale; the number in each cell is that share in %. "
    "Secondary roles follow, in the same order. The sink is the map's second layer: a framed cell "
    "holds a sink label, and the right-hand grid shows every head's attention on the sink by weight "
    "(grey) and by norm (the number, in %). A head whose only labels are sink roles is a `sink writer` "
    "(its attention_sink label is confirmed by the norm lens: it writes what it reads from the sink) or a "
    "`no-op sink` (its sink labels are by weight only: it moves almost nothing from there); without the "
    "norm lens the two cannot be told apart and the head is `idle (sink)`. A relation read both ways "
    "names its reading: `subject_verb (retrospective)` on the verb's own row (Clark et al. 2019), "
    "`subject_verb (predictive)` on the row of the token before the verb, where a causal model predicts "
    "it; they are two roles."
)


# What each role means, in a sentence a page can show beside the map (the full table: the module
# docstring of analyses.heads.probe and docs/head-roles.md).
ROLE_TEXT = {
    "local": "attention on the token itself and its two neighbours (offsets -1, 0, +1).",
    "subject_verb": "from a verb to its subject (or back): the row word's largest weight lands on the gold "
    "partner, against the best fixed offset and the first word.",
    "anaphora": "from a pronoun to its antecedent (or back), on items where the antecedent is neither the "
    "subject nor the nearest noun.",
    "delimiter": "attention on punctuation and special tokens other than the sink, on the row without the sink "
    "(renormalised), and (where the norm lens ran) what it reads from them has weight: ||a v W_O|| confirms it.",
    "previous_token": "attention on the token just before.",
    "next_token": "attention on the token just after (bidirectional models).",
    "self_token": "attention on the token itself.",
    "attention_sink": "attention on the sink, position 0 ([CLS], or the <|endoftext|> prepended for a model "
    "without a BOS), confirmed by the norm lens: the head moves something from it. The map's second layer.",
    "learned_sink": "the part of each softmax row the head's learned sink logit takes (gpt-oss: one more column "
    "of every row with no value, so it moves nothing): 1 minus the pattern's row sum, on the rows the "
    "attention_sink score reads; baseline 0. Part of the map's sink layer.",
    "sep_eos": "attention on trailing special tokens ([SEP], EOS), else on the sentence-final punctuation.",
    "punctuation": "attention on punctuation words.",
    "broad": "attention spread out: row entropy over log(visible keys) above a random row's over the same keys. "
    "Descriptive: a randomly initialised model's heads are even too (their score is the row's `null_score`), "
    "so the label says the pattern is even, not that training made it so; no random-init null, no margin.",
    "induction": "attention on the token after an earlier copy of the current token (A B ... A -> B).",
    "duplicate_token": "attention on earlier copies of the current token.",
    "rhyme": "from a line's last word to its rhyme partner's (sonnets), above the same head on a matched "
    "control (non-rhyming line ends of the same sonnets at the same distance).",
    "line_structure": "from a line's first word to the previous line's first word.",
    "noop_sink": "a boundary head by attention weight only: it attends to the sink or to delimiters, but the "
    "norm lens (||a v W_O||) shows it moves almost nothing from them (Kobayashi et al. 2020), so it is "
    "counted as neither. Part of the map's sink layer.",
    "ioi": "from a prompt's final token to the indirect object's first mention (IOI sentences: 'When Mary and "
    "John went to the store, John gave a drink to' -> Mary), against the best offset, the first "
    "word, the first name and the last name (the name mentioned once is the answer itself, not a baseline); read "
    "where the model predicts the name.",
    "sink writer": "no role besides the sink, and its attention_sink label is confirmed by the norm lens: the "
    "head puts its weight on the sink and writes what it reads there (||a v W_O|| is not small).",
    "no-op sink": "no role besides the sink, by attention weight only: the head puts its weight on the sink or "
    "on boundaries and the norm lens shows it moves almost nothing from them.",
    "idle (sink)": "no role besides the sink: the head puts its weight on the sink and passes no other test "
    "(the table has no norm-lens rows, so whether it writes from the sink is not known).",
    "unclassified": "no role passed its test for this head.",
}
READING_TEXT = {
    "retrospective": "Retrospective reading: on the query word's own row (the verb's, the pronoun's; Clark et "
    "al. 2019), after the word is in the context.",
    "predictive": "Predictive reading: on the row of the token before the query word, whose next-token "
    "prediction is that word (a causal model's verb or pronoun is predicted there).",
}
# each label name of a role read both ways: the role's text and its reading's
ROLE_TEXT.update(
    {n: f"{ROLE_TEXT[n.split(' (')[0]]} {READING_TEXT[n.split(' (')[1][:-1]]}" for n in LABEL_NAMES if " (" in n}
)


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """``heads.csv`` with the stable column order of ``analyses.heads.COLUMNS`` first."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"heads table lacks columns {missing}; it must have {COLUMNS}")
    cols = COLUMNS + [c for c in df.columns if c not in COLUMNS]
    return atomic_write(path, df[cols].to_csv(index=False, float_format="%.6g"))


# --------------------------------------------------------------------------------------------------
# Tables (the figures: ``analyses.heads.figures``)


LENS_TEXT = (
    "Kobayashi et al. (2020) weight each attention weight by the norm of what the key actually "
    "writes, ||a_ij v_j W_O|| (renormalised per row here, so scores stay comparable). Attention to "
    "[CLS], [SEP], the first token or punctuation often carries vectors of almost no norm: the head "
    "looks there and moves nothing (Clark et al. 2019 suspected such attention is a no-op). A "
    "boundary label (`attention_sink`, `delimiter`, `punctuation`, `sep_eos`) therefore needs both: the attention row "
    "and the norm-weighted row (`weighting = norm`, family `<role>@norm`) must pass. A head that "
    "passes only by its weights is `noop_sink`, part of the map's sink layer. Left: mass by "
    "attention weight; right: by norm; dots: labelled."
)


def lens_table(df: pd.DataFrame, role: str = "delimiter") -> pd.DataFrame:
    """The heads labelled ``role`` by attention weight, with their score by attention and by norm
    and what the map calls them (``role`` when the norm row is labelled too, else ``noop_sink``)."""
    att = df[(df["role"] == role) & (df["weighting"] == "attention") & df["label"]]
    norm = df[(df["role"] == role) & (df["weighting"] == "norm") & (df["source"] == "all")]
    norm = norm.set_index(["layer", "head"])
    rows = []
    for r in att.itertuples():
        n = norm.loc[(r.layer, r.head)]
        rows.append(
            {
                "layer": r.layer,
                "head": r.head,
                "by attention": fmt3(r.score),
                "by norm": fmt3(n["score"]),
                "baseline": fmt3(r.baseline),
                "map": role if bool(n["label"]) else "noop_sink",
            }
        )
    return pd.DataFrame(rows).sort_values(["map", "layer", "head"]) if rows else pd.DataFrame(rows)


def map_table(heads_map: pd.DataFrame) -> pd.DataFrame:
    """The role map as a table: one row per head, primary role, effect, ceiling-normalised effect,
    the other roles, and the sink layer (its sink label, sink mass by weight and by norm)."""
    table = pd.DataFrame(
        {
            "layer": heads_map["layer"],
            "head": heads_map["head"],
            "primary": heads_map["primary"].astype(str),
            "effect": heads_map["effect"].map(fmt3),
            "of ceiling": heads_map["relative"].map(lambda x: fmt(x, 2, True)),
            "secondary": heads_map["secondary"],
            "sink": heads_map["sink"],
            "sink weight": heads_map["sink_weight"].map(fmt3),
            "sink norm": heads_map["sink_norm"].map(fmt3),
        }
    )
    if "retrieval" in heads_map:  # a long-context score (``with_retrieval``), when one was given
        table["retrieval"] = heads_map["retrieval"].map(fmt3)
    return table


def source_table(df: pd.DataFrame) -> pd.DataFrame:
    """For every head labelled with a word relation: its score, baseline and n on each source and
    subset (specials excluded), so a reader sees where the head works and where it does not."""
    if "weighting" in df:  # the attention rows carry the relation labels; norm rows are descriptive
        df = df[df["weighting"] == "attention"]
    lab = df[df["label"] & df["role"].isin(LINGUISTIC_ROLES)]
    lab = lab.assign(name=label_names(lab))[["layer", "head", "role", "direction", "name"]].drop_duplicates()
    rows = []
    for r in lab.itertuples():
        g = df[
            (df["layer"] == r.layer)
            & (df["head"] == r.head)
            & (df["role"] == r.role)
            & (df["direction"] == r.direction)
            & (df["specials"] == "exclude")
        ]
        for x in g.itertuples():
            rows.append(
                {
                    "head": f"L{r.layer}H{r.head}",
                    "role": r.name,
                    "direction": r.direction,
                    "source": x.source,
                    "subset": x.subset,
                    "score": fmt3(x.score),
                    "baseline": f"{fmt3(x.baseline)} ({x.baseline_kind})",
                    "n": x.n,
                    "label": "yes" if x.label else ("-" if x.family == "" else "no"),
                }
            )
    return pd.DataFrame(rows)


def power_table(df: pd.DataFrame, alpha: float) -> pd.DataFrame:
    d = detectable_effect(df, alpha=alpha)
    if d.empty:
        return d
    return d.assign(sd_diff=d["sd_diff"].map(fmt3), detectable_effect=d["detectable_effect"].map(fmt3))


# --------------------------------------------------------------------------------------------------
# Text and report.md


def fmt3(x) -> str:
    """Scores and accuracies: three decimals."""
    return fmt(x, 3, fixed=True)


def _labelled_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per labelled row of heads.csv, under its label name (the reading named) and with its
    real-text support (``real_text``: "templates only" where no real source backs it)."""
    lab = df[df["label"]].copy()
    lab["name"] = pd.Categorical(label_names(lab), [*LABEL_NAMES, *sorted(set(label_names(lab)) - set(LABEL_NAMES))])
    lab = lab.sort_values(["name", "score"], ascending=[True, False])
    return pd.DataFrame(
        {
            "layer": lab["layer"],
            "head": lab["head"],
            "role": lab["name"].astype(str),
            "direction": lab["direction"],
            "source": lab["source"] + [f" / {s}" if s != "all" else "" for s in lab["subset"]],
            "metric": lab["metric"],
            "score": lab["score"].map(fmt3),
            "95% CI": [f"[{fmt3(a)}, {fmt3(b)}]" for a, b in zip(lab["ci_low"], lab["ci_high"])],
            "baseline": [f"{fmt3(b)} ({k})" for b, k in zip(lab["baseline"], lab["baseline_kind"])],
            "null": lab["null_score"].map(fmt3),
            "p (Holm)": lab["p_adjusted"].map(lambda p: f"{p:.1e}"),
            "n": lab["n"],
            "real text": real_text(lab),
        }
    )


def _reported_roles(df: pd.DataFrame) -> tuple[str, ...]:
    """The label names the table measures (``LABEL_NAMES`` order: a reading the run did not score is
    left out), and ``noop_sink`` where the table has norm-weighted rows."""
    measured = set(label_names(df))
    names = tuple(n for n in LABEL_NAMES if n in measured)
    return (*names, "noop_sink") if has_norm_rows(df) else names


def role_layers(df: pd.DataFrame) -> pd.DataFrame:
    """Per label name (a relation's readings apart: "subject_verb (predictive)"): how many heads are
    labelled, in which layers, and their mean relative depth (layer / (n_layers - 1), 0 = first layer,
    1 = last)."""
    L = int(df["layer"].max()) + 1
    rows = []
    lab = labelled_roles(df)
    for role in _reported_roles(df):
        g = lab[lab["name"] == role].drop_duplicates(["layer", "head"])
        layers = sorted(g["layer"].astype(int))
        rows.append(
            {
                "role": role,
                "heads": len(g),
                "layers": ", ".join(
                    f"{l}x{layers.count(l)}" if layers.count(l) > 1 else str(l) for l in sorted(set(layers))
                ),
                "mean_depth": float(np.mean(layers) / max(L - 1, 1)) if layers else np.nan,
            }
        )
    return pd.DataFrame(rows)


def no_label_line(df: pd.DataFrame, name: str, alpha: float = 0.05) -> str:
    """A markdown list item for a label name with no labelled head, as a bounded negative
    (``no_label_bound``): "- `subject_verb (retrospective)`: no head above baseline + 0.130 on ..."."""
    role, _, reading = name.partition(" (")
    return f"- `{name}`: {no_label_bound(df, role, reading.rstrip(')') or '-', alpha)}."


def unlabelled_text(df: pd.DataFrame, layers: pd.DataFrame, alpha: float = 0.05) -> str:
    """The linguistic roles (in each reading) the run measured and labelled no head of, each as a
    bounded negative (``no_label_line``): not "no subject head" but "no head above baseline + d at
    80% power"."""
    names = set(layers.loc[layers["heads"] == 0, "role"])
    lines = [no_label_line(df, n, alpha) for n in LABEL_NAMES if n in names and n.split(" (")[0] in LINGUISTIC_ROLES]
    return ("No label, as a bounded negative (the power figure below):\n\n" + "\n".join(lines)) if lines else ""


def sensitivity_text(df: pd.DataFrame) -> str:
    """One paragraph under the map: how many primary roles change when a head's roles are ranked by
    their share of the way from the random-init model's score (not the baseline) to the ceiling."""
    changed = map_sensitivity(df)
    n_multi = changed.attrs.get("n_multi", 0)
    text = (
        "**A second normalisation.** The map ranks a head's roles by (score - baseline) / (ceiling - baseline), "
        "which puts an argmax accuracy and an attention mass on one axis. Ranked instead by (score - null) / "
        "(ceiling - null), from the same head's score in the randomly initialised model, "
        f"{len(changed)} of the {n_multi} heads with two or more roles change primary role"
    )
    if changed.empty:
        return text + "."
    moves = ", ".join(f"L{r.layer}H{r.head} {r.primary} -> {r.primary_null}" for r in changed.head(12).itertuples())
    more = f" and {len(changed) - 12} more" if len(changed) > 12 else ""
    return f"{text}: {moves}{more}."


def real_text_markdown(df: pd.DataFrame) -> str:
    """The "head vs strongest heuristic" section: per relation, reading and real source, on the
    real-text gate's subset (``REAL_TEXT_GATE``), the best head against the best heuristic."""
    t = heuristic_table(df)
    gate = ", ".join(f"`{r}`: {s}" for r, s in REAL_TEXT_GATE.items())
    text = (
        "Each real source on its own (templates and minimal pairs left out), on the items where the easy "
        f"heuristics fail ({gate}): the best head's score and interval against the strongest heuristic on "
        "the same items (nearest noun, nearest noun or pronoun, first noun, k-th noun, best offset). A "
        "label without a real source whose best head clears its heuristic says `templates only` in the "
        "labelled heads."
    )
    if t.empty:
        return text + (
            "\n\nThis table has no real-text rows on those subsets (no real source of the relation in "
            "the run, or a heads.csv written before labels v4)."
        )
    shown = pd.DataFrame(
        {
            "relation": t["relation"],
            "reading": t["reading"],
            "direction": t["direction"],
            "source": t["source"] + " / " + t["subset"],
            "best head": [f"L{l}H{h}" for l, h in zip(t["layer"], t["head"])],
            "score": t["score"].map(fmt3),
            "95% CI": [f"[{fmt3(a)}, {fmt3(b)}]" for a, b in zip(t["ci_low"], t["ci_high"])],
            "strongest heuristic": t["heuristic"],
            "its accuracy": t["heuristic_accuracy"].map(fmt3),
            "n": t["n"],
            "head beats it": t["beats"].map({True: "yes", False: "no"}),
        }
    )
    return text + "\n\n" + md_table(shown)


def layer_type_table(heads_map: pd.DataFrame, layer_types: Sequence[str]) -> pd.DataFrame:
    """Primary roles by layer type (Gemma 3's sliding-window and full layers): per role, how many
    heads of each type hold it (and the share of that type's heads), and Fisher's exact two-sided
    p-value for "the share differs between the types" (descriptive: not corrected across roles)."""
    from scipy.stats import fisher_exact

    kinds = sorted(set(layer_types), key=lambda k: (k != "sliding", k))
    types = heads_map["layer"].map(lambda l: layer_types[int(l)])
    totals = {k: int((types == k).sum()) for k in kinds}
    rows = []
    for role in heads_map["primary"].value_counts().index:
        has = heads_map["primary"] == role
        if not has.any():  # a role no head holds (the column's categories list every role)
            continue
        row: dict = {"primary role": role}
        for k in kinds:
            n = int((has & (types == k)).sum())
            row[f"{k} heads (of {totals[k]})"] = f"{n} ({n / max(totals[k], 1):.0%})"
        if len(kinds) == 2:
            a, b = kinds
            table = [[int((has & (types == k)).sum()), int((~has & (types == k)).sum())] for k in (a, b)]
            row["Fisher p"] = fmt(float(fisher_exact(table)[1]), 3)
        rows.append(row)
    return pd.DataFrame(rows)


def _layer_type_text(heads_map: pd.DataFrame, layer_types: Sequence[str]) -> str:
    full = [l for l, k in enumerate(layer_types) if k == "full"]
    return (
        f"Layers {', '.join(map(str, full))} attend to every earlier token; the others only to a sliding window of "
        "recent tokens. Each head's primary role (the map above), counted by the type of its layer; Fisher's "
        "exact test asks whether a role's share differs between the two types (uncorrected across roles; with "
        f"{sum(k == 'full' for k in layer_types) * int(heads_map['head'].max() + 1)} heads in full layers only "
        "large differences can reach p < 0.05).\n\n" + md_table(layer_type_table(heads_map, layer_types))
    )


def left_out_text(left_out, limit: int = 20) -> str:
    """A text file's lines that gave no item (``(line, sentence, why)``), as one phrase: "line 4
    ("Hi there.": 2 words, fewer than 3), ..."; past ``limit`` lines, how many more."""
    shown = [f'line {line} ("{sentence}": {why})' for line, sentence, why in list(left_out)[:limit]]
    more = len(left_out) - limit
    return "; ".join(shown) + (f"; and {more} more lines" if more > 0 else "")


def _data_text(attrs: dict) -> str:
    src = attrs.get("sources", {})
    parts = [
        f"{attrs.get('n_items', '?')} sentences ("
        + ", ".join(f"{k}: {v}" for k, v in attrs.get("relations", {}).items())
        + "), sources "
        + ", ".join(f"{k}: {v}" for k, v in src.items())
        + f"; {attrs.get('n_repeat', 0)} random token sequences of length {attrs.get('repeat_length', '?')} "
        "repeated once (duplicate-token and induction roles)."
    ]
    if "spacy-silver" in src or "spacy" in src:
        parts.append("Subject-verb arcs from spaCy (`en-core-web-sm`) are **silver**, parser output, not gold.")
    for path, f in attrs.get("user_files", {}).items():  # the user's own files, by name
        what = (
            "CoNLL-U `nsubj` arcs (gold as far as the treebank is)" if f["kind"] == "conllu" else "spaCy arcs (silver)"
        )
        if "n_lines" in f:  # a text file: its sentences in all, and those that gave no item
            parts.append(
                f"Your data: `{path}`, {f['sentences']} of its {f['n_lines']} sentences, {f['items']} subject-verb "
                f"items from {what}" + (f"; left out: {left_out_text(f['left_out'])}." if f["left_out"] else ".")
            )
            continue
        parts.append(f"Your data: `{path}`, {f['sentences']} sentences, {f['items']} subject-verb items from {what}.")
    if "winobias" in src:
        parts.append("WinoBias anaphora items are gold (hand-annotated).")
    losses = attrs.get("word_losses") or {}
    if losses.get("lost") or losses.get("changed"):
        parts.append(
            f"The tokenizer lost {losses['lost']} of {losses['words']} words to its unknown token and changed "
            f"{losses['changed']} by normalisation (or in part to the unknown token); their rows read less."
        )
    return " ".join(parts)


METHOD_TEXT = (
    "Word-level attention (Clark et al., 2019): attention *to* a word sums over its tokens, *from* "
    "a word averages over them. `subject_verb` and `anaphora` score accuracy (the row word's largest "
    "weight, self excluded, lands on the gold word) against the best of a fixed word offset, the first "
    "word and (anaphora) the nearest preceding candidate noun, each computed on the test's own items; "
    "the other roles score attention mass against a head attending uniformly to what it may see. "
    "Bidirectional models are scored in both directions (`direction` column); causal models only "
    "looking back."
)


@dataclass(frozen=True)
class Section:
    """One section of report.md, as data: a stable ``id`` (what a page places by), its heading
    (``None``: it continues the section before it, under no heading of its own) and its markdown."""

    id: str
    title: str | None
    markdown: str
    level: int = 2


_MARK = re.compile(r"(?m)^<!-- section: ([\w-]+) -->\n")


def sections_markdown(sections: Sequence[Section]) -> str:
    """report.md's text: each section behind a marker naming its id (an HTML comment, which no
    markdown viewer shows), so that ``read_sections`` gives the same sections back."""
    out = []
    for s in sections:
        head = f"{'#' * s.level} {s.title}\n\n" if s.title is not None else ""
        out.append(f"<!-- section: {s.id} -->\n{head}{s.markdown.strip()}\n")
    return "\n".join(out)


def read_sections(md: str) -> list[Section]:
    """The sections of a report.md that ``write_report`` wrote (the inverse of ``sections_markdown``).
    A report.md without markers (an older version's) comes back as one untitled ``method`` section."""
    parts = _MARK.split(md)
    if len(parts) == 1:
        return [Section("method", None, re.sub(r"(?m)^# .+$", "", md).strip())] if md.strip() else []
    out = []
    for sid, body in zip(parts[1::2], parts[2::2]):
        m = re.match(r"(#{1,6}) (.+)\n", body)
        title, level = (m.group(2).strip(), len(m.group(1))) if m else (None, 2)
        out.append(Section(sid, title, (body[m.end() :] if m else body).strip(), level))
    return out


def _write_figures(df: pd.DataFrame, heads_map: pd.DataFrame, out: Path, model: str, examples) -> dict:
    """role_map.png, heatmaps.png, lens.png (with norm rows) and one pattern_<role>.png per example."""
    figs = {
        "role_map.png": role_map_figure(
            heads_map, title=f"{model}: primary role per head (number: % of baseline-to-ceiling)"
        ),
        "heatmaps.png": heatmap_figure(headline(df), title=f"{model}: best score per head (red dot: labelled)"),
    }
    if has_norm_rows(df):
        figs["lens.png"] = lens_figure(df)
    for ex in examples:
        figs[f"pattern_{ex['role']}.png"] = pattern_figure(ex)
    return {name: atomic_write(out / name, png) for name, png in figs.items()}


def _method_markdown(df: pd.DataFrame, attrs: dict) -> str:
    n_tests = int((df["family"] != "").sum()) if "family" in df else int(df["p_value"].notna().sum())
    alpha = attrs.get("alpha", 0.05)
    n_families = len(set(df["family"].fillna("")) - {""}) if "family" in df else 0
    stats_text = STATS_TEXT.format(
        n_families=n_families,
        map_bound=(
            fmt(n_families * alpha, 2, True)
            if n_families * alpha < 1
            else f"{fmt(n_families * alpha, 2, True)}, i.e. no bound at all"
        ),
        margin=attrs.get("margin", "?"),
        mass_margin=attrs.get("mass_margin", "?"),
        n_tests=n_tests,
        alpha=alpha,
        n_boot=attrs.get("n_boot", "?"),
    )
    null_note = (
        ""
        if attrs.get("null_model")
        else " No randomly initialised null model was run for this model, so `null_score` is empty."
    )
    return "\n".join(
        [
            METHOD_TEXT + "\n",
            stats_text + null_note + "\n",
            CONVENTIONS_TEXT + "\n",
            POWER_TEXT + "\n",
            md_table(power_table(df, alpha)),
        ]
    )


def _example_markdown(examples, attrs: dict | None = None) -> str:
    """The figure examples (built-in sentences: each marks its role's gold word) and, after
    ``--examples FILE``, where the user's sentences are shown: the page only (they carry no gold word)."""
    md = []
    mine = (attrs or {}).get("example_sentences")
    if mine:
        md.append(
            f"The figures below are drawn on the built-in example sentences, each of which marks its role's gold "
            f"word; the {mine} sentences of `--examples` carry no gold word, so they are shown in report.html "
            "(every head's attention on them, in the head's detail), not here.\n"
        )
    for ex in examples:
        r, c = ex.get("row"), ex.get("col")
        w = float(np.asarray(ex["pattern"])[r, c]) if r is not None and c is not None else float("nan")
        md.append(
            f"**{ex['title']}** on {ex['sentence']!r}: the row of {ex['query_word']!r} puts "
            f"{fmt3(w)} on {ex['gold_word']!r} (token level)."
            + (" The upper triangle is empty: the model is causal." if ex.get("causal") else "")
            + "\n"
        )
        md.append(f"![{ex['role']}](pattern_{ex['role']}.png)\n")
    return "\n".join(md)


def report_sections(
    df: pd.DataFrame,
    examples: Sequence[dict] = (),
    title: str | None = None,
    command: str | None = None,
    heads_map: pd.DataFrame | None = None,
    extra: Sequence[Section] = (),
) -> list[Section]:
    """report.md as data: the sections ``write_report`` writes and the report page places by id
    (``intro``, ``map``, ``map-detail``, ``labelled``; the rest are data and method). ``heads_map``:
    the role map to show (default ``role_map(df)``; with another analysis' columns, e.g. retrieval);
    ``extra``: sections placed after the map (``analyses.report.compose`` composes both)."""
    attrs = dict(df.attrs)
    model = attrs.get("model", str(df["model"].iloc[0]) if len(df) else "model")
    heads_map = role_map(df) if heads_map is None else heads_map
    the_map = map_table(heads_map)
    L, H = attrs.get("n_layers", df["layer"].max() + 1), attrs.get("n_heads", df["head"].max() + 1)
    kind = "causal (a token sees only earlier tokens)" if attrs.get("causal") else "bidirectional"
    intro = f"Model `{model}`: {L} layers x {H} heads, {kind}. Seed {attrs.get('seed', '?')}." + (
        f" Command: `{command}`." if command else ""
    )
    layers = role_layers(df)
    lab = _labelled_table(df)
    n_unclassified = int((the_map["primary"] == "unclassified").sum())
    counts = the_map["primary"].value_counts()
    count_text = ", ".join(f"{r} {n}" for r, n in counts.items() if n)
    sink_text = f"Sink position: {attrs['sink']}. " if attrs.get("sink") else ""
    out = [
        Section("intro", title or f"Head roles of {model}", intro, level=1),
        Section("map", "The map: every head and its primary role", MAP_TEXT),
        Section(
            "map-detail",
            None,
            "![role map](role_map.png)\n\n"
            + f"{sink_text}Primary roles: {count_text}.\n\n"
            + md_table(the_map[the_map["primary"] != "unclassified"])
            + f"\n{n_unclassified} of {len(the_map)} heads earned no label.\n\n"
            + sensitivity_text(df),
        ),
    ]
    out += extra
    if attrs.get("layer_types"):
        text = _layer_type_text(role_map(df), attrs["layer_types"])
        out.append(Section("layer-types", "Sliding-window and full layers", text))
    if has_norm_rows(df):
        out.append(
            Section(
                "lens",
                "What heads move: attention weight against norm",
                LENS_TEXT
                + "\n\n![lens](lens.png)\n\n"
                + md_table(lens_table(df))
                + "\n\nThe sink by weight and by norm:\n\n"
                + md_table(lens_table(df, "attention_sink")),
            )
        )
    out += [
        Section(
            "sources",
            "Word relations by source",
            "Each head labelled `subject_verb` or `anaphora`, on every source and subset (`label`: yes / no "
            "for the label-carrying rows, - for descriptive ones).\n\n" + md_table(source_table(df)),
        ),
        Section("real-text", "Real text: head vs strongest heuristic", real_text_markdown(df)),
        Section("data", "Data", _data_text(attrs)),
        Section("method", "Method", _method_markdown(df, attrs)),
        Section(
            "layers",
            "Where the roles live",
            md_table(layers.assign(mean_depth=layers["mean_depth"].map(fmt3)))
            + "\n\n"
            + unlabelled_text(df, layers, attrs.get("alpha", 0.05)),
        ),
        Section("heatmaps", "Heatmaps", "![heatmaps](heatmaps.png)"),
        Section("labelled", f"Labelled heads ({len(lab)} labels)", md_table(lab)),
        Section("examples", "Example patterns", _example_markdown(examples, attrs)),
        Section(
            "files",
            "Files",
            "`heads.csv` holds one row per (layer, head, role, direction, source, subset, specials, "
            "weighting) with columns " + ", ".join(f"`{c}`" for c in COLUMNS) + ".",
        ),
    ]
    return out


def write_report(
    df: pd.DataFrame,
    out_dir: str | Path,
    examples: Sequence[dict] = (),
    title: str | None = None,
    command: str | None = None,
    heads_map: pd.DataFrame | None = None,
    extra: Sequence[Section] = (),
) -> dict:
    """Write ``heads.csv``, ``report.md`` (``report_sections``) and PNG figures into ``out_dir``
    (``analyses.report.page`` renders ``report.html`` from them). ``examples``: the figure examples
    of ``analyses.heads.example_patterns``; ``heads_map``, ``extra``: as ``report_sections`` takes them
    (the map figure draws the given map). Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = df.attrs.get("model", str(df["model"].iloc[0]) if len(df) else "model")
    paths = {"csv": write_csv(df, out / "heads.csv")}
    heads_map = role_map(df) if heads_map is None else heads_map
    paths.update(_write_figures(df, heads_map, out, model, examples))
    text = sections_markdown(report_sections(df, examples, title, command, heads_map, extra))
    paths["report.md"] = atomic_write(out / "report.md", text)
    return paths
