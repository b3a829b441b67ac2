"""A head catalogue by hand, over the planted heads table of ``tests.analyses.heads.planted_tables``
(two layers x three heads of a causal model), for the page's and the summary's readers.

Each head's effect interval is planted and its state and verdict come from the catalogue's own rule
(``analyses.catalogue.causal_state``, ``decide``), its roles per task from ``tasks_of``, so that a
change of the rule shows here as it would in a real run. With ``min_effect`` 0.2:

- subject_verb: L0H0 (subject_verb (predictive)) 0.5 [0.3, 0.7]: mechanism; L1H1 (the same label,
  and the retrospective one no task tests) 0.0 [-0.1, 0.1]: pattern, no effect; L1H0 (ioi, not this
  task's) 0.6 [0.4, 0.8]: effect, no named pattern; L0H2 (a no-op sink): idle; the others quiet;
- ioi: L1H0 (ioi (predictive)) 0.1 [-0.3, 0.5]: inconclusive; the others quiet or idle;
- "-": L1H1's subject_verb (retrospective): no causal test (the only head with a row there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from analyses import catalogue as C
from interp.io import sha256_file

MIN_EFFECT = 0.2
NO_CAUSAL = (1, 1)
# (task, layer, head) -> (effect, ci_low, ci_high)
EFFECTS = {
    ("subject_verb", 0, 0): (0.5, 0.3, 0.7),
    ("subject_verb", 1, 1): (0.0, -0.1, 0.1),
    ("subject_verb", 1, 0): (0.6, 0.4, 0.8),
    ("ioi", 1, 0): (0.1, -0.3, 0.5),
}
QUIET = (0.05, -0.05, 0.15)
# the planted table's labels under the map's names (labelled_roles' ``name``)
LABELS = {
    (0, 0): ["subject_verb (predictive)"],
    (1, 1): ["subject_verb (retrospective)", "subject_verb (predictive)"],
    (1, 0): ["ioi (predictive)"],
    (0, 1): ["attention_sink"],
    (0, 2): ["noop_sink"],
}
PRIMARY = {(0, 1): "sink writer", (0, 2): "no-op sink"}


def planted_catalogue(model: str = "planted-v4", tasks: tuple[str, ...] = ("subject_verb", "ioi")):
    """(catalogue.csv's table, catalogue_tasks.csv's table) of the planted heads."""
    rows = []
    for task in tasks:
        for layer in range(2):
            for head in range(3):
                names = LABELS.get((layer, head), [])
                mine = [r for r in names if task in C.tasks_of(r)]
                effect, lo, hi = EFFECTS.get((task, layer, head), QUIET)
                state, sign = C.causal_state(effect, lo, hi, MIN_EFFECT)
                primary = PRIMARY.get((layer, head), names[0] if names else "unclassified")
                verdict, reason = C.decide(bool(mine), state, primary)
                rows.append(
                    dict(
                        model=model, layer=layer, head=head, task=task, metric="logit_diff", roles="; ".join(mine),
                        other_roles="; ".join(r for r in names if r not in mine), primary=primary,
                        pattern_score=0.8 if mine else math.nan, heuristic="-" if mine else "",
                        real_text="templates only" if mine else "", site="answer position", effect=effect,
                        ci_low=lo, ci_high=hi, n_pairs=40, min_effect=MIN_EFFECT, normalised=effect / 2,
                        rank=math.nan, effect_answer=effect, eap_ig=effect * 0.9, eap_ig_rank=math.nan,
                        powered_effect=math.nan, powered_verdict="not run", retrieval=math.nan,
                        sink_share=math.nan, state=state, sign=sign, verdict=verdict, reason=reason,
                    )
                )  # fmt: skip
    table = pd.DataFrame(rows)
    for task in tasks:
        at = table["task"] == task
        table.loc[at, "rank"] = table.loc[at, "effect"].rank(ascending=False, method="min")
        table.loc[at, "eap_ig_rank"] = table.loc[at, "eap_ig"].rank(ascending=False, method="min")
    table = pd.concat(
        [
            table,
            pd.DataFrame(
                [
                    dict(
                        model=model, layer=1, head=1, task=C.NO_TASK, metric="", roles="subject_verb (retrospective)",
                        other_roles="subject_verb (predictive)", primary="subject_verb (retrospective)",
                        pattern_score=0.95, heuristic="-", real_text="supported (spacy-silver)", site="",
                        powered_verdict="not run", state="not measured", sign=0, verdict="no causal test",
                        reason="subject_verb (retrospective): no task tests it",
                    )
                ]
            ),
        ],
        ignore_index=True,
    ).reindex(columns=C.COLUMNS)  # fmt: skip
    task_rows = [
        dict(
            task=t, metric="logit_diff", n_generated=80, accuracy=0.9, n_solved=72, n_used=40, solved=True,
            clean=2.0, corrupted=-1.0, min_effect=MIN_EFFECT, sd=0.3, detectable=0.35, note="solved",
        )
        for t in tasks
    ]  # fmt: skip
    return table, pd.DataFrame(task_rows).reindex(columns=C.TASK_COLUMNS)


def write_catalogue(folder: Path, table: pd.DataFrame, tasks: pd.DataFrame, sha: str | None = "current") -> Path:
    """The four files ``interp catalogue`` writes, into ``folder`` (which holds the heads.csv it
    read). ``sha``: "current" records the SHA-256 of ``folder/heads.csv``, None records none (an
    older catalogue), another string records that."""
    folder = Path(folder)
    table.to_csv(folder / "catalogue.csv", index=False)
    tasks.to_csv(folder / "catalogue_tasks.csv", index=False)
    info = {"analysis": "catalogue", "model": str(table["model"].iloc[0]), "ran": {"powered": False}}
    (folder / "catalogue.md").write_text(C.markdown(table, tasks, info))
    if sha is not None:
        info["labels_sha256"] = sha256_file(folder / "heads.csv") if sha == "current" else sha
    (folder / "catalogue.json").write_text(json.dumps(info))
    return folder
