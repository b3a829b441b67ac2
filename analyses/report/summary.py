"""The main job's summary (``interp summary --out DIR``): one page over the main job's per-model folders.

Reads ``DIR/<model>/heads.csv`` (head roles), ``DIR/<model>/invariance/invariance.csv`` and the
causal verdicts for every model folder present: the head catalogue (``DIR/<model>/catalogue.csv``,
``interp catalogue``) where the folder holds one, ``DIR/<model>/validation/validation.csv``
otherwise (the rule the model's page follows). Writes ``DIR/comparison.md`` (which roles live in
which layers of each model), ``DIR/summary.md`` (links to the full reports, the invariance section,
the verdicts, with the catalogue's verdict counts per role compared across models:
``analyses.report.catalogue.role_verdict_table``) and ``DIR/index.html`` (the same, rendered,
figures inline: ``analyses.report.page.render_index``). Atomic writes. ``model_pages`` re-renders
each ``DIR/<model>/report.html`` with its invariance and catalogue or validation.

A validation records the SHA-256 of the heads.csv it tested (``validation/validation.json``), a
catalogue that of the heads.csv it read (``catalogue.json``'s ``labels_sha256``); one whose hash is
not that of the current ``<model>/heads.csv`` (the probe was rerun since) is flagged as out of
date, and one without the record as unverifiable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analyses.catalogue import disagreements, verdict_counts
from analyses.heads.labels import has_norm_rows, label_names, labelled_roles, role_map
from analyses.heads.report import no_label_line, real_text_markdown
from analyses.heads.roles import LABEL_NAMES, LINGUISTIC_ROLES
from analyses.heads.summaries import detectable_effect, real_text
from analyses.invariance.report import invariance_section
from analyses.report.catalogue import (
    ROLE_VERDICTS,
    ModelCatalogue,
    catalogue_provenance,
    read_model_catalogue,
    role_verdict_table,
)
from analyses.report.compose import write_comparison
from analyses.report.page import label_counts, page_from_folder, read_heads, render_index
from interp.display import md_table
from interp.io import atomic_write, sha256_file

__all__ = ["summarise", "validation_provenance", "model_dirs", "model_pages", "OUTPUTS", "MODEL_OUTPUTS"]

# what ``summarise`` writes in the main job's folder (``interp summary`` opens its output set with these)
OUTPUTS = ("summary.md", "comparison.md", "index.html")
# what ``model_pages`` re-renders in each model folder (shared with ``interp probe``, which writes it first)
MODEL_OUTPUTS = ("report.html",)


def validation_provenance(model_dir: Path) -> str | None:
    """None when ``model_dir/validation`` was computed from the current ``model_dir/heads.csv``
    (same SHA-256); otherwise one sentence saying why it may not be (a markdown warning)."""
    model_dir = Path(model_dir)
    record = model_dir / "validation" / "validation.json"
    current = sha256_file(model_dir / "heads.csv")
    try:
        used = json.loads(record.read_text(encoding="utf-8")).get("labels_sha256")
    except FileNotFoundError:
        return (
            "**Cannot be checked**: this validation does not record which heads.csv it tested (no "
            "`validation/validation.json`: an older version wrote it); rerun `interp validate` to be sure."
        )
    except (ValueError, AttributeError):
        return f"**Cannot be checked**: `{record}` is not a JSON object; rerun `interp validate`."
    if used is None:
        return (
            "**Not of this heads.csv**: its labels were not read from a heads.csv (recomputed or read "
            "off patterns), so its verdicts are not about the labels of this report."
        )
    if used != current:
        return (
            f"**Out of date**: computed from a heads.csv with sha256 `{used[:12]}`, not the current one "
            f"(`{current[:12]}`): `interp probe` was rerun since; rerun `interp validate`."
        )
    return None


def _links(d: Path) -> str:
    """Links to what the model folder holds: report.md where the probe wrote one (a folder holding
    only heads.csv has none), and report.html, which ``interp summary`` renders for every folder."""
    md = f"[report]({d.name}/report.md) " if (d / "report.md").is_file() else ""
    return md + f"([html]({d.name}/report.html)), " if md else f"[html]({d.name}/report.html), "


def _counts(df: pd.DataFrame) -> str:
    """The counts the model's page states too (``page.label_counts``): one count in both places."""
    n_labels, n_head_roles = label_counts(df)
    n_heads = df[["layer", "head"]].drop_duplicates().shape[0]
    return f"{n_labels} labels on {n_head_roles} head-roles over {n_heads} heads"


def _relation_lines(df: pd.DataFrame) -> list[str]:
    """Per linguistic role and reading the table measures ("subject_verb (predictive)"): its labelled
    heads with their rows and real-text support, or, with none, the bounded negative of the power
    figure (``no_label_bound``: "no head above baseline + d at 80% power")."""
    lines = []
    lab = labelled_roles(df)
    lab = lab.assign(real_text=real_text(lab))
    names = set(label_names(df[df["role"].isin(LINGUISTIC_ROLES)]))
    for name in [n for n in LABEL_NAMES if n in names]:
        got = lab[lab["name"] == name]
        if got.empty:
            lines.append(no_label_line(df, name, float(df.attrs.get("alpha", 0.05))))
            continue
        shown = []
        for (layer, head), g in got.groupby(["layer", "head"], sort=True):
            where = "; ".join(
                f"{r.direction}, {r.source}/{r.subset}: {r.score:.2f} vs {r.baseline:.2f} (n={r.n}), real text: "
                f"{r.real_text}"
                for r in g.itertuples()
            )
            shown.append(f"L{layer}H{head} ({where})")
        lines.append(f"- `{name}`: " + ", ".join(shown) + ".")
    return lines


def _maps_section(heads: dict[str, pd.DataFrame], dirs: list[Path]) -> str:
    """Per model: the role map (its figure, the count of heads per primary role), the labelled
    word-relation heads in each reading with their scores per source and real-text support (or the
    bounded negative where a reading has none), each real source's best head against the strongest
    heuristic, and the smallest effect the run could label."""
    lines = [
        "## The maps: every head's primary role",
        "",
        "Each head's labelled roles other than the sink ranked by the ceiling-normalised effect "
        "(score - baseline) / (ceiling - baseline); the primary role is the first (see each report's "
        "map for the secondary roles and the sink layer). A relation names its reading: retrospective on "
        "the query word's own row, predictive on the row of the token before it (where a causal model "
        "predicts it). A head whose only labels are the sink's is a `sink writer` (its `attention_sink` "
        "label is confirmed by the norm lens: it writes from the sink), a `no-op sink` (by attention "
        "weight only: `noop_sink`, it moves almost nothing from there) or, without norm-lens rows, "
        "`idle (sink)`.",
        "",
    ]
    for d in dirs:
        df = heads[d.name]
        rmap = role_map(df)
        counts = rmap["primary"].astype(str).value_counts()
        lines += [f"### {d.name}", ""]
        if (d / "role_map.png").is_file():  # only what exists: a folder may hold heads.csv alone
            lines += [f"![{d.name} role map]({d.name}/role_map.png)", ""]
        lines += ["Primary roles: " + ", ".join(f"{r} {n}" for r, n in counts.items()) + ".", ""]
        lines += _relation_lines(df)
        power = detectable_effect(df)
        power = power[power["role"].isin(LINGUISTIC_ROLES)] if len(power) else power
        if len(power):
            lines.append(
                "- Smallest effect over baseline this run labels with 80% probability: "
                + "; ".join(
                    f"{r.role} {r.direction} {r.source}: {r.detectable_effect:.3f} (n={r.n})"
                    for r in power.itertuples()
                )
                + "."
            )
        lines += ["", "Real text, head vs strongest heuristic:", "", real_text_markdown(df), ""]
    return "\n".join(lines)


def _lens_validation_section(heads: dict[str, pd.DataFrame], val: dict[str, pd.DataFrame]) -> str:
    """Do boundary heads confirmed by norm-weighted attention validate more often than the ones
    labelled by attention weight only? One row per model, from the validation verdicts."""
    rows = []
    for name, v in val.items():
        df = heads.get(name)
        if df is None or not has_norm_rows(df):
            continue
        lab = labelled_roles(df)
        kinds = {}
        for r in lab.itertuples():
            if r.role == "noop_sink":
                kinds.setdefault((r.layer, r.head), "weight only")
            elif r.role in ("delimiter", "punctuation", "sep_eos"):
                kinds[(r.layer, r.head)] = "norm-confirmed"
        vb = v[v["role"].isin(["delimiter", "punctuation", "sep_eos"])]
        verdict = vb.groupby(["layer", "head"])["verdict"].apply(
            lambda s: "validated" if (s == "validated").any() else s.iloc[0]
        )
        for kind in ("norm-confirmed", "weight only"):
            hs = [h for h, k in kinds.items() if k == kind and h in verdict.index]
            ok = sum(verdict[h] == "validated" for h in hs)
            rows.append(
                {
                    "model": name,
                    "boundary heads": kind,
                    "validated": ok,
                    "of": len(hs),
                    "share": f"{ok / len(hs):.2f}" if hs else "-",
                }
            )
    if not rows:
        return ""
    return "\n".join(
        [
            "### Norm-confirmed against weight-only boundary heads",
            "",
            "Boundary heads (delimiter, punctuation, sep_eos) labelled by attention weight, split by "
            "whether the norm-weighted lens confirms them; how many of each validate causally.",
            "",
            md_table(pd.DataFrame(rows)),
        ]
    )


def _heads_list(d: pd.DataFrame, limit: int = 10) -> str:
    """ "L3H1 subject_verb (probe) 0.73 [0.33, 1.10], ..." for the first ``limit`` rows of a catalogue."""
    shown = [
        f"L{int(r.layer)}H{int(r.head)} {r.task} {r.effect:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}]"
        if pd.notna(r.effect)
        else f"L{int(r.layer)}H{int(r.head)} {r.task}"
        for r in d.head(limit).itertuples()
    ]
    more = f" and {len(d) - limit} more" if len(d) > limit else ""
    return (", ".join(shown) + more) if shown else "none"


def _catalogue_lines(cats: dict[str, ModelCatalogue], warnings: dict[str, str | None]) -> list[str]:
    """The verdicts per role across the models with a catalogue (``role_verdict_table``), then per
    model its provenance warning (``warnings``: ``catalogue_provenance``), its verdict counts per
    task, its mechanisms and disagreements."""
    table = role_verdict_table({name: c.table for name, c in cats.items()})
    lines = [
        "### Verdicts per role (the head catalogue)",
        "",
        "Head-task rows of each model's catalogue per labelled role (a head with two roles for a task counts under "
        "each); each cell: " + " / ".join(f"`{v}`" for v in ROLE_VERDICTS) + ". `(no label)`: the rows of heads "
        "without a label that the task tests (their `idle` and `quiet` rows are not counted); `-`: the model's "
        "catalogue names no head with the role.",
        "",
        md_table(table),
        "",
    ]
    for name, c in cats.items():
        t = c.table
        lines += [f"### {name} (catalogue)", ""]
        if warnings.get(name):
            lines += [f"> {warnings[name]}", ""]
        lines += [md_table(verdict_counts(t).reset_index()), ""]
        mech = t[t["verdict"] == "mechanism"].sort_values("effect", ascending=False)
        dis = disagreements(t)
        lines += [
            f"- Mechanisms ({len(mech)}): {_heads_list(mech)}.",
            f"- Pattern, no effect ({int((dis['verdict'] == 'pattern, no effect').sum())}): "
            f"{_heads_list(dis[dis['verdict'] == 'pattern, no effect'])}.",
            f"- Effect, no named pattern ({int((dis['verdict'] == 'effect, no named pattern').sum())}): "
            f"{_heads_list(dis[dis['verdict'] == 'effect, no named pattern'])}.",
            "",
        ]
    return lines


def _validation_section(
    frames: dict[str, pd.DataFrame],
    cats: dict[str, ModelCatalogue] | None = None,
    warnings: dict[str, str | None] | None = None,
) -> str:
    """Per model, the head catalogue's verdicts where its folder has one (``_catalogue_lines``),
    otherwise ``interp validate``'s (``frames``: validation.csv per model)."""
    cats = cats or {}
    lines = ["## Causal validation of the labels", ""]
    if cats:
        lines += [
            "Where a model folder holds the head catalogue (`interp catalogue`: every head patched on each task the "
            "model solves, its effect's 95% interval against the minimum effect, joined with the labels the task "
            "needs; docs/catalogue.md), the verdicts are the catalogue's"
            + (" and the folder's `validation/` is not read." if not frames else "; the other models' are below it."),
            "",
        ]
        lines += _catalogue_lines(cats, warnings or {})
    if frames:
        lines += [
            "Each labelled head is ablated (mean ablation) and the behaviour metric tied to its role is compared "
            "with ablating random heads (see each model's `validation/validation.md` for the decision rule).",
            "",
        ]
    for name, df in frames.items():
        counts = df.groupby(["role", "verdict"]).size().unstack(fill_value=0).reset_index()
        lines += [f"### {name}", ""]
        if df.attrs.get("warning"):
            lines += [f"> {df.attrs['warning']}", ""]
        lines += [md_table(counts), ""]
        ok = df[df.verdict == "validated"]
        if len(ok):
            heads = ", ".join(
                f"L{int(r.layer)}H{int(r.head)} {r.role} ({r.metric}: {r.effect:.3g}, p={r.p_value:.3g})"
                for r in ok.itertuples()
            )
            lines += [f"Validated: {heads}.", ""]
        if "q_value" in df:
            q = df[(df["q_value"] <= 0.05) & (df["verdict"] == "validated")]
            lines += [
                f"Validated with q <= 0.05 (Benjamini-Hochberg within each role over its 8 best labels by probe "
                f"score; null of {int(df['n_null'].max()) if 'n_null' in df and len(df) else 0} heads): "
                + (
                    ", ".join(f"L{int(r.layer)}H{int(r.head)} {r.role} (q={r.q_value:.3g})" for r in q.itertuples())
                    or "none"
                )
                + ".",
                "",
            ]
    return "\n".join(lines)


def summarise(out: Path, dest: Path | None = None) -> Path:
    """Read the per-model folders under ``out``; write summary.md and comparison.md into ``dest``
    (default ``out``; ``interp summary`` passes a staging folder). Returns the summary's path."""
    out = Path(out)
    dest = out if dest is None else Path(dest)
    # hidden folders are not models: a probe's staging folder (.NAME.*.interp-new) holds a heads.csv too
    dirs = model_dirs(out)
    if not dirs:
        raise FileNotFoundError(f"no <model>/heads.csv under {out}; run `interp probe --out {out}/<model>` first")
    heads = {d.name: read_heads(d / "heads.csv") for d in dirs}
    for name, df in heads.items():  # attrs do not survive the CSV: a bidirectional model has rows
        df.attrs["model"] = name  # scored in the subject->verb direction, a causal one never
        df.attrs["causal"] = not (df["direction"] == "subject->verb").any()
    comparison = write_comparison(heads, dest)
    lines = ["# Head-probing summary", ""]
    for d in dirs:
        lines.append(f"- **{d.name}**: {_links(d)}{_counts(heads[d.name])}")
    lines += ["", _maps_section(heads, dirs), ""]
    lines += ["", comparison.read_text().replace("# ", "## ", 1), ""]
    inv = [
        pd.read_csv(d / "invariance" / "invariance.csv") for d in dirs if (d / "invariance" / "invariance.csv").exists()
    ]
    if inv:
        lines += [invariance_section(pd.concat(inv, ignore_index=True)), ""]
    val, cats, warnings = {}, {}, {}
    for d in dirs:  # the catalogue where a folder has one, its validation/ otherwise (as the page reads them)
        cat = read_model_catalogue(d)
        if cat is not None:
            cats[d.name], warnings[d.name] = cat, catalogue_provenance(d)
        elif (d / "validation" / "validation.csv").exists():
            val[d.name] = pd.read_csv(d / "validation" / "validation.csv")
            val[d.name].attrs["warning"] = validation_provenance(d)
    if val or cats:
        lines += [_validation_section(val, cats, warnings), ""]
    if val:
        lines += [_lens_validation_section(heads, val), ""]
    text = "\n".join(lines)
    # a page that exists now or that `interp summary` renders next (every model folder gets one)
    links = "Interactive pages: " + ", ".join(f"[{d.name}]({d.name}/report.html)" for d in dirs) + ".\n\n"
    index = render_index(text.replace("\n", "\n\n" + links, 1) if "\n" in text else text, out)
    atomic_write(dest / "index.html", index)
    return atomic_write(dest / "summary.md", text)


def model_dirs(out: Path) -> list[Path]:
    """The per-model folders under ``out``: those with a heads.csv (hidden staging folders excluded)."""
    out = Path(out)
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if not p.name.startswith(".") and (p / "heads.csv").exists())


def model_pages(out: Path) -> dict[str, str]:
    """Each model's page rendered from its folder (probe, invariance, catalogue or validation):
    {folder: html}. The validation's provenance warning goes on the page too (the catalogue's is
    checked by ``page_from_folder``)."""
    pages = {}
    for d in model_dirs(out):
        shown = (d / "validation" / "validation.csv").exists() and not (d / "catalogue.csv").is_file()
        warning = validation_provenance(d) if shown else None
        pages[d.name] = page_from_folder(d, provenance=warning)
    return pages
