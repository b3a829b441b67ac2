"""Head-probing report: files, schema, self-contained HTML, atomic writes, comparison."""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest

from analyses import heads
from analyses.heads import report
from tests.factories import planted_items, planted_model

# the planted vocabulary's sentences for the figures (the built-in ones have words it lacks)
PLANTED = (
    heads.Sentence("sv", ("the", "cat", "sleeps", "."), {"subject_verb": (2, 1)}),
    heads.Sentence("dot", ("the", "dog", "barks", "."), {"delimiter": (1, 3)}),
)


@pytest.fixture(scope="module")
def probed():
    out = {}
    for attention in ("bidirectional", "causal"):
        m = planted_model(attention)
        df = heads.probe_items(
            m, planted_items(60, seed=5), n_repeat=20, n_boot=30, null_model=False, weighting=("attention",)
        )
        df["model"] = df.attrs["model"] = f"planted-{attention}"
        out[attention] = (m, df)
    return out


@pytest.fixture(scope="module")
def written(probed, tmp_path_factory):
    m, df = probed["bidirectional"]
    examples = heads.example_patterns(m, df, PLANTED, roles=["subject_verb", "delimiter"])
    out = tmp_path_factory.mktemp("report")
    return out, report.write_report(df, out, examples=examples), examples


def test_report_files_and_csv_round_trip(probed, written):
    _, df = probed["bidirectional"]
    tmp_path, paths, _ = written
    for name in ("heads.csv", "report.md", "heatmaps.png", "pattern_subject_verb.png", "pattern_delimiter.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    back = pd.read_csv(paths["csv"])
    assert list(back.columns[: len(heads.COLUMNS)]) == heads.COLUMNS
    assert back["label"].dtype == bool
    np.testing.assert_allclose(back["score"], df["score"], rtol=1e-5)
    assert (back["label"] == df["label"]).all()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_md_lists_labels(probed, written):
    # report.html (the page) is rendered from these files: tests/analyses/report/
    _, df = probed["bidirectional"]
    tmp_path, _, examples = written
    md = (tmp_path / "report.md").read_text()
    assert len(re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", md)) == 4  # role map, heatmaps, two examples
    n_labels = int(df.label.sum())
    assert f"Labelled heads ({n_labels} labels)" in md
    assert "| 0 | 2 | subject_verb (retrospective) | verb->subject |" in md  # the planted head, its reading named
    assert "Holm" in md
    # the example: the row of 'sleeps' puts its weight on 'cat' in the planted head
    ex = examples[0]
    assert (ex["layer"], ex["head"]) == (0, 2) and ex["query_word"] == "sleeps"
    assert ex["pattern"][ex["row"], ex["col"]] > 0.99


def test_causal_example_has_an_empty_upper_triangle(probed):
    m, df = probed["causal"]
    ex = heads.example_patterns(m, df, PLANTED, roles=["subject_verb"])[0]
    p = np.asarray(ex["pattern"])
    assert ex["causal"] and np.all(np.triu(p, k=1) == 0) and p[ex["row"], ex["col"]] > 0.99


def test_csv_needs_the_stable_columns(probed, tmp_path):
    _, df = probed["bidirectional"]
    with pytest.raises(ValueError, match="p_value"):
        report.write_csv(df.drop(columns=["p_value"]), tmp_path / "heads.csv")


def test_comparison_counts_the_planted_heads(probed, tmp_path):
    """The planted model has one layer (relative depth 0): head 0 attends to the previous token,
    head 2 from the verb to the subject, head 1 to '.'. In the bidirectional model head 1 is the one
    delimiter head; in the causal one '.' ends the sentence, so no query before it can see it and
    no head is a delimiter. The comparison table must say so, read from the rendered text, not
    recomputed with the function's own arithmetic."""
    from analyses.report import compose

    dfs = {name: df for name, (_, df) in probed.items()}
    text = compose.write_comparison(dfs, tmp_path).read_text()
    header = next(line for line in text.splitlines() if line.startswith("| role |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols == ["role"] + [f"{m} {k}" for m in ("bidirectional", "causal") for k in ("heads", "depth", "layers")]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == len(cols) and cells[0] in heads.LABEL_NAMES:
            rows[cells[0]] = dict(zip(cols, cells))
    sv = "subject_verb (retrospective)"  # the planted head reads from the verb's own row
    planted = {"bidirectional": ("previous_token", sv, "delimiter"), "causal": ("previous_token", sv)}
    for model, roles in planted.items():
        for role in roles:
            assert rows[role][f"{model} heads"] == "1", (role, model, rows[role])
            assert rows[role][f"{model} layers"] == "0", (role, model, rows[role])
            assert rows[role][f"{model} depth"] == "0.00", (role, model, rows[role])
    for model in ("bidirectional", "causal"):
        ana = rows["anaphora (retrospective)"]
        assert ana[f"{model} heads"] == "0" and ana[f"{model} layers"] == "-"
    assert rows["delimiter"]["causal heads"] == "0"


def test_a_tall_role_map_has_no_blank_band_above_or_below():
    """Issue 23: a blank gap above the SmolLM2 map on index.html (margins were fractions of the
    figure's height, so 30 layers left about an inch of white above and below)."""
    import io

    import matplotlib.image as mpimg

    L, H = 30, 9
    roles = list(heads.MAP_ROLES[:6]) + ["unclassified"]
    heads_map = pd.DataFrame(
        [
            {"layer": l, "head": h, "primary": roles[(l * H + h) % len(roles)], "standardised": 3.0}
            for l in range(L)
            for h in range(H)
        ]
    )
    heads_map["primary"] = pd.Categorical(heads_map["primary"], [*heads.MAP_ROLES, "unclassified"])
    img = mpimg.imread(io.BytesIO(report.role_map_figure(heads_map, title="smollm2: primary role per head")))
    inked = np.nonzero((img[..., :3] < 0.95).any(axis=(1, 2)))[0]  # pixel rows with anything drawn
    dpi = 90  # interp.display.png_bytes
    assert inked[0] < 0.2 * dpi and img.shape[0] - inked[-1] < 0.2 * dpi, (inked[0], img.shape[0] - inked[-1])


def test_layer_type_table_counts_primary_roles_per_type():
    """Gemma 3's sliding and full layers: counts, shares and Fisher's p, checked by hand."""
    from scipy.stats import fisher_exact

    types = ["sliding", "sliding", "full"]  # layers 0, 1 sliding; layer 2 full; 2 heads each
    the_map = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1, 2, 2],
            "head": [0, 1, 0, 1, 0, 1],
            "primary": ["previous_token", "previous_token", "previous_token", "broad", "broad", "broad"],
        }
    )
    t = report.layer_type_table(the_map, types).set_index("primary role")
    assert t.loc["previous_token", "sliding heads (of 4)"] == "3 (75%)"
    assert t.loc["previous_token", "full heads (of 2)"] == "0 (0%)"
    assert t.loc["broad", "full heads (of 2)"] == "2 (100%)"
    assert t.loc["broad", "Fisher p"] == report.fmt(fisher_exact([[1, 3], [2, 0]])[1], 3)


def test_report_has_a_layer_type_section_only_for_mixed_layers(probed):
    _, df = probed["causal"]
    assert "layer-types" not in [s.id for s in report.report_sections(df)]
    n = int(df["layer"].max()) + 1  # the planted model's layers, then a copy of them as full layers
    mixed = pd.concat([df, df.assign(layer=df["layer"] + n)], ignore_index=True)
    mixed.attrs = dict(df.attrs, n_layers=2 * n, layer_types=["sliding"] * n + ["full"] * n)
    sections = {s.id: s for s in report.report_sections(mixed)}
    assert f"Layers {', '.join(str(l) for l in range(n, 2 * n))} attend to every earlier token" in (
        sections["layer-types"].markdown
    )
    assert "Fisher p" in sections["layer-types"].markdown


def test_report_names_both_readings_real_text_and_the_heuristic_table():
    """Issue 35: the labelled heads table and the map name the reading; "templates only" is shown
    beside a label without real-text support; the head-vs-heuristic table is per reading and source;
    MiniLM-style missing labels read as a bounded negative."""
    from tests.analyses.heads.planted_tables import planted_heads

    df = planted_heads()
    sections = {s.id: s.markdown for s in report.report_sections(df)}
    lab = sections["labelled"]
    row = next(line for line in lab.splitlines() if line.startswith("| 0 | 0 | subject_verb (predictive) |"))
    assert row.rstrip(" |").endswith("templates only")
    assert "| 1 | 1 | subject_verb (retrospective) | verb->subject |" in lab and "supported (spacy-silver)" in lab
    assert "| 1 | 0 | ioi (predictive) | final->indirect_object |" in lab
    the_map = sections["map-detail"]
    for name in ("subject_verb (predictive)", "subject_verb (retrospective)", "ioi (predictive)", "sink writer"):
        assert f"| {name} |" in the_map, name
    assert "no-op sink 1" in the_map and "sink writer 1" in the_map  # the primary-role counts
    real = sections["real-text"]
    row = "| subject_verb | retrospective | verb->subject | spacy-silver / attractor, distance 3+ | L1H1 | 0.950 |"
    assert row in real
    pred = next(line for line in real.splitlines() if "| predictive |" in line)
    assert "| nearest noun or pronoun | 0.860 | 48 | no |" in pred
    assert "`anaphora (retrospective)`: no head above baseline + " in sections["layers"]
    assert "at 80% power" in sections["layers"]
    assert "tested over **clusters**" in sections["method"] and "per-sentence test" not in sections["method"]


def test_heatmap_has_a_panel_per_reading():
    from analyses.heads import figures
    from tests.analyses.heads.planted_tables import planted_heads

    panels = figures._panels(heads.headline(planted_heads()), heads.ROLES)
    assert ("subject_verb", "retrospective") in panels and ("subject_verb", "predictive") in panels
    assert ("ioi", "predictive") in panels and ("previous_token", None) in panels
    old = figures._panels(heads.headline(planted_heads(old=True)), heads.ROLES)
    assert [p for p in old if p[0] == "subject_verb"] == [("subject_verb", "retrospective")]
    grid, lab = figures.role_grid(heads.headline(planted_heads()), "subject_verb", reading="predictive")
    assert lab[0, 0] and lab[1, 1] and not lab[1, 0] and grid[0, 0] == 0.80  # L0H0's pre-verb row


def test_the_sink_grid_numbers_are_not_red():
    """Issue 35: the sink grid's red numbers on dark grey could not be read; seaborn now picks black
    on light cells and white on dark ones."""
    import io

    import matplotlib.image as mpimg

    from tests.analyses.heads.planted_tables import planted_heads

    img = mpimg.imread(io.BytesIO(report.role_map_figure(heads.role_map(planted_heads()))))[..., :3]
    red = (img[..., 0] > 0.6) & (img[..., 1] < 0.35) & (img[..., 2] < 0.35)
    assert red.sum() == 0
