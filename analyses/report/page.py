"""The report a person opens: one self-contained, offline HTML page per model, and ``index.html``.

A model's page (``out/<model>/report.html``) has five sections: the head explorer over the
primary-role map, the labelled heads (a sortable table, filterable by role, layer and verdict), the
invariances, the causal validation, and the data and method. Everything is inline (styles, the
script in ``assets/``, the data as JSON, figures as base64 PNG): no CDN, no network, and it works
from ``file://``. Without JavaScript the grid, the tables and the figures still render; the script
adds the head detail (scores per role with baselines and intervals, validation verdicts, attention
on a few example sentences as a token matrix, by attention weight and by the norm lens), the
colour choice, sorting and filtering. Markdown (the probe's ``report.md``, the invariance and
validation sections) is rendered with markdown-it-py, never shown as source.

The page is a view of a model folder: ``page_from_folder(dir)`` reads ``heads.csv``, ``report.md``
and its figures, ``examples.json`` (the probe's example patterns), ``invariance/invariance.csv`` and
``validation/validation.md`` + ``.csv`` where present, so ``interp probe`` (which has the first
three) and ``interp summary`` (which runs after invariance and validation) render the same page.

Size: example patterns are stored for every head as uint8 (weight x 255, base64), 3-5 short
sentences, so SmolLM2's 270 heads x 4 sentences x 2 weightings take about 0.5 MB; scores are
rounded to 4 decimals. ``tests/analyses/report/test_page.py`` holds each page to ``SIZE_BUDGET``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "EXAMPLE_SENTENCES",
    "SIZE_BUDGET",
    "HeadExplorer",
    "head_examples",
    "page_data",
    "render_page",
    "page_from_folder",
    "write_page",
    "render_index",
    "render_markdown",
    "read_page_data",
]

SIZE_BUDGET = 5 * 1024 * 1024  # bytes per page (SmolLM2: 270 heads)

# Short sentences that exercise the roles: a subject-verb agreement across an attractor, a pronoun
# whose antecedent is not the nearest noun, boundaries and punctuation, and a repeated sequence
# (duplicate-token and induction heads). Words, so that every tokenizer aligns them.
EXAMPLE_SENTENCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("subject-verb", ("the", "keys", "to", "the", "old", "cabinet", "are", "on", "the", "table", ".")),
    ("anaphora", ("the", "doctor", "called", "the", "nurse", "because", "he", "was", "late", ".")),
    ("delimiters", ("the", "cat", "sleeps", ",", "and", "the", "dog", "barks", ".")),
    ("repeated", ("green", "river", "stones", "fall", "slowly", ";", "green", "river", "stones", "fall", "slowly")),
)

_MD = None


def render_markdown(text: str, heading_shift: int = 0) -> str:
    """Markdown (CommonMark with GitHub tables) to HTML with markdown-it-py; raw HTML in the text is
    escaped, not passed through. ``heading_shift`` demotes headings (## -> ### for 1)."""
    global _MD
    if _MD is None:
        from markdown_it import MarkdownIt

        _MD = MarkdownIt("commonmark", {"html": False}).enable("table")
    if heading_shift:
        text = re.sub(r"(?m)^(#{1,6}) ", lambda m: "#" * min(6, len(m.group(1)) + heading_shift) + " ", text)
    return _MD.render(text)


def _inline_images(page: str, base: Path | Mapping[str, bytes]) -> str:
    """Replace ``src="x.png"`` by a data URI of the PNG, read from ``base`` (a folder, or a mapping
    name -> bytes). An image that cannot be found keeps its (relative) src and its alt text."""

    def data(name: str) -> bytes | None:
        if isinstance(base, Mapping):
            return base.get(name)
        p = Path(base) / name
        return p.read_bytes() if p.is_file() else None

    def swap(m: re.Match) -> str:
        png = data(html.unescape(m.group(1)))
        return m.group(0) if png is None else f'src="data:image/png;base64,{base64.b64encode(png).decode()}"'

    return re.sub(r'src="([^":]+\.png)"', swap, page)


def _asset(name: str) -> str:
    return resources.files("analyses.report").joinpath("assets", name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# Example patterns (from the model)


def _quantise(p: np.ndarray) -> str:
    """Weights in [0, 1] as base64 uint8 (255 = 1): a quarter of float32's size, and 1/255 is finer
    than a colour scale shows."""
    q = np.clip(np.rint(np.asarray(p, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    return base64.b64encode(q.tobytes()).decode("ascii")


def dequantise(b64: str, n: int) -> np.ndarray:
    """The [n, n] weights of ``_quantise`` (to within 1/510)."""
    return np.frombuffer(base64.b64decode(b64), dtype=np.uint8).reshape(n, n).astype(np.float64) / 255.0


def head_examples(
    model,
    sentences: Sequence[tuple[str, Sequence[str]]] = EXAMPLE_SENTENCES,
    heads: Sequence[tuple[int, int]] | None = None,
    tokenizer=None,
) -> dict:
    """Every head's attention on a few example sentences (one forward each), by attention weight and,
    where the model exposes ``attn.hook_v`` and ``W_O``, by the norm lens (Kobayashi et al. 2020:
    a_ij ||v_j W_O||, renormalised per row, as the probe's ``weighting = norm``).

    Returns a JSON-ready dict: ``sentences`` [{name, text, tokens}] and ``patterns``
    {"layer,head": {"attention": [base64 uint8 [n, n] per sentence], "norm": [...]}} for ``heads``
    (default: all)."""
    import torch

    from analyses.heads.probe import adapt
    from analyses.heads.scoring import norm_weighted, value_norms
    from interp.names import act_name

    if not sentences:
        raise ValueError("head_examples needs at least one sentence, e.g. EXAMPLE_SENTENCES")
    adapter = adapt(model, tokenizer)
    L, H = adapter.n_layers, adapter.n_heads
    wanted = [(l, h) for l in range(L) for h in range(H)] if heads is None else [(int(l), int(h)) for l, h in heads]
    bad = [(l, h) for l, h in wanted if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"heads {bad[:3]} are outside the model's {L} layers x {H} heads")
    w_o = {l: adapter.output_weights(l) for l in range(L)}
    if any(w is None for w in w_o.values()):
        w_o = None  # no output weights: attention weight only
    hook_names = set(getattr(adapter.model, "hook_dict", {}) or {})
    if w_o is not None and any(act_name(l, "attn.hook_v") not in hook_names for l in range(L)):
        w_o = None
    out_sent, patterns = [], {f"{l},{h}": {"attention": []} for l, h in wanted}
    if w_o is not None:
        for v in patterns.values():
            v["norm"] = []
    for name, words in sentences:
        batch = adapter.tokenizer.words([list(words)])
        if adapter.n_ctx and batch.input_ids.shape[1] > adapter.n_ctx:
            continue  # longer than the model's context: not an example for it
        got: dict[str, torch.Tensor] = {}

        def keep(t, hook):
            got[hook.name] = t.detach().float().cpu()

        hooks = [(adapter.hook_name(l), keep) for l in range(L)]
        if w_o is not None:
            hooks += [(act_name(l, "attn.hook_v"), keep) for l in range(L)]
        with torch.inference_mode():
            adapter.forward(batch, hooks)
        n = int(batch.attention_mask[0].sum())
        out_sent.append(
            {"name": name, "text": " ".join(words), "tokens": [str(t).replace("Ġ", "_") for t in batch.tokens[0][:n]]}
        )
        for l in sorted({l for l, _ in wanted}):
            p = got[adapter.hook_name(l)][:, :, :n, :n]  # [1, head, query, key]
            normed = None
            if w_o is not None:
                v = got[act_name(l, "attn.hook_v")][:, :n]
                normed = norm_weighted(p, value_norms(v, w_o[l]))[0].numpy()
            for ll, h in wanted:
                if ll != l:
                    continue
                patterns[f"{l},{h}"]["attention"].append(_quantise(p[0, h].numpy()))
                if normed is not None:
                    patterns[f"{l},{h}"]["norm"].append(_quantise(normed[h]))
    return {"sentences": out_sent, "patterns": patterns}


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


def role_colours(roles: Sequence[str]) -> dict[str, str]:
    """The role map's colours (``role_map_figure``: tab20 in role order, unclassified light grey)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["tab20"]
    out = {r: to_hex(cmap(i % 20)) for i, r in enumerate(roles)}
    out["unclassified"] = "#ededed"
    return out


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
                "reason": "" if pd.isna(getattr(r, "reason", None)) else str(r.reason),
            }
        )
    return out


SCORE_FIELDS = ("role", "direction", "score", "ci_low", "ci_high", "baseline", "baseline_kind", "null_score")
TEXT_FIELDS = ("role", "direction", "baseline_kind")


def page_data(
    df: pd.DataFrame, examples: dict | None = None, validation: pd.DataFrame | None = None, model: str | None = None
) -> dict:
    """What the explorer embeds (JSON-ready): the model's shape, the role colours, one record per
    head (primary role, standardised effect, secondary roles, its scores: the headline row per role
    and direction, plus the norm-lens row of the boundary roles where there is one), the per-role
    score grids, the validation verdicts per head, and the example patterns."""
    from analyses.heads.probe import headline, role_map
    from analyses.heads.roles import MAP_ROLES, NORM_LABEL_ROLES

    if df.empty:
        raise ValueError("page_data: the heads table is empty; pass the probe's table (heads.csv)")
    model = model or str(df.attrs.get("model") or df["model"].iloc[0])
    rmap = role_map(df)
    L, H = int(rmap["layer"].max()) + 1, int(rmap["head"].max()) + 1
    head = headline(df)
    rows = [head.assign(_w="attention")]
    if "weighting" in df and (df["weighting"] == "norm").any():
        norm = df[
            (df["weighting"] == "norm")
            & (df["source"] == "all")
            & (df["subset"] == "all")
            & df["role"].isin([*NORM_LABEL_ROLES, "attention_sink"])
        ]
        rows.append(norm.assign(role=norm["role"] + " (norm)", _w="norm"))
    # the labelled rows behind a headline label that are not the pooled row themselves (a source or a
    # subset, e.g. spaCy-silver arcs, antecedent=other): their p-value is the one that labelled the head
    strata = df[df["label"].astype(bool) & ((df["source"] != "all") | (df["subset"] != "all"))]
    if "weighting" in df:
        strata = strata[strata["weighting"] == "attention"]
    if len(strata):
        where = " [" + strata["source"].astype(str) + " / " + strata["subset"].astype(str) + "]"
        rows.append(strata.assign(role=strata["role"] + where, _w="stratum"))
    scores = pd.concat(rows, ignore_index=True)
    scores = scores[scores["score"].notna()]  # roles without data (no items of that relation) say nothing
    scores = scores.sort_values(["label", "score"], ascending=[False, False], kind="stable")  # labels first
    by_head = {k: g for k, g in scores.groupby(["layer", "head"], sort=False)}
    pats = (examples or {}).get("patterns", {})
    records = []
    for r in rmap.itertuples():
        g = by_head.get((r.layer, r.head), scores.iloc[:0])
        records.append(
            {
                "layer": int(r.layer),
                "head": int(r.head),
                "primary": str(r.primary),
                "standardised": _num(r.standardised, 2),
                "secondary": str(r.secondary or ""),
                "scores": [
                    {
                        **{k: (str(getattr(s, k)) if k in TEXT_FIELDS else _num(getattr(s, k))) for k in SCORE_FIELDS},
                        # 3 significant digits: a p of 1.5e-8 must not read 0
                        "p_adjusted": None if _num(s.p_adjusted) is None else float(f"{float(s.p_adjusted):.3g}"),
                        "label": bool(s.label),
                    }
                    for s in g.itertuples()
                ],
                "examples": pats.get(f"{int(r.layer)},{int(r.head)}"),
            }
        )
    grids = {}
    for role, g in head.groupby("role", sort=False):
        best = g.groupby(["layer", "head"])["score"].max()
        grid = [[None] * H for _ in range(L)]
        for (l, h), v in best.items():
            grid[int(l)][int(h)] = _num(v, 3)
        grids[str(role)] = grid
    return {
        "model": model,
        "n_layers": L,
        "n_heads": H,
        "causal": bool(df.attrs.get("causal", not (df["direction"] == "subject->verb").any())),
        "roles": [r for r in MAP_ROLES if r in set(rmap["primary"].astype(str))],
        "colours": role_colours([*MAP_ROLES]),
        "heads": records,
        "role_scores": grids,
        "verdicts": _verdicts(validation),
        "has_validation": validation is not None,
        "examples": (examples or {}).get("sentences", []),
    }


def read_page_data(page: str) -> dict:
    """The JSON a page (or an explorer fragment) embeds: the inverse of ``render_page``'s embedding."""
    m = re.search(r'<script type="application/json" class="hx-data"[^>]*>(.*?)</script>', page, re.S)
    if not m:
        raise ValueError("no explorer data in this page (expected <script type='application/json' class='hx-data'>)")
    return json.loads(m.group(1).replace("<\\/", "</"))


def _json_script(data: dict) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" class="hx-data">{text}</script>'


# --------------------------------------------------------------------------------------------------
# HTML pieces


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def explorer_html(data: dict) -> str:
    """The head explorer: a layer x head grid coloured by primary role (plain HTML: readable without
    JavaScript), the colour choice and the detail panel (shown by the script)."""
    L, H = data["n_layers"], data["n_heads"]
    by = {(h["layer"], h["head"]): h for h in data["heads"]}
    uid = "hx-" + hashlib.sha1(json.dumps([data["model"], L, H]).encode()).hexdigest()[:8]
    opts = "".join(f'<option value="{_e(r)}">{_e(r)} score</option>' for r in data["role_scores"])
    rows = ["<tr><th></th>" + "".join(f"<th>{h}</th>" for h in range(H)) + "</tr>"]
    for l in range(L):
        cells = []
        for h in range(H):
            rec = by.get((l, h))
            if rec is None:
                cells.append("<td></td>")
                continue
            colour = data["colours"].get(rec["primary"], "#ededed")
            num = "" if rec["standardised"] is None else f"{rec['standardised']:.0f}"
            title = f"L{l}H{h}: {rec['primary']}" + (f" (also {rec['secondary']})" if rec["secondary"] else "")
            cells.append(
                f'<td class="hx-cell" data-layer="{l}" data-head="{h}" title="{_e(title)}" '
                f'style="background:{colour}">{num}</td>'
            )
        rows.append(f"<tr><th>{l}</th>" + "".join(cells) + "</tr>")
    legend = "".join(
        f'<span><i style="background:{data["colours"][r]}"></i>{_e(r)}</span>' for r in [*data["roles"], "unclassified"]
    )
    return (
        f'<div class="hx-root" id="{uid}">'
        + _json_script(data)
        + '<div class="hx-controls" hidden><label>colour: <select class="hx-colour">'
        + f'<option value="primary">primary role</option>{opts}</select></label>'
        + '<span class="hx-note">click a head for its detail</span></div>'
        + '<div class="hx-layout"><div><table class="hx-grid"><caption class="hx-note">rows: layer, columns: head; '
        + "number: standardised effect of the primary role</caption>"
        + "".join(rows)
        + f'</table><div class="hx-legend">{legend}</div></div>'
        + '<div class="hx-detail" hidden><p class="hx-note">Click a head in the grid.</p></div></div>'
        + "<noscript><p class='hx-note'>JavaScript is off: the grid and the tables are complete; turn it on to "
        + "open a head's detail (its scores, verdicts and attention patterns).</p></noscript></div>"
    )


def _labelled_rows(df: pd.DataFrame, validation: pd.DataFrame | None) -> pd.DataFrame:
    """One row per label (the map's role names: a boundary head by weight only is ``noop_sink``)
    with its validation verdict ("not tested" when the validation has no row for it)."""
    from analyses.heads.probe import labelled_roles
    from analyses.heads.roles import MAP_ROLES

    lab = labelled_roles(df) if "family" in df else df[df["label"]].copy()
    lab = lab.copy()
    lab["role"] = pd.Categorical(lab["role"], MAP_ROLES, ordered=True)
    lab = lab.sort_values(["role", "layer", "head", "score"], ascending=[True, True, True, False])
    lab["role"] = lab["role"].astype(str)
    verdict = {}
    if validation is not None and not validation.empty:
        verdict = {(int(r.layer), int(r.head), str(r.role)): str(r.verdict) for r in validation.itertuples()}
    lab["verdict"] = [
        verdict.get((int(l), int(h), r), "not tested" if verdict else "not run")
        for l, h, r in zip(lab["layer"], lab["head"], lab["role"])
    ]
    return lab.reset_index(drop=True)


def heads_table_html(lab: pd.DataFrame, uid: str) -> str:
    """The labelled heads as a plain HTML table (complete without JavaScript) with the filter form the
    script shows and wires (role, layer, verdict) and sortable columns."""
    from interp.io import fmt

    def f3(x) -> str:
        return fmt(x, 3, fixed=True)

    cols = ["layer", "head", "role", "direction", "source", "metric", "score", "95% CI", "baseline", "null"]
    cols += ["p (Holm)", "n", "verdict"]
    body = []
    for r in lab.itertuples():
        src = r.source + (f" / {r.subset}" if r.subset != "all" else "")
        cells = [
            (r.layer, r.layer),
            (r.head, r.head),
            (r.role, None),
            (r.direction, None),
            (src, None),
            (r.metric, None),
            (f3(r.score), r.score),
            (f"[{f3(r.ci_low)}, {f3(r.ci_high)}]", r.ci_low),
            (f"{f3(r.baseline)} ({r.baseline_kind})", r.baseline),
            (f3(r.null_score), r.null_score),
            (f"{r.p_adjusted:.1e}", r.p_adjusted),
            (r.n, r.n),
            (r.verdict, None),
        ]
        tds = "".join(
            f'<td data-v="{float(v):.6g}">{_e(t)}</td>' if _num(v) is not None else f"<td>{_e(t)}</td>"
            for t, v in cells
        )
        body.append(
            f'<tr data-role="{_e(r.role)}" data-layer="{int(r.layer)}" data-verdict="{_e(r.verdict)}">{tds}</tr>'
        )

    def select(name: str, values) -> str:
        opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
        return f'<label>{name}: <select name="{name}"><option value="">all</option>{opts}</select></label> '

    form = (
        f'<form class="hx-filters" id="{uid}-filters" hidden onsubmit="return false">'
        + select("role", list(dict.fromkeys(lab["role"])))
        + select("layer", sorted({int(x) for x in lab["layer"]}))
        + select("verdict", sorted(set(lab["verdict"])))
        + '<span class="hx-count hx-note"></span></form>'
    )
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    return (
        form
        + f'<div class="hx-scroll"><table class="hx-sortable hx-heads" data-filters="{uid}-filters">'
        + f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        + ("" if body else "<p><i>(no labelled heads)</i></p>")
    )


def _split_sections(md: str) -> dict[str, str]:
    """report.md's '## ' sections by title (the text before the first one under '')."""
    out: dict[str, str] = {}
    title, buf = "", []
    for line in md.splitlines():
        if line.startswith("## "):
            out[title] = "\n".join(buf)
            title, buf = line[3:].strip(), []
        else:
            buf.append(line)
    out[title] = "\n".join(buf)
    return out


@dataclass
class HeadExplorer:
    """The head explorer of one probed model, for a notebook: ``HeadExplorer.build(df, model)`` and
    display it (``_repr_html_``: the grid, the head detail and its attention patterns, inline; the
    styles and the script travel with it, so it works in an exported notebook too)."""

    data: dict = field(repr=False)

    @classmethod
    def build(cls, df: pd.DataFrame, model=None, validation: pd.DataFrame | None = None, **kwargs) -> HeadExplorer:
        """From a heads table (``probe_items``) and, to show patterns, the model it was probed on
        (``kwargs`` go to ``head_examples``: sentences, heads, tokenizer)."""
        examples = head_examples(model, **kwargs) if model is not None else None
        return cls(page_data(df, examples=examples, validation=validation))

    def _repr_html_(self) -> str:
        return f"<style>{_asset('page.css')}</style>{explorer_html(self.data)}<script>{_asset('explorer.js')}</script>"

    def __repr__(self) -> str:
        return f"HeadExplorer({self.data['model']}: {self.data['n_layers']} layers x {self.data['n_heads']} heads)"


def render_page(
    df: pd.DataFrame,
    report_md: str = "",
    figures: Mapping[str, bytes] | None = None,
    examples: dict | None = None,
    invariance: pd.DataFrame | None = None,
    validation: pd.DataFrame | None = None,
    validation_md: str | None = None,
    validation_warning: str | None = None,
    model: str | None = None,
) -> str:
    """One model's page as a string (see the module docstring). ``report_md``: the probe's
    report.md, whose figures (``![..](x.png)``) are inlined from ``figures`` (name -> PNG bytes)."""
    from analyses.invariance.report import invariance_section

    data = page_data(df, examples=examples, validation=validation, model=model)
    name = data["model"]
    uid = "hx-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    sections = _split_sections(report_md)
    title_m = re.search(r"(?m)^# (.+)$", sections.get("", ""))
    title = title_m.group(1) if title_m else f"Head roles of {name}"
    intro = re.sub(r"(?m)^# .+$", "", sections.get("", "")).strip()
    map_key = next((k for k in sections if k.startswith("The map")), None)
    lab_key = next((k for k in sections if k.startswith("Labelled heads")), None)
    lab = _labelled_rows(df, validation)

    parts = [f"<h1>{_e(title)}</h1>", render_markdown(intro)]
    parts += ["<h2 id='map'>The map and the head explorer</h2>"]
    if map_key:  # its text above the explorer; its figure and table (the same map, static) folded below
        text, _, rest = sections[map_key].partition("![")
        parts.append(render_markdown(text))
    parts.append(explorer_html(data))
    if map_key and rest:
        parts.append(
            "<details><summary>The map as a figure and a table</summary>" + render_markdown("![" + rest) + "</details>"
        )
    parts += [f"<h2 id='heads'>Labelled heads ({len(lab)} labels)</h2>", heads_table_html(lab, uid)]
    parts.append("<h2 id='invariances'>Invariances</h2>")
    if invariance is not None and not invariance.empty:
        parts.append(render_markdown(invariance_section(invariance, heading_level=3).split("\n", 1)[1]))
    else:
        parts.append(
            "<p>Not run for this page: <code>interp invariance --out &lt;this folder&gt;/invariance</code>, "
            "then <code>interp summary</code> on the parent folder, adds them.</p>"
        )
    parts.append("<h2 id='validation'>Causal validation</h2>")
    if validation_warning:
        parts.append("<blockquote>" + render_markdown(validation_warning) + "</blockquote>")
    if validation_md:
        body = re.sub(r"(?m)\A## .*\n", "", validation_md)
        parts.append(render_markdown(body, heading_shift=1))
    elif validation is not None:
        from interp.io import md_table

        parts.append(render_markdown(md_table(validation)))
    else:
        parts.append(
            "<p>Not run for this page: <code>interp validate --labels &lt;this folder&gt;/heads.csv --out "
            "&lt;this folder&gt;/validation</code>, then <code>interp summary</code> on the parent folder, "
            "adds it.</p>"
        )
    parts.append("<h2 id='method'>Data and method</h2>")
    for key, text in sections.items():
        if key in ("", map_key, lab_key):
            continue
        parts.append(render_markdown(f"### {key}\n\n{text}"))
    body = _inline_images("\n".join(parts), figures or {})
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_asset('page.css')}</style></head><body>{body}"
        f"<script>{_asset('explorer.js')}</script></body></html>"
    )


def _read_heads(path: Path) -> pd.DataFrame:
    """A heads.csv as the probe wrote it: empty text cells stay empty strings, not NaN."""
    df = pd.read_csv(path)
    for col in ("family", "specials", "source", "subset", "weighting", "baseline_kind", "direction"):
        if col in df:
            df[col] = df[col].fillna("").astype(str)
    return df


def page_from_folder(model_dir: str | Path, provenance: str | None = None) -> str:
    """Render ``model_dir``'s page from its files (``heads.csv`` is required; ``report.md``, its PNG
    figures, ``examples.json``, ``invariance/invariance.csv`` and ``validation/`` are used where
    present). ``provenance``: a warning about the validation (``summary.validation_provenance``)."""
    d = Path(model_dir)
    if not (d / "heads.csv").is_file():
        raise FileNotFoundError(
            f"{d}/heads.csv not found: a model page needs the probe's output (interp probe --out {d})"
        )
    df = _read_heads(d / "heads.csv")
    name = str(df["model"].iloc[0]) if "model" in df and len(df) else d.name  # d may be a staging folder
    df.attrs["model"] = name
    df.attrs["causal"] = not (df["direction"] == "subject->verb").any()
    md = (d / "report.md").read_text(encoding="utf-8") if (d / "report.md").is_file() else ""
    figures = {p.name: p.read_bytes() for p in d.glob("*.png")}
    ex_path = d / "examples.json"
    examples = json.loads(ex_path.read_text(encoding="utf-8")) if ex_path.is_file() else None
    inv_path = d / "invariance" / "invariance.csv"
    inv = pd.read_csv(inv_path) if inv_path.is_file() else None
    val_path = d / "validation" / "validation.csv"
    val = pd.read_csv(val_path) if val_path.is_file() else None
    val_md_path = d / "validation" / "validation.md"
    val_md = val_md_path.read_text(encoding="utf-8") if val_md_path.is_file() else None
    return render_page(
        df,
        report_md=md,
        figures=figures,
        examples=examples,
        invariance=inv,
        validation=val,
        validation_md=val_md,
        validation_warning=provenance if val is not None else None,
        model=name,
    )


def write_page(model_dir: str | Path, dest: str | Path | None = None, provenance: str | None = None) -> Path:
    """``page_from_folder(model_dir)`` written atomically to ``dest`` (a folder; default
    ``model_dir``) as ``report.html``."""
    from interp.io import atomic_write

    return atomic_write(Path(dest or model_dir) / "report.html", page_from_folder(model_dir, provenance))


def render_index(summary_md: str, base: str | Path, title: str = "Head-probing summary") -> str:
    """``out/index.html``: the summary (``summary.md``) rendered, its figures inlined from ``base``
    (links to each model's ``report.html`` stay relative, so the folder can move as a whole)."""
    body = _inline_images(render_markdown(summary_md), Path(base))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_asset('page.css')}</style></head><body>{body}</body></html>"
    )
