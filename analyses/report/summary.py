"""The main job's summary (``interp summary --out DIR``): one page over the main job's per-model folders.

Reads ``DIR/<model>/heads.csv`` (head roles), ``DIR/<model>/invariance/invariance.csv`` and
``DIR/<model>/validation/validation.csv`` for every model folder present, and writes
``DIR/comparison.md`` (which roles live in which layers of each model), ``DIR/summary.md``
(links to the full reports, the invariance section, the validation verdicts) and ``DIR/index.html``
(the same, rendered, figures inline: ``analyses.report.page.render_index``). Atomic writes.
``model_pages`` re-renders each ``DIR/<model>/report.html`` with its invariance and validation.

A validation records the SHA-256 of the heads.csv it tested (``validation/validation.json``); one
whose hash is not that of the current ``<model>/heads.csv`` (the probe was rerun since) is flagged
as out of date, and one without the record as unverifiable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analyses.heads.labels import has_norm_rows, label_names, labelled_roles, role_map
from analyses.heads.report import no_label_line, real_text_markdown
from analyses.heads.roles import LABEL_NAMES, LINGUISTIC_ROLES
from analyses.heads.summaries import detectable_effect, real_text
from analyses.invariance.report import invariance_section
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


def _validation_section(frames: dict[str, pd.DataFrame]) -> str:
    lines = [
        "## Causal validation of the labels",
        "",
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
    val = {}
    for d in dirs:
        if (d / "validation" / "validation.csv").exists():
            val[d.name] = pd.read_csv(d / "validation" / "validation.csv")
            val[d.name].attrs["warning"] = validation_provenance(d)
    if val:
        lines += [_validation_section(val), ""]
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
    """Each model's page rendered from its folder (probe, invariance, validation): {folder: html}.
    The validation's provenance warning goes on the page too."""
    pages = {}
    for d in model_dirs(out):
        warning = validation_provenance(d) if (d / "validation" / "validation.csv").exists() else None
        pages[d.name] = page_from_folder(d, provenance=warning)
    return pages
