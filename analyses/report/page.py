"""The report a person opens: one self-contained, offline HTML page per model, and ``index.html``.

A model's page (``out/<model>/report.html``) has five sections: the head explorer over the
primary-role map (with what each role means), the labelled heads (a sortable table, filterable by
role, layer and verdict), the invariances, the causal validation, and the data and method. Where
the folder holds the head catalogue (``interp catalogue``: ``catalogue.csv``, read by
``analyses.report.catalogue``), a "Catalogue" section comes before the validation (the tasks, the
verdict counts per task, the mechanisms and the disagreements), the map can be coloured by each
head's verdict on a chosen task, a head's detail shows its labelled roles beside its effect on each
task, and the validation section and the heads table's verdicts are the catalogue's (a folder with
only ``validation/`` shows that, as before).
Everything is inline (styles, the script in ``assets/``, the data as JSON, figures as base64 PNG):
no CDN, no network, and it works from ``file://``. Without JavaScript the grid, the tables and the
figures still render; the script adds the head detail (scores per role with baselines and
intervals, validation verdicts, attention on a few example sentences as a token matrix, by
attention weight and by the norm lens), the colour choice, sorting and filtering.

The HTML comes from jinja2 templates (``templates/``, autoescape on, through ``analyses.html``);
the data block is JSON through ``tojson``, which escapes ``<``, ``>`` and ``&``. The page is handed
data: the probe's report sections (``analyses.heads.report.read_sections``: placed by their ids,
not by heading text), the example patterns (``analyses.heads.example_patterns``: the page runs no
model), the tables. Markdown is rendered with markdown-it-py, never shown as source.

``page_from_folder(dir)`` reads ``heads.csv``, ``report.md`` and its figures, ``examples.json``,
``invariance/invariance.csv``, ``catalogue.csv`` + ``catalogue_tasks.csv`` + ``catalogue.json`` or
else ``validation/validation.md`` + ``.csv``, ``retrieval/retrieval.csv`` + ``.md`` + ``.png``
(``interp retrieval``) and ``qk/qk.md`` or ``qk/<name>/qk.md`` + ``qk.png`` (``interp qk``) where
present, so
``interp probe`` (which has the first three) and ``interp summary`` (which runs after invariance
and validation) render the same page.

Size: example patterns are stored for every head as uint8 (weight x 255, base64), 3-5 short
sentences, so SmolLM2's 270 heads x 4 sentences x 2 weightings take about 0.5 MB; scores are
rounded to 4 decimals. ``tests/analyses/report/test_page.py`` holds each page to ``SIZE_BUDGET``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.heads.report import ROLE_TEXT, Section, read_sections
from analyses.heads.roles import COLUMNS
from analyses.html import inline_images, render, render_markdown
from analyses.longctx.retrieval import read_retrieval
from analyses.report.catalogue import (
    ModelCatalogue,
    catalogue_markdown,
    catalogue_provenance,
    labels_verdicts,
    page_catalogue,
    read_model_catalogue,
    role_verdict_counts,
)
from interp.display import md_table

__all__ = [
    "SIZE_BUDGET",
    "HeadExplorer",
    "page_data",
    "render_page",
    "page_from_folder",
    "write_page",
    "render_index",
    "render_markdown",
    "read_page_data",
    "read_heads",
    "label_counts",
]

SIZE_BUDGET = 5 * 1024 * 1024  # bytes per page (SmolLM2: 270 heads)


# --------------------------------------------------------------------------------------------------
# The data a page embeds


def _num(x, digits: int = 4):
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if not np.isfinite(v) else round(v, digits)


def _p3(x):
    """3 significant digits: a p of 1.5e-8 must not read 0."""
    return None if _num(x) is None else float(f"{float(x):.3g}")


def role_colours(roles: Sequence[str]) -> dict[str, str]:
    """The role map's colours (``analyses.heads.figures.role_colours``: tab20 in role order, the idle
    kinds and unclassified in fixed greys): the figure's, the page's and the explorer's."""
    from analyses.heads.figures import role_colours as colours

    return colours(roles)


def _verdicts(validation: pd.DataFrame | None) -> dict[str, list[dict]]:
    if validation is None or validation.empty:
        return {}
    out: dict[str, list[dict]] = {}
    for r in validation.itertuples():
        out.setdefault(f"{int(r.layer)},{int(r.head)}", []).append(
            {
                "role": str(r.role),
                "verdict": str(r.verdict),
                "metric": str(r.metric),
                "effect": _num(getattr(r, "effect", None)),
                "p": _num(getattr(r, "p_value", None)),
                "n": None if pd.isna(getattr(r, "n_items", None)) else int(r.n_items),  # the prompts it rests on
                "reason": "" if pd.isna(getattr(r, "reason", None)) else str(r.reason),
            }
        )
    return out


SCORE_FIELDS = ("role", "direction", "score", "ci_low", "ci_high", "baseline", "baseline_kind", "null_score")
TEXT_FIELDS = ("role", "direction", "baseline_kind")
_ROW_KEY = ("layer", "head", "role", "direction", "source", "subset", "specials", "weighting")


def _score_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a head's detail lists: the headline row per role and direction, the norm-lens rows
    of the boundary roles, and the source or subset rows that carry a label (e.g. spaCy-silver arcs,
    antecedent=other: their p-value is the one that labelled the head). Each row's ``label`` is its
    own in heads.csv (a pooled row is descriptive: not labelled, no p) and ``map_role`` the name
    under which the map counts its label (``noop_sink`` for a boundary label by weight only)."""
    from analyses.heads.labels import has_norm_rows, headline, labelled_roles
    from analyses.heads.roles import NORM_LABEL_ROLES

    key = [c for c in _ROW_KEY if c in df]
    own = set(map(tuple, df.loc[df["label"].astype(bool), key].itertuples(index=False)))
    rows = [headline(df).assign(_w="attention")]
    if has_norm_rows(df):
        norm = df[
            (df["weighting"] == "norm")
            & (df["source"] == "all")
            & (df["subset"] == "all")
            & df["role"].isin([*NORM_LABEL_ROLES, "attention_sink"])
        ]
        rows.append(norm.assign(_w="norm"))
    strata = df[df["label"].astype(bool) & ((df["source"] != "all") | (df["subset"] != "all"))]
    if "weighting" in df:
        strata = strata[strata["weighting"] == "attention"]
    if len(strata):
        rows.append(strata.assign(_w="stratum"))
    scores = pd.concat(rows, ignore_index=True)
    scores["label"] = [t in own for t in map(tuple, scores[key].itertuples(index=False))]
    lab = labelled_roles(df)
    orig = lab.assign(role=df.loc[lab.index, "role"].to_numpy())  # labelled_roles renames, keeps the index
    mapped = dict(zip(map(tuple, orig[key].itertuples(index=False)), lab["name"]))
    scores["map_role"] = [mapped.get(t) for t in map(tuple, scores[key].itertuples(index=False))]
    where = " [" + scores["source"].astype(str) + " / " + scores["subset"].astype(str) + "]"
    scores["role"] = np.where(scores["_w"] == "norm", scores["role"] + " (norm)", scores["role"])
    scores["role"] = np.where(scores["_w"] == "stratum", scores["role"] + where, scores["role"])
    scores = scores[scores["score"].notna()]  # roles without data (no items of that relation) say nothing
    return scores.sort_values(["label", "score"], ascending=[False, False], kind="stable")  # labels first


def _score_record(s) -> dict:
    return {
        **{k: (str(getattr(s, k)) if k in TEXT_FIELDS else _num(getattr(s, k))) for k in SCORE_FIELDS},
        "p_adjusted": _p3(s.p_adjusted),
        "label": bool(s.label),
        "map_role": None if s.map_role is None or pd.isna(s.map_role) else str(s.map_role),
    }


def _role_grids(df: pd.DataFrame, L: int, H: int) -> dict[str, list[list[float | None]]]:
    """Per label name (a relation's readings apart: "subject_verb (predictive)"): the [layer][head]
    best headline score (3 decimals), what the colour choice shows."""
    from analyses.heads.labels import headline

    grids = {}
    for role, g in headline(df).groupby("name", sort=False):
        best = g.groupby(["layer", "head"])["score"].max()
        grid = [[None] * H for _ in range(L)]
        for (l, h), v in best.items():
            grid[int(l)][int(h)] = _num(v, 3)
        grids[str(role)] = grid
    return grids


def page_data(
    df: pd.DataFrame,
    examples: dict | None = None,
    validation: pd.DataFrame | None = None,
    model: str | None = None,
    circuits: dict | None = None,
    retrieval: pd.DataFrame | None = None,
    catalogue: ModelCatalogue | None = None,
    qk: pd.DataFrame | None = None,
) -> dict:
    """What the explorer embeds (JSON-ready): the model's shape, the role colours and what each role
    means, one record per head (primary role, standardised effect, secondary roles, its scores:
    ``_score_rows``), the per-role score grids, the validation verdicts per head, and the example
    patterns (``ExamplePatterns.page()``, or the ``examples.json`` the probe wrote). ``retrieval``
    (``analyses.longctx.retrieval.read_retrieval``): each head's retrieval score in its record and a
    ``retrieval`` grid among the score grids (the explorer's colour choice offers it). ``catalogue``
    (``analyses.report.catalogue.read_model_catalogue``): its rows per head and task and each head's
    labelled roles (``page_catalogue``), for the verdict colouring and the head's two sides."""
    from analyses.heads.labels import role_map
    from analyses.heads.roles import MAP_PRIMARY

    if df.empty:
        raise ValueError("page_data: the heads table is empty; pass the probe's table (heads.csv)")
    if examples is not None and hasattr(examples, "page"):
        examples = examples.page()
    model = model or str(df.attrs.get("model") or df["model"].iloc[0])
    rmap = role_map(df)
    L, H = int(rmap["layer"].max()) + 1, int(rmap["head"].max()) + 1
    by_head = {k: g for k, g in _score_rows(df).groupby(["layer", "head"], sort=False)}
    pats = (examples or {}).get("patterns", {})
    records = [
        {
            "layer": int(r.layer),
            "head": int(r.head),
            "primary": str(r.primary),
            "standardised": _num(r.standardised, 2),
            "relative": _num(r.relative, 3),
            "secondary": str(r.secondary or ""),
            "sink": str(r.sink or ""),
            "sink_weight": _num(r.sink_weight, 3),
            "sink_norm": _num(r.sink_norm, 3),
            "scores": [_score_record(s) for s in by_head[(r.layer, r.head)].itertuples()]
            if (r.layer, r.head) in by_head
            else [],
            "examples": pats.get(f"{int(r.layer)},{int(r.head)}"),
        }
        for r in rmap.itertuples()
    ]
    roles = [r for r in MAP_PRIMARY if r in set(rmap["primary"].astype(str)) and r != "unclassified"]
    grids = _role_grids(df, L, H)
    if retrieval is not None:  # a long-context score beside the probe's (interp retrieval)
        from analyses.report.compose import with_retrieval

        rmap = with_retrieval(rmap, retrieval)
        grid = [[None] * H for _ in range(L)]
        for r, rec in zip(rmap.itertuples(), records):
            grid[int(r.layer)][int(r.head)] = rec["retrieval"] = _num(r.retrieval, 3)
        grids["retrieval"] = grid
    if rmap["sink_norm"].notna().any():  # the sink layer by norm, beside attention_sink's weight grid
        norm = [[None] * H for _ in range(L)]
        for r in rmap.itertuples():
            norm[int(r.layer)][int(r.head)] = _num(r.sink_norm, 3)
        grids["attention_sink (norm)"] = norm
    return {
        "model": model,
        "n_layers": L,
        "n_heads": H,
        "causal": bool(df.attrs.get("causal", not (df["direction"] == "subject->verb").any())),
        "roles": roles,
        "colours": role_colours([r for r in MAP_PRIMARY if r != "unclassified"]),
        "role_text": {r: ROLE_TEXT.get(r, "") for r in MAP_PRIMARY},
        "heads": records,
        "role_scores": grids,
        "verdicts": _verdicts(validation),
        "has_validation": validation is not None,
        "catalogue": page_catalogue(catalogue, df) if catalogue is not None else None,
        "circuits": circuits or {},  # per head: causal importance per task (analyses.circuits.report.page_circuits)
        "qk": page_qk(qk),  # per head: why it attends, per interp qk run (its qk_heads.csv rows)
        "examples": (examples or {}).get("sentences", []),
    }


def read_page_data(page: str) -> dict:
    """The JSON a page (or an explorer fragment) embeds: the inverse of ``render_page``'s embedding."""
    m = re.search(r'<script type="application/json" class="hx-data"[^>]*>(.*?)</script>', page, re.S)
    if not m:
        raise ValueError("no explorer data in this page (expected <script type='application/json' class='hx-data'>)")
    return json.loads(m.group(1))


# --------------------------------------------------------------------------------------------------
# HTML pieces (values for the templates; the templates escape every one of them)


def _explorer_view(data: dict) -> dict:
    """The explorer template's values: the grid's cells (None where a head has no record), the
    legend and an id unique to the model and its shape."""
    L, H = data["n_layers"], data["n_heads"]
    by = {(h["layer"], h["head"]): h for h in data["heads"]}
    grid = []
    for l in range(L):
        row = []
        for h in range(H):
            rec = by.get((l, h))
            if rec is None:
                row.append(None)
                continue
            also = f" (also {rec['secondary']})" if rec["secondary"] else ""
            sink = _sink_note(rec)
            row.append(
                {
                    "layer": l,
                    "head": h,
                    "title": f"L{l}H{h}: {rec['primary']}{also}{'; ' + sink if sink else ''}",
                    "colour": data["colours"].get(rec["primary"], "#ededed"),
                    "num": "" if rec.get("relative") is None else f"{100 * rec['relative']:.0f}",
                    "sink": bool(rec.get("sink")),
                }
            )
        grid.append(row)
    uid = "hx-" + hashlib.sha1(json.dumps([data["model"], L, H]).encode()).hexdigest()[:8]
    cat = data.get("catalogue")
    verdict_legend = [*cat["colours"].items(), ("no row for this task", cat["no_row"])] if cat else []
    return {
        "uid": uid,
        "data": data,
        "grid": grid,
        "legend": [*data["roles"], "unclassified"],
        "verdict_legend": verdict_legend,
    }


def _sink_note(rec: dict) -> str:
    """ "sink: noop_sink (weight 0.84, norm 0.05)" for a head with a sink label, else ""."""
    if not rec.get("sink"):
        return ""
    parts = [f"{k} {rec[f'sink_{k}']:.2f}" for k in ("weight", "norm") if rec.get(f"sink_{k}") is not None]
    return f"sink: {rec['sink']}" + (f" ({', '.join(parts)})" if parts else "")


def label_counts(df: pd.DataFrame) -> tuple[int, int]:
    """(labels, head-roles): the rows of the labelled heads table (one per role, direction and
    source that carries a label, the map's role names) and the distinct (layer, head, role) among
    them (a relation's two readings are two head-roles). The one count the page and index.html both
    state."""
    from analyses.heads.labels import labelled_roles

    lab = labelled_roles(df)
    return len(lab), len(lab.drop_duplicates(["layer", "head", "name"]))


def _labelled_rows(
    df: pd.DataFrame, validation: pd.DataFrame | None, catalogue: ModelCatalogue | None = None
) -> pd.DataFrame:
    """One row per label under the map's names (the reading named: "subject_verb (predictive)"; a
    boundary head by weight only is ``noop_sink``) with its real-text support and its validation
    verdict ("not tested" when the validation has no row for it). A validation without a
    ``reading`` column (written before labels v4) tested the retrospective labels. With a
    ``catalogue`` the verdict is the catalogue's on the tasks that test the label
    (``labels_verdicts``: "ioi: mechanism; induction: quiet") and the validation is not read."""
    from analyses.heads.labels import labelled_roles, readings
    from analyses.heads.roles import MAP_ROLES
    from analyses.heads.summaries import real_text

    lab = labelled_roles(df)
    lab = lab.assign(real_text=real_text(lab), probe_role=df.loc[lab.index, "role"].to_numpy())
    lab["name"] = pd.Categorical(lab["name"], MAP_ROLES, ordered=True)
    lab = lab.sort_values(["name", "layer", "head", "score"], ascending=[True, True, True, False])
    lab["role"] = lab["name"].astype(str)
    if catalogue is not None:
        lab["verdict"] = labels_verdicts(lab, catalogue.table)
        return lab.reset_index(drop=True)
    verdict = {}
    if validation is not None and not validation.empty:
        v = validation if "direction" in validation else validation.assign(direction="")
        verdict = {
            (int(r.layer), int(r.head), str(r.role), x): str(r.verdict) for r, x in zip(v.itertuples(), readings(v))
        }
    lab["verdict"] = [
        verdict.get((int(l), int(h), r, x), "not tested" if verdict else "not run")
        for l, h, r, x in zip(lab["layer"], lab["head"], lab["probe_role"], lab["reading"])
    ]
    return lab.reset_index(drop=True)


HEADS_COLUMNS = ("layer", "head", "role", "direction", "source", "metric", "score", "95% CI", "baseline", "null")
HEADS_COLUMNS += ("p (Holm)", "n", "real text", "verdict")


def _heads_table_view(lab: pd.DataFrame, uid: str) -> dict:
    """The heads table template's values: per row its cells as (text, sort value or None)."""
    from interp.display import fmt

    def f3(x) -> str:
        return fmt(x, 3, fixed=True)

    def sort(v):
        return f"{float(v):.6g}" if _num(v) is not None else None

    rows = []
    for r in lab.itertuples():
        src = r.source + (f" / {r.subset}" if r.subset != "all" else "")
        cells = [
            (r.layer, sort(r.layer)),
            (r.head, sort(r.head)),
            (r.role, None),
            (r.direction, None),
            (src, None),
            (r.metric, None),
            (f3(r.score), sort(r.score)),
            (f"[{f3(r.ci_low)}, {f3(r.ci_high)}]", sort(r.ci_low)),
            (f"{f3(r.baseline)} ({r.baseline_kind})", sort(r.baseline)),
            (f3(r.null_score), sort(r.null_score)),
            (f"{r.p_adjusted:.1e}", sort(r.p_adjusted)),
            (r.n, sort(r.n)),
            (r.real_text, None),
            (r.verdict, None),
        ]
        rows.append({"role": r.role, "layer": int(r.layer), "verdict": r.verdict, "cells": cells})
    filters = [
        ("role", list(dict.fromkeys(lab["role"]))),
        ("layer", sorted({int(x) for x in lab["layer"]})),
        ("verdict", sorted(set(lab["verdict"]))),
    ]
    return {"uid": uid, "columns": HEADS_COLUMNS, "rows": rows, "filters": filters}


@dataclass
class HeadExplorer:
    """The head explorer of one probed model, for a notebook: build it and display it
    (``_repr_html_``: the grid, the head detail and its attention patterns, inline; the styles and
    the script travel with it, so it works in an exported notebook too).

    >>> import models
    >>> from analyses import heads
    >>> from analyses.report.page import HeadExplorer
    >>> m = models.load("minilm")
    >>> df = heads.probe_heads(m, n=50)
    >>> HeadExplorer.build(df, m, sentences=["the keys to the cabinet are on the table .",
    ...                                      "my own sentence , as words ."])   # doctest: +SKIP

    A sentence is a string (split into words on whitespace), a ``heads.Sentence`` or a
    (name, words) pair; without ``sentences`` the page's four built-in ones
    (``heads.EXAMPLE_SENTENCES``) are used."""

    data: dict = field(repr=False)

    @classmethod
    def build(
        cls,
        df: pd.DataFrame,
        model=None,
        validation: pd.DataFrame | None = None,
        catalogue: ModelCatalogue | None = None,
        **kwargs: object,
    ) -> HeadExplorer:
        """From a heads table (``probe_items``) and, to show patterns, the model it was probed on
        (``kwargs`` go to ``analyses.heads.example_patterns``: sentences, heads, tokenizer);
        ``catalogue`` (``read_model_catalogue``) adds the verdict colouring and each head's rows."""
        from analyses.heads.examples import example_patterns

        examples = example_patterns(model, **kwargs) if model is not None else None
        return cls(page_data(df, examples=examples, validation=validation, catalogue=catalogue))

    def _repr_html_(self) -> str:
        return render("explorer_fragment.html", ex=_explorer_view(self.data))

    def __repr__(self) -> str:
        return f"HeadExplorer({self.data['model']}: {self.data['n_layers']} layers x {self.data['n_heads']} heads)"


# the sections the page places itself; every other section of report.md goes under "Data and method"
_PLACED = ("intro", "map", "map-detail", "labelled")


def _method_html(sections: Sequence[Section], figures: Mapping[str, bytes]) -> list[str]:
    return [
        inline_images(render_markdown((f"### {s.title}\n\n" if s.title else "") + s.markdown), figures)
        for s in sections
        if s.id not in _PLACED
    ]


CATALOGUE_VALIDATION = (
    "Read from the head catalogue (the section above, `catalogue.csv`): each labelled head patched on the "
    "tasks its role needs. Head-task rows per labelled role and verdict; a head with two roles for a task "
    "counts under each, `(no label)` holds the rows of heads without a label that the task tests (their "
    "`idle` and `quiet` rows are not counted)."
)


def _validation_html(
    validation: pd.DataFrame | None, validation_md: str | None, catalogue: ModelCatalogue | None = None
) -> str:
    if catalogue is not None:  # the catalogue supersedes interp validate's verdicts
        return render_markdown(
            CATALOGUE_VALIDATION + "\n\n" + md_table(role_verdict_counts(catalogue.table).reset_index())
        )
    if validation_md:
        return render_markdown(re.sub(r"(?m)\A## .*\n", "", validation_md), heading_shift=1)
    if validation is not None:
        return render_markdown(md_table(validation))
    return ""


def render_page(
    df: pd.DataFrame,
    sections: Sequence[Section] = (),
    figures: Mapping[str, bytes] | None = None,
    examples: dict | None = None,
    invariance: pd.DataFrame | None = None,
    validation: pd.DataFrame | None = None,
    validation_md: str | None = None,
    validation_warning: str | None = None,
    model: str | None = None,
    circuits: dict | None = None,
    retrieval: pd.DataFrame | None = None,
    retrieval_md: str | None = None,
    catalogue: ModelCatalogue | None = None,
    catalogue_warning: str | None = None,
    qk_md: Sequence[str] = (),
    qk: pd.DataFrame | None = None,
) -> str:
    """One model's page as a string (see the module docstring). ``sections``: the probe's report
    (``analyses.heads.report.report_sections`` or ``read_sections`` of its report.md), whose
    figures (``![..](x.png)``) are inlined from ``figures`` (name -> PNG bytes). ``retrieval``
    (per-head scores, ``read_retrieval``) and ``retrieval_md`` (``interp retrieval``'s report):
    the map is redrawn with the retrieval heads marked, the explorer gets a retrieval score grid,
    and the retrieval report leads "Data and method". ``catalogue`` (``read_model_catalogue``): the
    map gets a verdict colouring, each head's detail its pattern and causal sides, the page a
    "Catalogue" section, and the validation section and the heads table read it instead of
    ``validation``; ``catalogue_warning``: its provenance (``catalogue_provenance``). ``qk_md``:
    ``interp qk`` reports (``qk.md``, figures named in ``figures``), placed after the retrieval report
    under "Data and method"; ``qk``: their ``qk_heads.csv`` rows, shown in each head's detail."""
    from analyses.invariance.report import invariance_section

    figures = dict(figures or {})
    data = page_data(
        df,
        examples=examples,
        validation=validation,
        model=model,
        circuits=circuits,
        retrieval=retrieval,
        catalogue=catalogue,
        qk=qk,
    )
    retrieval_html = []
    if retrieval is not None:
        from analyses.heads.labels import role_map
        from analyses.heads.report import role_map_figure
        from analyses.report.compose import retrieval_markdown, with_retrieval

        heads_map = with_retrieval(role_map(df), retrieval)
        figures["role_map.png"] = role_map_figure(heads_map)
        body = retrieval_markdown(heads_map)
        if retrieval_md:  # interp retrieval's own report: its "##" title gives way to the page's
            body += "\n\n" + re.sub(r"(?m)\A## .*\n", "", retrieval_md)
        retrieval_html = [inline_images(render_markdown("### Retrieval heads (long context)\n\n" + body), figures)]
    by_id = {s.id: s for s in sections}
    intro = by_id.get("intro")
    title = intro.title if intro and intro.title else f"Head roles of {data['model']}"
    lab = _labelled_rows(df, validation, catalogue)
    uid = "hx-" + hashlib.sha1(data["model"].encode()).hexdigest()[:8]

    def md(sid: str) -> str:
        return inline_images(render_markdown(by_id[sid].markdown), figures) if sid in by_id else ""

    inv = ""
    if invariance is not None and not invariance.empty:
        inv = render_markdown(invariance_section(invariance, heading_level=3).split("\n", 1)[1])
    n_labels, n_head_roles = label_counts(df)
    warning = catalogue_warning if catalogue is not None else validation_warning
    return render(
        "page.html",
        title=title,
        script=True,
        intro_html=md("intro"),
        map_html=md("map"),
        map_detail_html=md("map-detail"),
        ex=_explorer_view(data),
        roles=[(r, data["role_text"][r]) for r in [*data["roles"], "unclassified"]],
        table=_heads_table_view(lab, uid),
        n_labels=n_labels,
        n_head_roles=n_head_roles,
        invariance_html=inv,
        warning_html=render_markdown(warning) if warning else "",
        validation_html=_validation_html(validation, validation_md, catalogue),
        catalogue_html=render_markdown(catalogue_markdown(catalogue)) if catalogue is not None else "",
        has_catalogue=catalogue is not None,
        method_html=retrieval_html + _qk_html(qk_md, figures) + _method_html(sections, figures),
    )


QK_TARGETS = {"subject_verb": ("subject", "rival"), "ioi": ("indirect object", "subject's second mention"),
              "pronoun_gender": ("antecedent", "other person")}  # fmt: skip


def page_qk(heads: pd.DataFrame | None) -> dict:
    """``interp qk``'s per-head rows (``qk_heads.csv``, several runs concatenated) as the head panel
    reads them: per "layer,head" a list of {task, target, rival, target_wins, difference, top_query,
    top_key}."""
    out: dict[str, list[dict]] = {}
    if heads is None or not len(heads):
        return out
    for r in heads.to_dict("records"):
        target, rival = QK_TARGETS.get(str(r["task"]), ("target", "rival"))
        out.setdefault(f"{int(r['layer'])},{int(r['head'])}", []).append({
            "task": str(r["task"]), "target": target, "rival": rival, "target_wins": _num(r["target_wins"]),
            "difference": _num(r["difference"]), "top_query": str(r["top_query"]), "top_key": str(r["top_key"]),
        })  # fmt: skip
    return out


def _qk_html(reports: Sequence[str], figures: Mapping[str, bytes]) -> list[str]:
    """``interp qk``'s reports as page sections: their "##" title one level down."""
    return [inline_images(render_markdown(re.sub(r"(?m)\A## ", "### ", md)), figures) for md in reports]


def read_qk_reports(model_dir: str | Path) -> tuple[list[str], dict[str, bytes], pd.DataFrame | None]:
    """The ``interp qk`` runs of a model folder (``qk/qk.md`` and ``qk/<name>/qk.md``, in name order):
    their reports, their figures (each renamed ``qk-<n>.png`` so that several runs' figures do not
    collide) and their ``qk_heads.csv`` rows concatenated (None: no run)."""
    base = Path(model_dir) / "qk"
    found = sorted([base / "qk.md", *base.glob("*/qk.md")]) if base.is_dir() else []
    reports, figures, tables = [], {}, []
    for i, md in enumerate(p for p in found if p.is_file()):
        text = md.read_text(encoding="utf-8")
        if (md.parent / "qk_heads.csv").is_file():
            tables.append(pd.read_csv(md.parent / "qk_heads.csv"))
        png = md.parent / "qk.png"
        if png.is_file():
            figures[f"qk-{i}.png"] = png.read_bytes()
            text = text.replace("](qk.png)", f"](qk-{i}.png)")
        reports.append(text)
    return reports, figures, (pd.concat(tables, ignore_index=True) if tables else None)


# columns a heads.csv may lack: written before labels v4 (``reading``: derived, a relation row is
# retrospective; ``real_text``: "-", not known)
OPTIONAL_COLUMNS = ("reading", "real_text", "gate_low")  # labels v4: an older heads.csv lacks them


def read_heads(path: Path) -> pd.DataFrame:
    """A heads.csv as the probe wrote it: empty text cells stay empty strings, not NaN; a table without
    the ``reading`` column (labels v4) gets it (``roles.with_reading``: relation rows retrospective).
    An older schema (other columns missing) is refused with the missing names and the command that
    writes a current one."""
    from analyses.heads.labels import readings

    df = pd.read_csv(path, low_memory=False)  # one dtype per column: family holds "" and names
    missing = [c for c in COLUMNS if c not in df and c not in OPTIONAL_COLUMNS]  # what write_csv writes
    if missing:
        raise ValueError(
            f"{path} lacks the columns {missing} (an older version of the probe wrote it); "
            f"rerun `interp probe --out {Path(path).parent}` to write a current heads.csv"
        )
    for col in ("family", "specials", "source", "subset", "weighting", "baseline_kind", "direction", "real_text"):
        if col in df:
            df[col] = df[col].fillna("").astype(str)
    df["reading"] = readings(df)
    return df


def page_from_folder(model_dir: str | Path, provenance: str | None = None) -> str:
    """Render ``model_dir``'s page from its files (``heads.csv`` is required; ``report.md``, its PNG
    figures, ``examples.json``, ``invariance/invariance.csv``, ``catalogue.csv`` (with
    ``catalogue_tasks.csv`` and ``catalogue.json``) and ``validation/`` are used where present).
    Where the folder holds a catalogue, it stands for the validation (``validation/`` is not read)
    and its provenance is checked here (``catalogue_provenance``); otherwise ``provenance`` is the
    warning about the validation (``summary.validation_provenance``)."""
    from analyses.circuits.report import page_circuits

    d = Path(model_dir)
    if not (d / "heads.csv").is_file():
        raise FileNotFoundError(
            f"{d}/heads.csv not found: a model page needs the probe's output (interp probe --out {d})"
        )
    df = read_heads(d / "heads.csv")
    name = str(df["model"].iloc[0]) if len(df) else d.name  # d may be a staging folder
    df.attrs["model"] = name
    df.attrs["causal"] = not (df["direction"] == "subject->verb").any()

    def text(p: Path) -> str | None:
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def table(p: Path) -> pd.DataFrame | None:
        return pd.read_csv(p) if p.is_file() else None

    ex = text(d / "examples.json")
    cat = read_model_catalogue(d)
    val = table(d / "validation" / "validation.csv") if cat is None else None
    ret = d / "retrieval"  # interp retrieval --out <this folder>/retrieval
    figures = {p.name: p.read_bytes() for p in d.glob("*.png")}
    if (ret / "retrieval.png").is_file():
        figures["retrieval.png"] = (ret / "retrieval.png").read_bytes()
    qk_reports, qk_figures, qk_heads = read_qk_reports(d)  # interp qk --out <this folder>/qk[/<task>]
    figures.update(qk_figures)
    return render_page(
        df,
        sections=read_sections(text(d / "report.md") or ""),
        figures=figures,
        examples=json.loads(ex) if ex is not None else None,
        invariance=table(d / "invariance" / "invariance.csv"),
        validation=val,
        validation_md=text(d / "validation" / "validation.md") if cat is None else None,
        validation_warning=provenance if val is not None else None,
        model=name,
        circuits=page_circuits(d),
        retrieval=read_retrieval(ret / "retrieval.csv") if (ret / "retrieval.csv").is_file() else None,
        retrieval_md=text(ret / "retrieval.md"),
        catalogue=cat,
        catalogue_warning=catalogue_provenance(d) if cat is not None else None,
        qk_md=qk_reports,
        qk=qk_heads,
    )


def write_page(model_dir: str | Path, dest: str | Path | None = None, provenance: str | None = None) -> Path:
    """``page_from_folder(model_dir)`` written atomically to ``dest`` (a folder; default
    ``model_dir``) as ``report.html``."""
    from interp.io import atomic_write

    return atomic_write(Path(dest or model_dir) / "report.html", page_from_folder(model_dir, provenance))


def render_index(summary_md: str, base: str | Path, title: str = "Head-probing summary") -> str:
    """``out/index.html``: the summary (``summary.md``) rendered, its figures inlined from ``base``
    (links to each model's ``report.html`` stay relative, so the folder can move as a whole)."""
    body = inline_images(render_markdown(summary_md), Path(base))
    return render("index.html", title=title, script=False, body_html=body)
