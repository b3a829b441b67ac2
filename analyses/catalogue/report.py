"""Writing the catalogue: ``OUTPUTS`` as one output set.

* ``catalogue.csv``: one row per head and task (``run.COLUMNS``, long format with the join keys);
* ``catalogue_tasks.csv``: one row per task: accuracy, pairs used, the minimum effect and the
  power statement (``detectable``: the smallest true effect whose interval clears the minimum
  effect with 80% probability, at the median head's spread over pairs);
* ``catalogue.md``: the tasks, the verdict counts per task, the mechanisms and the disagreements
  (pattern without effect, effect without pattern);
* ``catalogue.json``: the run's ``info``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from analyses.catalogue.verdicts import NO_TASK, VERDICTS
from interp.io import write_set

__all__ = ["OUTPUTS", "write", "verdict_counts", "disagreements", "markdown", "read_catalogue"]

OUTPUTS = ("catalogue.csv", "catalogue_tasks.csv", "catalogue.md", "catalogue.json")


def read_catalogue(path: str | Path) -> pd.DataFrame:
    """A catalogue.csv (or the folder holding one), with the empty strings of text columns kept."""
    path = Path(path)
    if path.is_dir():
        path = path / "catalogue.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no catalogue here; run `interp catalogue --model M --out DIR` first")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""], low_memory=False)
    texts = ("task", "roles", "other_roles", "primary", "heuristic", "real_text", "site", "powered_verdict")
    for col in (*texts, "powered_group_verdict", "sink_by_length"):
        if col in df:
            df[col] = df[col].fillna("").astype(str)
    missing = {"layer", "head", "task", "verdict"} - set(df.columns)
    if missing:
        raise ValueError(f"{path} lacks columns {sorted(missing)}: not a catalogue.csv")
    return df


def verdict_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Heads per task (rows) and verdict (columns, ``VERDICTS`` order)."""
    counts = table.groupby(["task", "verdict"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[v for v in VERDICTS if v in counts.columns])
    order = [t for t in dict.fromkeys(table["task"]) if t in counts.index]
    return counts.loc[order]


def disagreements(table: pd.DataFrame) -> pd.DataFrame:
    """The rows where pattern and effect disagree: ``pattern, no effect`` and ``effect, no named
    pattern``, the largest effects first."""
    d = table[table["verdict"].isin(["pattern, no effect", "effect, no named pattern"])]
    return (
        d.assign(_abs=d["effect"].abs()).sort_values(["verdict", "_abs"], ascending=[False, False]).drop(columns="_abs")
    )


def _f(x, nd: int = 3) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _head(r) -> str:
    return f"L{int(r.layer)}H{int(r.head)}"


def _others(text: str) -> str:
    """A row's other labels without ``attention_sink``: nearly every head of a causal LM carries it (the
    sink is the background every head idles on; the csv keeps it), so it would fill every row."""
    kept = [r for r in str(text).split("; ") if r and r != "attention_sink"]
    return "; ".join(kept) or "-"


def _rows(d: pd.DataFrame, limit: int, rank: str = "rank") -> list[str]:
    out = [
        f"| task | head | roles | other labels (sink aside) | site | effect [95% CI] | min effect | {rank} "
        "| EAP-IG (rank) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in d.head(limit).itertuples():
        ci = f"{_f(r.effect)} [{_f(r.ci_low)}, {_f(r.ci_high)}]"
        eap = (
            f"{_f(r.eap_ig)} ({_f(r.eap_ig_rank, 0)})"
            if isinstance(r.eap_ig, float) and not math.isnan(r.eap_ig)
            else ""
        )
        out.append(
            f"| {r.task} | {_head(r)} | {r.roles or '-'} | {_others(r.other_roles)} | {r.site} | {ci} "
            f"| {_f(r.min_effect)} | {_f(r.rank, 0)} | {eap} | {r.verdict} |"
        )
    if len(d) > limit:
        out.append(f"\n({len(d) - limit} more in catalogue.csv)")
    return out


def markdown(table: pd.DataFrame, tasks: pd.DataFrame, info: dict) -> str:
    name = info.get("model", "")
    lines = [f"# Head catalogue: {name}", ""]
    lines += [
        "One verdict per head and task: the pattern side (the probe's labelled roles that the task needs) joined with "
        "the causal side (each head patched from the corrupted prompt into the clean one, at the position where the "
        "role acts; docs/catalogue.md gives the rule and the role-to-task map).",
        "",
        "## Tasks",
        "",
        "| task | metric | accuracy | solved pairs | pairs used | clean | min effect | detectable (80%) | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in tasks.itertuples():
        acc = _f(r.accuracy, 2)
        lines.append(
            f"| {r.task} | {r.metric} | {acc} | {r.n_solved} | {r.n_used} | {_f(r.clean)} | "
            f"{_f(r.min_effect)} | {_f(r.detectable)} | {r.note} |"
        )
    unsolved = tasks[~tasks["solved"].astype(bool)]
    if len(unsolved):
        lines += [
            "",
            "Not solved, skipped: " + ", ".join(f"{t} ({n})" for t, n in zip(unsolved["task"], unsolved["note"])),
        ]
    lines += ["", "## Verdicts per task", ""]
    counts = verdict_counts(table)
    lines.append("| task | " + " | ".join(counts.columns) + " |")
    lines.append("|---|" + "---|" * len(counts.columns))
    for t, row in counts.iterrows():
        lines.append(f"| {t} | " + " | ".join(str(int(v)) for v in row) + " |")
    mech = table[table["verdict"] == "mechanism"].sort_values("effect", ascending=False)
    lines += ["", f"## Mechanisms ({len(mech)})", ""]
    rank = "rank" if info.get("encoder") else "rank at answer"  # a causal LM ranks the answer-position effect
    lines += _rows(mech, 40, rank) if len(mech) else ["No head has both the pattern a task needs and an effect on it."]
    dis = disagreements(table)
    lines += [
        "",
        f"## Disagreements ({len(dis)})",
        "",
        "`effect, no named pattern`: the heads the pattern report misses; `pattern, no effect`: a label whose "
        "head the task does not need (the interval lies inside +-min_effect).",
        "",
    ]
    lines += _rows(dis, 60, rank) if len(dis) else ["None."]
    inc = table[table["verdict"] == "inconclusive"]
    if len(inc):
        lines += ["", f"## Inconclusive ({len(inc)}): more pairs would decide", ""]
        lines += _rows(inc, 30, rank)
    nt = table[table["task"] == NO_TASK]
    if len(nt):
        lines += [
            "",
            f"## No causal test ({len(nt)} heads)",
            "",
            "Roles no solved task exercises: " + ", ".join(sorted({r for x in nt["roles"] for r in x.split("; ")})),
        ]
    ran = info.get("ran", {})
    lines += [
        "",
        "Joined from the model's folder: " + ", ".join(f"{k}: {'yes' if v else 'not run'}" for k, v in ran.items()),
    ]
    return "\n".join(lines) + "\n"


def _write_files(result, tmp: Path, seconds: float | None) -> None:
    tmp = Path(tmp)
    result.table.to_csv(tmp / "catalogue.csv", index=False)
    result.tasks.to_csv(tmp / "catalogue_tasks.csv", index=False)
    (tmp / "catalogue.md").write_text(markdown(result.table, result.tasks, result.info))
    info = dict(result.info)
    if seconds is not None:
        info["seconds"] = round(seconds, 1)
    (tmp / "catalogue.json").write_text(json.dumps(info, indent=2, default=str) + "\n")


def write(result, folder, force: bool = False, seconds: float | None = None) -> Path:
    """``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``). Returns ``folder``."""
    return write_set(
        folder, OUTPUTS, lambda tmp: _write_files(result, tmp, seconds), command="interp catalogue", force=force
    )
