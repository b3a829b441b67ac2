"""The head catalogue (``interp catalogue``, ``analyses.catalogue``) on the model's page and in the summary.

A model folder that holds ``catalogue.csv`` (and, where written with it, ``catalogue_tasks.csv``,
``catalogue.md`` and ``catalogue.json``) is read by ``read_model_catalogue``; a folder without one
gives None, and the page and the summary fall back to ``validation/`` as before. What this module
makes of it:

* ``page_catalogue``: what the page's explorer embeds: the tasks, the verdict colours, per head its
  rows (effect and interval, minimum effect, rank, EAP-IG and its rank, site, powered verdict,
  verdict) and its labelled roles (score, heuristic, real-text support), so that the head's panel
  shows the pattern and the causal evidence side by side and the map can be coloured by verdict;
* ``catalogue_markdown``: the page's "Catalogue" section: the tasks, the verdict counts per task,
  the mechanisms and the disagreements;
* ``role_verdict_counts`` / ``role_verdict_table``: head-task rows per labelled role (each name in
  the ``roles`` column, plus ``NO_LABEL``) and verdict, the comparison across models of summary.md;
* ``catalogue_provenance``: the catalogue records the SHA-256 of the heads.csv it read
  (``catalogue.json``'s ``labels_sha256``); a warning when that is not the current heads.csv.

It reads the catalogue's files and never writes them (``analyses.catalogue`` does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses.catalogue import NO_TASK, disagreements, read_catalogue, verdict_counts
from analyses.heads.roles import MAP_ROLES
from interp.display import md_table
from interp.io import sha256_file

__all__ = [
    "ModelCatalogue",
    "VERDICT_COLOURS",
    "NO_ROW_COLOUR",
    "NO_LABEL",
    "ROLE_VERDICTS",
    "read_model_catalogue",
    "catalogue_provenance",
    "label_records",
    "page_catalogue",
    "catalogue_markdown",
    "labels_verdicts",
    "role_verdict_counts",
    "role_verdict_table",
]

# one colour per verdict (colour-blind-distinguishable hues for the four a reader looks for, pale
# tones for the rest), and the grey of a head that has no row for the task
VERDICT_COLOURS = {
    "mechanism": "#1a7f37",
    "pattern, no effect": "#e66100",
    "inconclusive": "#f6d32d",
    "effect, no named pattern": "#813d9c",
    "idle": "#c6dbef",
    "quiet": "#f4ecd8",
    "no causal test": "#4fa3a5",
}
NO_ROW_COLOUR = "#9a9a9a"
NO_LABEL = "(no label)"
# the verdicts the role comparison counts: those of a labelled head, and a head's effect without one
ROLE_VERDICTS = ("mechanism", "pattern, no effect", "effect, no named pattern", "inconclusive", "no causal test")
TASK_NAMES = {NO_TASK: "- (roles no solved task tests)"}


@dataclass
class ModelCatalogue:
    """One model folder's catalogue: ``table`` (catalogue.csv, ``analyses.catalogue.COLUMNS``),
    ``tasks`` (catalogue_tasks.csv, None where absent), ``markdown`` (catalogue.md, None where
    absent) and ``info`` (catalogue.json, None where absent or unreadable)."""

    table: pd.DataFrame
    tasks: pd.DataFrame | None = None
    markdown: str | None = None
    info: dict | None = field(default=None)


def read_model_catalogue(model_dir: str | Path) -> ModelCatalogue | None:
    """The catalogue ``interp catalogue --out model_dir`` wrote, or None where the folder has no
    catalogue.csv. A catalogue.csv without the join keys is refused (``read_catalogue``'s error)."""
    d = Path(model_dir)
    if not (d / "catalogue.csv").is_file():
        return None
    table = read_catalogue(d / "catalogue.csv")
    tasks = pd.read_csv(d / "catalogue_tasks.csv") if (d / "catalogue_tasks.csv").is_file() else None
    md = (d / "catalogue.md").read_text(encoding="utf-8") if (d / "catalogue.md").is_file() else None
    try:
        info = json.loads((d / "catalogue.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        info = None
    return ModelCatalogue(table, tasks, md, info if isinstance(info, dict) else None)


def catalogue_provenance(model_dir: str | Path) -> str | None:
    """None when ``model_dir``'s catalogue was computed from the current ``model_dir/heads.csv``
    (``catalogue.json``'s ``labels_sha256`` is its SHA-256); otherwise one sentence saying why it
    may not be (a markdown warning, as ``summary.validation_provenance`` writes for a validation)."""
    d = Path(model_dir)
    record = d / "catalogue.json"
    try:
        info = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (
            "**Cannot be checked**: this catalogue does not record which heads.csv it read (no "
            "`catalogue.json`); rerun `interp catalogue` to be sure."
        )
    except ValueError:
        return f"**Cannot be checked**: `{record}` is not JSON; rerun `interp catalogue`."
    if not isinstance(info, dict):
        return f"**Cannot be checked**: `{record}` is not a JSON object; rerun `interp catalogue`."
    used = info.get("labels_sha256")
    if used is None:
        return (
            "**Cannot be checked**: this catalogue does not record which heads.csv it read (its "
            "`catalogue.json` has no `labels_sha256`: an older version wrote it); rerun `interp catalogue` to be sure."
        )
    current = sha256_file(d / "heads.csv")
    if used != current:
        return (
            f"**Out of date**: the catalogue read a heads.csv with sha256 `{str(used)[:12]}`, not the current one "
            f"(`{current[:12]}`): `interp probe` was rerun since; rerun `interp catalogue`."
        )
    return None


# -- what the page embeds ---------------------------------------------------------------------------


def _num(x, digits: int = 4):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if not math.isfinite(v) else round(v, digits)


def _text(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def label_records(df: pd.DataFrame) -> dict[str, list[dict]]:
    """Per head ("layer,head"): its labelled roles under the map's names, each with its best score,
    baseline, strongest heuristic and real-text support (the rows the catalogue's pattern side
    reads: ``analyses.catalogue.pattern_side``), the highest score first."""
    from analyses.heads.labels import labelled_roles
    from analyses.heads.summaries import real_text

    lab = labelled_roles(df)
    if lab.empty:
        return {}
    lab = lab.assign(real_text=real_text(lab))
    if "heuristic" not in lab:
        lab["heuristic"] = "-"
    lab = lab.sort_values("score", ascending=False, kind="stable").drop_duplicates(["layer", "head", "name"])
    out: dict[str, list[dict]] = {}
    for r in lab.itertuples():
        out.setdefault(f"{int(r.layer)},{int(r.head)}", []).append(
            {
                "role": str(r.name),
                "score": _num(r.score),
                "baseline": _num(r.baseline),
                "heuristic": _text(r.heuristic) or "-",
                "real_text": _text(r.real_text) or "-",
            }
        )
    return out


ROW_NUMBERS = ("effect", "ci_low", "ci_high", "min_effect", "rank", "eap_ig", "eap_ig_rank")
ROW_NUMBERS += ("powered_effect", "powered_group_effect")
ROW_TEXTS = ("task", "roles", "site", "powered_verdict", "powered_group_verdict", "state", "verdict", "reason")


def page_catalogue(cat: ModelCatalogue, df: pd.DataFrame | None = None) -> dict:
    """The catalogue as the page's explorer embeds it (JSON-ready): ``tasks`` (in the catalogue's
    order, the no-task rows last; ``task_names`` the selector's text), ``colours`` (per verdict) and
    ``no_row`` (a head with no row for the task), ``heads`` (per "layer,head": its rows, one per
    task) and ``labels`` (per head: ``label_records`` of the heads table ``df``)."""
    t = cat.table
    tasks = [x for x in dict.fromkeys(t["task"].astype(str)) if x != NO_TASK]
    if (t["task"] == NO_TASK).any():
        tasks.append(NO_TASK)
    heads: dict[str, list[dict]] = {}
    for r in t.to_dict("records"):
        rec = {k: _text(r.get(k)) for k in ROW_TEXTS}
        rec.update({k: _num(r.get(k)) for k in ROW_NUMBERS})
        heads.setdefault(f"{int(r['layer'])},{int(r['head'])}", []).append(rec)
    return {
        "tasks": tasks,
        "task_names": {x: TASK_NAMES.get(x, x) for x in tasks},
        "colours": dict(VERDICT_COLOURS),
        "no_row": NO_ROW_COLOUR,
        "heads": heads,
        "labels": label_records(df) if df is not None else {},
    }


def labels_verdicts(lab: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """Per labelled row of ``lab`` (``analyses.heads.labels.labelled_roles``, its ``name``): the
    catalogue's verdicts on that head for the tasks that test that role ("ioi: mechanism;
    induction: quiet"), or "not in the catalogue" where no row names it (the sink labels, which no
    task tests)."""
    found: dict[tuple[int, int, str], list[str]] = {}
    for r in table.itertuples():
        for role in str(r.roles).split("; "):
            if role:
                found.setdefault((int(r.layer), int(r.head), role), []).append(
                    str(r.verdict) if r.task == NO_TASK else f"{r.task}: {r.verdict}"
                )
    return [
        "; ".join(found.get((int(l), int(h), str(n)), [])) or "not in the catalogue"
        for l, h, n in zip(lab["layer"], lab["head"], lab["name"])
    ]


# -- markdown ---------------------------------------------------------------------------------------


def _f(x, nd: int = 3) -> str:
    v = _num(x, 12)
    return "" if v is None else f"{v:.{nd}f}"


def _interval(r) -> str:
    return f"{_f(r.get('effect'))} [{_f(r.get('ci_low'))}, {_f(r.get('ci_high'))}]" if _f(r.get("effect")) else ""


def _head_rows(d: pd.DataFrame, limit: int) -> str:
    rows = []
    for r in d.head(limit).to_dict("records"):
        eap = f"{_f(r.get('eap_ig'))} ({_f(r.get('eap_ig_rank'), 0)})" if _f(r.get("eap_ig")) else ""
        rows.append(
            {
                "task": _text(r["task"]),
                "head": f"L{int(r['layer'])}H{int(r['head'])}",
                "roles": _text(r.get("roles")) or "-",
                "other labels": _text(r.get("other_roles")) or "-",
                "site": _text(r.get("site")),
                "effect [95% CI]": _interval(r),
                "min effect": _f(r.get("min_effect")),
                "rank": _f(r.get("rank"), 0),
                "EAP-IG (rank)": eap,
                "verdict": _text(r["verdict"]),
            }
        )
    more = f"\n\n({len(d) - limit} more in catalogue.csv)" if len(d) > limit else ""
    return md_table(pd.DataFrame(rows)) + more


def catalogue_markdown(cat: ModelCatalogue, limit: int = 40) -> str:
    """The page's "Catalogue" section (markdown, headings from ``###``): the tasks (accuracy, pairs,
    minimum effect, the effect detectable at 80% power), the verdict counts per task, the mechanisms
    and the disagreements (pattern without effect, effect without pattern), at most ``limit`` rows
    of each list."""
    t = cat.table
    lines = [
        "One verdict per head and task (`interp catalogue`, docs/catalogue.md): the probe's labelled roles that a "
        "task needs joined with the head's effect when it is patched on that task. Colour the map by verdict "
        "above to see them on the heads; click a head for its rows.",
        "",
        "### Tasks",
        "",
    ]
    if cat.tasks is not None and len(cat.tasks):
        tk = cat.tasks
        rows = [
            {
                "task": _text(r.get("task")),
                "metric": _text(r.get("metric")),
                "accuracy": _f(r.get("accuracy"), 2),
                "solved": "yes" if str(r.get("solved")).lower() in ("true", "1") else "no",
                "pairs used": _f(r.get("n_used"), 0),
                "min effect": _f(r.get("min_effect")),
                "detectable (80%)": _f(r.get("detectable")),
                "note": _text(r.get("note")),
            }
            for r in tk.to_dict("records")
        ]
        lines += [md_table(pd.DataFrame(rows)), ""]
    else:
        lines += ["(no catalogue_tasks.csv in this folder: the tasks' accuracy and power are not shown)", ""]
    counts = verdict_counts(t).reset_index()
    lines += ["### Verdicts per task", "", "Heads per task and verdict.", "", md_table(counts), ""]
    mech = t[t["verdict"] == "mechanism"].sort_values("effect", ascending=False)
    lines += [f"### Mechanisms ({len(mech)})", ""]
    none = "No head has both the pattern a task needs and an effect on it."
    lines += [_head_rows(mech, limit) if len(mech) else none]
    dis = disagreements(t)
    lines += [
        "",
        f"### Disagreements ({len(dis)})",
        "",
        "`pattern, no effect`: a label whose head the task does not need (the interval lies inside "
        "+-min effect); `effect, no named pattern`: a head the task needs that no label for the task explains.",
        "",
        _head_rows(dis, limit) if len(dis) else "None.",
    ]
    return "\n".join(lines) + "\n"


# -- the comparison across models -------------------------------------------------------------------


def role_verdict_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Head-task rows per role (index: each label name in the ``roles`` column, the labels a task
    tests or, on a no-task row, no solved task does; ``NO_LABEL`` for rows without one) and verdict
    (columns: ``ROLE_VERDICTS``). A row with two roles counts under each. Roles in the map's order
    (``MAP_ROLES``), others after them by name, ``NO_LABEL`` last."""
    roles = table["roles"].fillna("").astype(str).str.split("; ")
    long = pd.DataFrame({"role": roles, "verdict": table["verdict"].astype(str)}).explode("role")
    long["role"] = long["role"].replace("", NO_LABEL)
    counts = long.groupby(["role", "verdict"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=list(ROLE_VERDICTS), fill_value=0).astype(int)
    named = [r for r in counts.index if r != NO_LABEL]
    order = [r for r in MAP_ROLES if r in named] + sorted(r for r in named if r not in MAP_ROLES)
    order += [NO_LABEL]
    counts = counts.reindex(order, fill_value=0)
    counts.index.name = "role"
    return counts


def role_verdict_table(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """summary.md's comparison: one row per role found in any model's catalogue (``role_verdict_counts``'
    order, ``NO_LABEL`` last), one column per model with its counts as "mechanism / pattern, no
    effect / effect, no named pattern / inconclusive / no causal test"; "-" where that model's
    catalogue names no head with the role."""
    if not tables:
        raise ValueError("role_verdict_table needs at least one catalogue")
    per = {name: role_verdict_counts(t) for name, t in tables.items()}
    named = {r for c in per.values() for r in c.index if r != NO_LABEL}
    order = [r for r in MAP_ROLES if r in named] + sorted(r for r in named if r not in MAP_ROLES) + [NO_LABEL]
    rows = []
    for role in order:
        row = {"role": role}
        for name, c in per.items():
            present = role in c.index and (role == NO_LABEL or c.loc[role].sum() > 0)
            row[name] = " / ".join(str(int(v)) for v in c.loc[role]) if present else "-"
        rows.append(row)
    return pd.DataFrame(rows)
