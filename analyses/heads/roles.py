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
    "BROAD_REFERENCE",
    "SPECIALS",
    "WEIGHTINGS",
    "NORM_LABEL_ROLES",
    "MAP_ROLES",
    "SINK_ROLES",
    "IDLE",
    "SINK_WRITER",
    "NOOP_IDLE",
    "IDLE_PRIMARIES",
    "LABEL_NAMES",
    "MAP_PRIMARY",
    "CEILINGS",
    "SINK_EXCLUDED_ROLES",
    "RETRIEVAL_THRESHOLD",
    "READINGS",
    "READING_ROLES",
    "PREDICTIVE",
    "reading_of",
    "with_reading",
    "with_real_text",
    "decision_low",
    "DESCRIPTIVE_ROLES",
    "label_name",
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
    "learned_sink",
    "sep_eos",
    "punctuation",
    "broad",
    "induction",
    "duplicate_token",
    "rhyme",
    "line_structure",
    "ioi",
)
LINGUISTIC_ROLES = ("subject_verb", "anaphora", "rhyme", "line_structure", "ioi")
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
    "heuristic", "heuristic_baseline", "gates", "n_clusters", "reading", "real_text", "gate_low",
]  # fmt: skip
# gate_low  the lower end of the 95% cluster-robust t interval of the score (score - t(0.975, clusters - 1)
#           x the Liang-Zeger standard error of score - baseline; for accuracies also at most the Wilson
#           lower end at the number of clusters): what every decision reads (the label rule's interval
#           above the baseline and the random-init null, the gates, real-text support, the heuristic
#           table). ci_low / ci_high are the cluster bootstrap's percentile interval (n_boot
#           replicates), shown beside the score. A table written before the column decides on ci_low
#           (``decision_low``).
# real_text a subject-verb or anaphora label row's real-text status (labels v4): "supported (<sources>)"
#           where the same head, direction and weighting clears the best heuristic (ci_low > its
#           baseline) on a real source's gate subset (design.REAL_TEXT_GATE: subject-verb's items with
#           a noun between subject and verb at distance 3+, anaphora's antecedent=other), "templates
#           only" where the run has real text of the relation and no source supports it (the label
#           stands on its gates but is not a real-text label), "-" elsewhere. A heads.csv written
#           before the column reads as "-" (``with_real_text``).
# reading   where a relation is read (labels v4): "retrospective" on the query word's own row (Clark et
#           al. 2019, the verb's row -> its subject: the only reading of an encoder), "predictive" on
#           the row of the token whose next-token prediction is the query word (a causal model's last
#           token before the verb -> the subject: where a head can change that prediction); "-" for
#           the token-level roles. A heads.csv written before the column reads as retrospective.
# heuristic  the best noun heuristic (relation rows looking back: "nearest noun", "first noun",
#           "noun k"), heuristic_baseline its accuracy on the row's items; gates: False where a
#           label-carrying row fails labels.LABEL_GATES (ci_low <= the best heuristic on a subset).
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
READINGS = ("retrospective", "predictive")
# the roles read in both readings on a causal model (ioi: predictive only), and the direction name of
# each predictive reading (row: the last token before the query word; gold: the target word). IOI's
# query word is the clean prompt's answer (the indirect object named again), its row the prompt's
# final token, its target the indirect object's first mention.
READING_ROLES = ("subject_verb", "anaphora", "ioi")
PREDICTIVE = {
    "subject_verb": "pre-verb->subject",
    "anaphora": "pre-pronoun->antecedent",
    "ioi": "final->indirect_object",
}
SPECIALS = ("exclude", "include")  # the first is the convention that carries labels
WEIGHTINGS = ("attention", "norm")
# the boundary roles, whose norm-weighted rows carry a label too (family "<role>@norm"): a head labelled
# by weight only is a no-op sink in the map. attention_sink is one of them (Kobayashi et al. 2020's
# canonical case: [CLS] takes much weight and moves little, MiniLM L2H1 0.441 by weight, 0.037 by norm)
NORM_LABEL_ROLES = ("attention_sink", "delimiter", "punctuation", "sep_eos")
# the sink layer of the map: never a head's primary role (what it does when it is not idling); a
# head whose only roles are these idles: a SINK_WRITER where its attention_sink label is norm-confirmed
# (it writes what it reads from the sink), a NOOP_IDLE where its sink labels are by weight only
# (noop_sink: it moves nothing from there), IDLE where the table has no norm rows to tell the two apart
# learned_sink: a model with learned sink logits (gpt-oss, Config.attn_sinks) only, the part of each
# softmax row its sink logit takes (1 - the pattern's row sum); part of the sink layer
SINK_ROLES = ("attention_sink", "noop_sink", "learned_sink")
SINK_WRITER = "sink writer"
NOOP_IDLE = "no-op sink"
IDLE = "idle (sink)"
IDLE_PRIMARIES = (SINK_WRITER, NOOP_IDLE, IDLE)
# the names labels are shown under (``label_name``), in role order: a role read both ways has one
# name per reading ("subject_verb (retrospective)", "subject_verb (predictive)"), ioi its predictive one
_ROLE_READINGS = {r: ("predictive",) if r == "ioi" else READINGS for r in READING_ROLES}
LABEL_NAMES = tuple(n for r in ROLES for n in ([f"{r} ({x})" for x in _ROLE_READINGS.get(r, ())] or [r]))
MAP_ROLES = (*LABEL_NAMES, "noop_sink")  # the labels' names: noop_sink = a boundary label by weight only
# the map's primary roles, in legend order: every label name but the sink layer's, then the idle kinds
MAP_PRIMARY = (*(n for n in MAP_ROLES if n not in SINK_ROLES), *IDLE_PRIMARIES, "unclassified")
SET_ROLES = ("attention_sink", "sep_eos", "punctuation", "delimiter")
# set roles scored on the sink-excluded row, renormalised (the sink position is neither a key nor a
# row of theirs): a delimiter head attends to delimiters when it is not attending to the sink
SINK_EXCLUDED_ROLES = ("delimiter",)
OFFSET_ROLES = {"previous_token": -1, "self_token": 0, "next_token": 1}
# broad: a head's rows are more even than a random distribution over the same keys, drawn uniformly
# from the simplex (Dirichlet(1)), whose expected normalised entropy (psi(n+1) - psi(2)) / ln n the
# baseline computes per row (scoring.broad_reference): 0.72 at 2 keys, 0.84 at 10, 0.87 at 20
BROAD_REFERENCE = "random row (Dirichlet 1)"
# roles that describe a pattern's shape rather than a learned behaviour: tested against their reference
# (above), but with no margin and no random-init null, because a randomly initialised model's heads have
# that shape too (near-uniform rows: broad's median null_score is 0.998 on MiniLM, 0.996 on SmolLM2 and
# 0.89 on Gemma 3, against references of 0.82-0.87). The page says so beside the role; heads.csv still
# records the null's score.
DESCRIPTIVE_ROLES = ("broad",)
# the largest score each role's metric can take on the probe's inputs, for the map's ceiling-normalised
# effect (score - baseline) / (ceiling - baseline): TransformerLens's "mul" detection score divides by
# every row, and on a random sequence repeated once only the second half's rows have a target
CEILINGS = {"induction": 0.5, "duplicate_token": 0.5}  # every other role: 1.0
# retrieval heads (Wu et al. 2024; ``analyses.longctx.retrieval``, ``interp retrieval``): not a probe
# role but a long-context score; a head is a retrieval head when its score exceeds this, Wu et al.'s
# threshold. The map marks such heads; the score is a column of the map and a colour of the page.
RETRIEVAL_THRESHOLD = 0.1


def reading_of(role: str, direction: str) -> str:
    """The reading of a heads.csv row from its role and direction: "predictive" for the directions of
    ``PREDICTIVE``, "retrospective" for every other word-relation direction (``RELATIONS``), "-" for
    the token-level roles. What a table written before the ``reading`` column reads as."""
    if direction in PREDICTIVE.values():
        return "predictive"
    return "retrospective" if role in RELATIONS or role in PREDICTIVE else "-"


def with_reading(df):  # noqa: ANN001, ANN201
    """``df`` (a heads.csv table, or any table with ``role`` and ``direction``) with a ``reading``
    column: kept where it is there, else derived by ``reading_of`` (old tables: retrospective)."""
    if "reading" in df.columns:
        return df
    out = df.copy()
    out["reading"] = [reading_of(r, d) for r, d in zip(out["role"], out["direction"])]
    return out


def with_real_text(df):  # noqa: ANN001, ANN201
    """``df`` (a heads.csv table) with a ``real_text`` column: kept where it is there, else "-" on
    every row (a table written before labels v4 says nothing about real-text support)."""
    if "real_text" in df.columns:
        return df
    out = df.copy()
    out["real_text"] = "-"
    return out


def decision_low(df):  # noqa: ANN001, ANN201
    """The lower interval end a label, gate or real-text decision reads: ``gate_low`` (the clustered t
    interval's, labels v4) where the table has it, else ``ci_low`` (a heads.csv written before it)."""
    if "gate_low" in df.columns:
        return df["gate_low"].where(df["gate_low"].notna(), df["ci_low"])
    return df["ci_low"]


def label_name(role: str, reading: str) -> str:
    """The name a label is shown under: "subject_verb (predictive)", "anaphora (retrospective)" for the
    roles read both ways (``READING_ROLES``), the role's own name for every other role."""
    return f"{role} ({reading})" if role in READING_ROLES and reading in READINGS else role
