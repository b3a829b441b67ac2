"""Reports that compose analyses: the retrieval heads of ``interp retrieval`` marked on the head
probe's role map (``with_retrieval``, ``retrieval_markdown``, and the head report with them:
``report_sections`` / ``write_report``), and the cross-model comparison of the probe's roles
(``write_comparison``: comparison.md). The head report itself (``analyses.heads.report``) knows no
other analysis; it takes the role map to show and the sections to add."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.heads import report as heads_report
from analyses.heads.labels import role_map
from analyses.heads.report import Section, fmt3, role_layers
from analyses.heads.roles import MAP_ROLES, RETRIEVAL_THRESHOLD
from interp.display import fmt, md_table
from interp.io import atomic_write

__all__ = ["with_retrieval", "retrieval_markdown", "report_sections", "write_report", "write_comparison"]

RETRIEVAL_TITLE = "Retrieval heads (long context)"


def with_retrieval(heads_map: pd.DataFrame, retrieval: pd.DataFrame | None) -> pd.DataFrame:
    """The role map (``probe.role_map``) with each head's ``retrieval`` score (NaN where the table
    has none) and ``retrieval_head`` (score > ``RETRIEVAL_THRESHOLD``); unchanged without a table.
    ``retrieval``: ``analyses.longctx.retrieval.read_retrieval``'s table."""
    if retrieval is None:
        return heads_map
    scores = retrieval.set_index(["layer", "head"])["retrieval"]
    out = heads_map.copy()
    out["retrieval"] = [float(scores.get((int(r.layer), int(r.head)), np.nan)) for r in out.itertuples()]
    out["retrieval_head"] = out["retrieval"] > RETRIEVAL_THRESHOLD
    return out


def retrieval_markdown(heads_map: pd.DataFrame) -> str:
    """The report's retrieval section: the retrieval heads with their primary role."""
    rh = heads_map[heads_map["retrieval_head"]].sort_values("retrieval", ascending=False)
    table = pd.DataFrame(
        {
            "layer": rh["layer"],
            "head": rh["head"],
            "retrieval": rh["retrieval"].map(fmt3),
            "primary": rh["primary"].astype(str),
        }
    )
    return (
        f"Heads whose retrieval score (Wu et al. 2024: the share of needle tokens copied during "
        f"needle-in-a-haystack decoding on which the head's largest attention lands on that token; "
        f"`interp retrieval`, docs/long_context.md) exceeds {RETRIEVAL_THRESHOLD:g}: {len(rh)} of "
        f"{len(heads_map)}. The map marks them with a corner triangle.\n\n" + md_table(table)
    )


def _with_retrieval_parts(df: pd.DataFrame, retrieval: pd.DataFrame | None) -> dict:
    """The head report's ``heads_map`` and ``extra`` sections for ``retrieval`` (none: the plain report)."""
    heads_map = with_retrieval(role_map(df), retrieval)
    extra = [] if retrieval is None else [Section("retrieval", RETRIEVAL_TITLE, retrieval_markdown(heads_map))]
    return dict(heads_map=heads_map, extra=extra)


def report_sections(
    df: pd.DataFrame,
    examples: Sequence[dict] = (),
    title: str | None = None,
    command: str | None = None,
    retrieval: pd.DataFrame | None = None,
) -> list[Section]:
    """``analyses.heads.report.report_sections`` with the retrieval heads: a ``retrieval`` column in
    the map table and a ``retrieval`` section after the map (``retrieval``: ``read_retrieval``'s table)."""
    parts = _with_retrieval_parts(df, retrieval)
    return heads_report.report_sections(df, examples, title=title, command=command, **parts)


def write_report(
    df: pd.DataFrame,
    out_dir: str | Path,
    examples: Sequence[dict] = (),
    title: str | None = None,
    command: str | None = None,
    retrieval: pd.DataFrame | None = None,
) -> dict:
    """``analyses.heads.report.write_report`` with the retrieval heads: marked on role_map.png, a
    column of the map table and a section of report.md (``report_sections``)."""
    parts = _with_retrieval_parts(df, retrieval)
    return heads_report.write_report(df, out_dir, examples, title=title, command=command, **parts)


def write_comparison(dfs: Mapping[str, pd.DataFrame] | Sequence[pd.DataFrame], out_dir: str | Path) -> Path:
    """``comparison.md``: which roles live in which layers of each model (counts of labelled heads,
    their layers and mean relative depth), e.g. the encoder (minilm) beside the causal LM (smollm2)."""
    if not isinstance(dfs, Mapping):
        dfs = {str(d.attrs.get("model", d["model"].iloc[0])): d for d in dfs}
    if not dfs:
        raise ValueError("write_comparison needs at least one heads table")
    per = {name: role_layers(df).set_index("role") for name, df in dfs.items()}
    names = list(per)
    rows = []
    # every label name some model measured (a causal model's predictive readings: an encoder has none)
    roles = [r for r in MAP_ROLES if any(r in t.index for t in per.values())]
    for role in roles:
        row = {"role": role}
        for name in names:
            if role not in per[name].index:
                row.update({f"{name} heads": "not measured", f"{name} depth": "-", f"{name} layers": "-"})
                continue
            r = per[name].loc[role]
            row[f"{name} heads"] = int(r["heads"])
            row[f"{name} depth"] = fmt(r["mean_depth"], 2, fixed=True)
            row[f"{name} layers"] = r["layers"] or "-"
        rows.append(row)
    table = pd.DataFrame(rows)
    lines = [
        "# Where head roles live: " + " vs ".join(names) + "\n",
        "Labelled heads per role (Holm-controlled labels, see each model's report; a relation in each of "
        "its readings), the layers they sit in (`3x2`: two heads in layer 3) and their mean relative depth "
        "(0 = first layer, 1 = last); `not measured`: the model's run has no such rows.\n",
        md_table(table),
    ]
    for name, df in dfs.items():
        kind = "causal" if df.attrs.get("causal") else ("bidirectional" if "causal" in df.attrs else "")
        t = per[name]
        present = t[t["heads"] > 0].sort_values("mean_depth")
        if present.empty:
            lines.append(f"- **{name}** ({kind}): no labelled heads.")
            continue
        shallow = ", ".join(f"{r} ({d:.2f})" for r, d in present["mean_depth"].items())
        lines.append(f"- **{name}** ({kind}), roles from shallow to deep: {shallow}.")
    return atomic_write(Path(out_dir) / "comparison.md", "\n".join(lines) + "\n")
