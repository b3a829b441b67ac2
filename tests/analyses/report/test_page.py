"""The report page's data and HTML (no browser): what it embeds round-trips, every labelled head has
its example patterns and they are the model's, markdown is rendered, nothing is fetched, the size
budget holds, and `interp summary` writes index.html and re-renders the model pages."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analyses import heads
from analyses.heads import report
from analyses.report import page
from tests.factories import planted_items, planted_model

SENTENCES = (
    heads.Sentence("near", ("the", "cat", "near", "the", "old", "box", "sleeps", "."), {"subject_verb": (6, 1)}),
    ("of", ("the", "dog", "of", "the", "car", "runs", ".")),
)


@pytest.fixture(scope="module")
def planted_page(tmp_path_factory):
    """The planted encoder (head 0: previous token, 1: '.', moving nothing from it, 2: verb -> subject,
    3: uniform), probed with both weightings, its report written and its page rendered."""
    m = planted_model("bidirectional", values=True)
    df = heads.probe_items(
        m, planted_items(60, seed=5), n_repeat=20, n_boot=30, null_model=False, weighting=("attention", "norm")
    )
    df["model"] = df.attrs["model"] = "planted"
    out = tmp_path_factory.mktemp("planted")
    examples = heads.example_patterns(m, df, sentences=SENTENCES, roles=["subject_verb"])
    report.write_report(df, out, examples=examples)
    validation = pd.DataFrame(
        {"layer": [0], "head": [2], "role": ["subject_verb"], "metric": ["sv"], "effect": [0.4], "p_value": [0.01]}
    ).assign(verdict="validated", n_items=8)
    html = page.render_page(
        df,
        sections=report.read_sections((out / "report.md").read_text()),
        figures={p.name: p.read_bytes() for p in out.glob("*.png")},
        examples=examples,
        validation=validation,
    )
    return m, df, examples, html


def test_head_table_round_trips(planted_page):
    """Every head's embedded scores are the headline rows of heads.csv (4 decimals), and its primary
    role is the role map's."""
    _, df, _, html = planted_page
    data = page.read_page_data(html)
    assert (data["n_layers"], data["n_heads"]) == (1, 4)
    emb = pd.DataFrame([{"layer": h["layer"], "head": h["head"], **s} for h in data["heads"] for s in h["scores"]])
    strata = emb[emb["role"].str.contains(" [", regex=False)]
    emb = emb[~emb["role"].str.endswith(" (norm)") & ~emb["role"].str.contains(" [", regex=False)]
    ref = heads.headline(df).dropna(subset=["score"])  # roles without items have no score to show
    merged = ref.merge(emb, on=["layer", "head", "role", "direction"], suffixes=("", "_page"), how="outer")
    assert len(merged) == len(ref) == len(emb)
    for col in ("score", "ci_low", "ci_high", "baseline"):
        np.testing.assert_allclose(merged[f"{col}_page"].astype(float), merged[col].round(4), atol=1e-9, err_msg=col)
    # each row's label is its own in heads.csv: a pooled row is descriptive (no label, no p) even
    # where a source row labels the head (headline's label says "some row of the head is labelled")
    key = ["layer", "head", "role", "direction", "source", "subset", "specials", "weighting"]
    own = merged[key].merge(df[[*key, "label", "p_adjusted"]], on=key, how="left", validate="1:1")
    assert (merged["label_page"].to_numpy() == own["label"].to_numpy()).all()
    pooled_sv = merged[
        (merged["role"] == "subject_verb") & (merged["head"] == 2) & (merged["direction"] == "verb->subject")
    ]
    assert len(pooled_sv) and not pooled_sv["label_page"].any() and pooled_sv["label"].all()
    assert pooled_sv["p_adjusted_page"].isna().all()  # no p: blank, and no "yes" beside it
    rmap = heads.role_map(df)
    assert [h["primary"] for h in data["heads"]] == list(rmap["primary"].astype(str))
    assert data["heads"][2]["primary"] == "subject_verb (retrospective)"  # the planted verb -> subject head
    assert data["verdicts"]["0,2"][0]["verdict"] == "validated"
    assert data["verdicts"]["0,2"][0]["n"] == 8  # the prompts the verdict rests on (shown beside it)
    # a label carried by a source or subset row shows that row too, with the p-value that labelled it
    lab = df[df["label"].astype(bool) & ((df["source"] != "all") | (df["subset"] != "all"))]
    if "weighting" in df:
        lab = lab[lab["weighting"] == "attention"]
    assert len(strata) == len(lab)
    for r in lab.itertuples():
        shown = strata[(strata["layer"] == r.layer) & (strata["head"] == r.head)]
        shown = shown[shown["role"] == f"{r.role} [{r.source} / {r.subset}]"]
        assert len(shown) == 1 and shown["label"].all()
        np.testing.assert_allclose(shown["p_adjusted"].astype(float), r.p_adjusted, rtol=1e-2)  # 3 digits


def test_every_labelled_head_has_its_examples_and_they_are_the_models(planted_page):
    _, df, examples, html = planted_page
    assert len(examples) == 1 and examples[0]["sentence"] == "the cat near the old box sleeps ."  # the figure
    data = page.read_page_data(html)
    by = {(h["layer"], h["head"]): h for h in data["heads"]}
    lab = heads.labelled_roles(df)[["layer", "head"]].drop_duplicates()
    assert len(lab) >= 3
    assert [s["name"] for s in data["examples"]] == ["near", "of"]
    for l, h in zip(lab["layer"], lab["head"]):
        ex = by[(int(l), int(h))]["examples"]
        assert set(ex) == {"attention", "norm"}, (l, h)
        assert all(len(ex[w]) == len(SENTENCES) for w in ex)
    toks = data["examples"][0]["tokens"]
    n = len(toks)
    att = {h: heads.dequantise(by[(0, h)]["examples"]["attention"][0], n) for h in range(4)}
    norm1 = heads.dequantise(by[(0, 1)]["examples"]["norm"][0], n)
    assert np.allclose(att[3].sum(1), 1, atol=n / 510)  # rows of attention sum to one (quantised)
    q = toks.index("sleeps")
    assert att[2][q, toks.index("cat")] > 0.99  # the verb's row on its subject
    assert all(att[0][i, i - 1] > 0.99 for i in range(1, n))  # the previous-token head
    dot = toks.index(".")
    # head 1 looks at '.' and moves nothing from it: all its weight there, none by the norm lens
    assert att[1][q, dot] > 0.99 and norm1[q, dot] < 0.01


def test_page_is_self_contained_and_renders_markdown(planted_page):
    _, df, _, html = planted_page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html) and "<link" not in html
    srcs = re.findall(r'src="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    # markdown is rendered: bold and code become tags, not literal asterisks and backticks
    assert "**One family per role**" not in html and "<strong>One family per role</strong>" in html
    assert "`subject_verb`" not in html and "<code>subject_verb</code>" in html
    # the labelled heads table: one row per label, the verdict joined to its head and role
    rows = re.findall(r'<tr data-role="([^"]+)" data-layer="(\d+)" data-verdict="([^"]+)"', html)
    assert len(rows) == len(heads.labelled_roles(df))
    assert ("subject_verb (retrospective)", "0", "validated") in rows  # an encoder's label: the verb's row
    assert all(v == "not tested" for r, l, v in rows if r != "subject_verb (retrospective)")


def test_explorer_repr_html_embeds_the_same_data(planted_page):
    m, df, _, _ = planted_page
    ex = page.HeadExplorer.build(df, m, sentences=SENTENCES)
    frag = ex._repr_html_()
    assert "<script>" in frag and 'class="hx-grid"' in frag and frag.count('class="hx-cell"') == 4
    assert page.read_page_data(frag) == ex.data
    assert "1 layers x 4 heads" in repr(ex)


def test_bad_heads_are_refused():
    m = planted_model("bidirectional")
    with pytest.raises(ValueError, match=r"outside the model's 1 layers x 4 heads"):
        heads.example_patterns(m, sentences=SENTENCES, heads=[(0, 7)])
    with pytest.raises(ValueError, match="sentences with words"):
        heads.example_patterns(m, sentences=())
    with pytest.raises(TypeError, match="sentences: expected a list"):
        heads.example_patterns(m, sentences="the cat sleeps .")


def test_summary_writes_index_and_model_pages(tmp_path, monkeypatch):
    """`interp summary` over a folder the probe wrote: index.html (the summary rendered, links to
    the model pages, figures inline) and the model's report.html re-rendered with its validation."""
    import models
    from analyses.cli import main

    m = planted_model("bidirectional", values=True)
    monkeypatch.setattr(models, "load", lambda name, **kw: m)
    import analyses.data

    monkeypatch.setattr(analyses.data, "load_items", lambda n, seed, sources, conllu, **kw: planted_items(n, seed))
    out = tmp_path / "out"
    args = ["probe", "--model", "planted", "--out", str(out / "planted"), "--n", "30", "--n-boot", "10", "--no-null"]
    assert main(args) == 0
    first = (out / "planted" / "report.html").read_text()
    assert "Not run for this page" in first and page.read_page_data(first)["examples"]
    val = heads.labelled_roles(pd.read_csv(out / "planted" / "heads.csv").fillna(""))[["layer", "head", "role"]]
    (out / "planted" / "validation").mkdir()
    val.assign(metric="m", effect=0.1, p_value=0.5, verdict="pattern only").to_csv(
        out / "planted" / "validation" / "validation.csv", index=False
    )
    assert main(["summary", "--out", str(out)]) == 0
    index = (out / "index.html").read_text()
    assert 'href="planted/report.html"' in index and "data:image/png;base64," in index
    assert "<h1>Head-probing summary</h1>" in index
    again = (out / "planted" / "report.html").read_text()
    assert "Not run for this page: <code>interp validate" not in again
    assert "does not record which heads.csv" in again  # the provenance warning travels with the page
    assert page.read_page_data(again)["verdicts"]


@pytest.mark.slow
def test_real_encoder_examples_cover_every_head_with_both_weightings(minilm):
    """MiniLM ([CLS] ... [SEP], bidirectional): every head has patterns on every built-in sentence,
    by attention weight and by the norm lens, with rows that sum to one. (The page's size is held
    on the larger SmolLM2 below; probing MiniLM for it too proved nothing more.)"""
    ex = heads.example_patterns(minilm).page()
    L, H = minilm.cfg.n_layers, minilm.cfg.n_heads
    assert len(ex["patterns"]) == L * H and len(ex["sentences"]) == len(heads.EXAMPLE_SENTENCES)
    assert ex["sentences"][0]["tokens"][0] == "[CLS]" and ex["sentences"][0]["tokens"][-1] == "[SEP]"
    for key, p in ex["patterns"].items():
        assert set(p) == {"attention", "norm"} and all(len(v) == len(ex["sentences"]) for v in p.values()), key
    n = len(ex["sentences"][1]["tokens"])
    w = heads.dequantise(ex["patterns"][f"{L - 1},{H - 1}"]["norm"][1], n)
    np.testing.assert_allclose(w.sum(1), 1, atol=n / 510)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2"])
def test_real_model_page_is_within_its_size_budget(name, request, tmp_path):
    """A real model's page (SmolLM2: 270 heads) with example patterns for every head, both
    weightings, and the probe's figures stays under SIZE_BUDGET (5 MB)."""
    from analyses.data import load_items

    model = request.getfixturevalue(name)
    df = heads.probe_items(
        model, load_items(n=3, seed=0), n_repeat=4, n_boot=10, null_model=False, weighting=("attention", "norm")
    )
    report.write_report(df, tmp_path)
    import json

    (tmp_path / "examples.json").write_text(json.dumps(heads.example_patterns(model).page()))
    path = page.write_page(tmp_path)
    size = path.stat().st_size
    data = page.read_page_data(path.read_text())
    L, H = model.cfg.n_layers, model.cfg.n_heads
    assert len(data["heads"]) == L * H and all(h["examples"] for h in data["heads"])
    assert size < page.SIZE_BUDGET, f"{name}: {size / 1e6:.2f} MB"


def _relative_links(text: str) -> set[str]:
    links = set(re.findall(r"""(?:href|src)=["']([^"'#]+)["']""", text)) | set(re.findall(r"\]\(([^)#]+)\)", text))
    return {x for x in links if not x.startswith(("data:", "http:", "https:"))}


def test_summary_over_a_folder_with_only_heads_csv_links_only_what_exists(planted_page, tmp_path, capsys):
    """Issue 24 (weak): no link to a report.md or a role map that is not there."""
    from analyses.cli import main

    _, df, _, _ = planted_page
    out = tmp_path / "out"
    report.write_csv(df, out / "planted" / "heads.csv")
    assert main(["summary", "--out", str(out)]) == 0
    for name in ("summary.md", "index.html"):
        links = _relative_links((out / name).read_text())
        assert "planted/report.html" in links, name
        assert all((out / link).is_file() for link in links), (name, links)


def test_summary_refuses_an_older_heads_csv_in_one_line(planted_page, tmp_path, capsys):
    """Issue 24 (weak): an older heads.csv schema gave a KeyError traceback."""
    from analyses.cli import main

    _, df, _, _ = planted_page
    out = tmp_path / "out"
    report.write_csv(df, out / "planted" / "heads.csv")
    old = pd.read_csv(out / "planted" / "heads.csv").drop(columns=["specials", "sd_diff"])
    old.to_csv(out / "planted" / "heads.csv", index=False)
    assert main(["summary", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("interp summary: ")
    assert "['specials', 'sd_diff']" in err and "interp probe --out" in err and "Traceback" not in err
    assert not (out / "index.html").exists()


def test_page_and_index_state_one_label_count(planted_page, tmp_path):
    """Issue 23: index.html said 575 labelled head-roles where the page said 576."""
    from analyses.cli import main

    _, df, _, _ = planted_page
    out = tmp_path / "out"
    report.write_csv(df, out / "planted" / "heads.csv")  # the counts need the table only
    assert main(["summary", "--out", str(out)]) == 0
    n_labels, n_head_roles = page.label_counts(df)
    lab = heads.labelled_roles(df)
    assert (n_labels, n_head_roles) == (len(lab), len(lab.drop_duplicates(["layer", "head", "role"])))
    said = f"{n_labels} labels on {n_head_roles} head-roles"
    assert said in (out / "index.html").read_text()
    html = (out / "planted" / "report.html").read_text()
    assert f"Labelled heads ({said})" in html
    assert len(re.findall(r'<tr data-role="', html)) == n_labels


def test_every_role_on_the_map_is_explained_on_the_page(planted_page):
    """Issue 23: noop_sink was explained nowhere on the page."""
    _, _, _, html = planted_page
    data = page.read_page_data(html)
    # the planted head 1 ('.' by weight, nothing by norm) is a noop_sink, so the map says it idles
    assert "no-op sink" in data["roles"]
    for role in [*data["roles"], "unclassified"]:
        assert data["role_text"][role] == report.ROLE_TEXT[role] and len(report.ROLE_TEXT[role]) > 20
        assert f"<code>{role}</code></dt><dd>{report.ROLE_TEXT[role]}" in html.replace("&#39;", "'")


def test_report_sections_round_trip_and_the_page_places_them_by_id(planted_page, tmp_path):
    """report.md is written from sections and read back as the same sections; the page places the
    map's text above the explorer by its id, whatever its heading says (no parsing of heading text)."""
    _, df, examples, _ = planted_page
    sections = report.report_sections(df, examples)
    assert report.read_sections(report.sections_markdown(sections)) == [
        report.Section(s.id, s.title, s.markdown.strip(), s.level) for s in sections
    ]
    renamed = [report.Section(s.id, "Renamed", "MAPTEXT here") if s.id == "map" else s for s in sections]
    html = page.render_page(df, sections=renamed, examples=examples)
    assert html.index("MAPTEXT here") < html.index('class="hx-root"') < html.index('id="method"')
    assert "Renamed" not in html  # the page's own heading for the map, not the section's
    # an older report.md (no section markers) still renders, under Data and method
    old = page.render_page(df, sections=report.read_sections("# T\n\n## Data\n\nOLDTEXT"), examples=examples)
    assert old.index('id="method"') < old.index("OLDTEXT")


def test_summary_covers_every_model_folder(tmp_path, monkeypatch):
    """Three model folders (as with MiniLM, SmolLM2 and Gemma 3): the index links every page and the
    summary's comparison has a column for every model."""
    import shutil

    import models
    from analyses.cli import main

    m = planted_model("causal", values=True)
    monkeypatch.setattr(models, "load", lambda name, **kw: m)
    import analyses.data

    monkeypatch.setattr(analyses.data, "load_items", lambda n, seed, sources, conllu, **kw: planted_items(n, seed))
    out = tmp_path / "out"
    args = ["probe", "--model", "planted", "--out", str(out / "a"), "--n", "30", "--n-boot", "10", "--no-null"]
    assert main(args) == 0
    for name in ("b", "c"):
        shutil.copytree(out / "a", out / name)
    assert main(["summary", "--out", str(out)]) == 0
    index, summary = (out / "index.html").read_text(), (out / "summary.md").read_text()
    for name in ("a", "b", "c"):
        assert f'href="{name}/report.html"' in index
        assert f"{name} heads" in summary, name
        assert (out / name / "report.html").exists()


def test_page_names_both_readings_and_shows_templates_only(tmp_path):
    """Issue 35: a planted table with predictive and retrospective labels renders both names in the
    labelled heads table, on the map (the explorer's primary roles and legend) and in the head detail's
    label column; "templates only" is visible beside the label it belongs to; the sink split's names are
    explained on the page. An old heads.csv (no reading, no real_text) renders as retrospective."""
    from html import unescape

    from tests.analyses.heads.planted_tables import planted_heads

    df = planted_heads()
    report.write_report(df, tmp_path)
    html = page.page_from_folder(tmp_path)
    data = page.read_page_data(html)
    names = ("subject_verb (predictive)", "subject_verb (retrospective)", "ioi (predictive)")
    for name in (*names, "sink writer", "no-op sink"):
        assert name in data["roles"], name
        assert f"<code>{name}</code></dt><dd>{report.ROLE_TEXT[name]}" in unescape(html), name
    rows = re.findall(r'<tr data-role="([^"]+)" data-layer="(\d+)" data-verdict="[^"]+">(.*?)</tr>', html)
    by_role = {(r, int(l)): cells for r, l, cells in rows}
    assert "<td>templates only</td>" in by_role[("subject_verb (predictive)", 0)]
    assert "<td>supported (spacy-silver)</td>" in by_role[("subject_verb (retrospective)", 1)]
    assert "<td>templates only</td>" in by_role[("ioi (predictive)", 1)]
    head = {(h["layer"], h["head"]): h for h in data["heads"]}
    assert head[(1, 1)]["primary"] == "subject_verb (retrospective)"
    assert head[(1, 1)]["secondary"] == "subject_verb (predictive)"
    labels = {s["direction"]: s["map_role"] for s in head[(1, 1)]["scores"] if s["label"]}
    assert labels == {"verb->subject": "subject_verb (retrospective)", "pre-verb->subject": "subject_verb (predictive)"}
    assert {"subject_verb (predictive)", "subject_verb (retrospective)"} <= set(data["role_scores"])
    assert "Real text: head vs strongest heuristic" in html
    # the same table from before labels v4: read (not refused), every relation label retrospective
    old = tmp_path / "old"
    old.mkdir()
    planted_heads(old=True).to_csv(old / "heads.csv", index=False)
    data = page.read_page_data(page.page_from_folder(old))
    assert {h["primary"] for h in data["heads"]} >= {"subject_verb (retrospective)", "sink writer", "no-op sink"}
    assert not {"subject_verb (predictive)", "ioi (predictive)"} & set(data["roles"])


def test_verdicts_join_by_reading():
    """A validation without a reading column tested the retrospective labels; one with it joins by it."""
    from tests.analyses.heads.planted_tables import planted_heads

    v4 = planted_heads()
    old_val = pd.DataFrame({"layer": [1], "head": [1], "role": ["subject_verb"], "verdict": ["validated"]})
    lab = page._labelled_rows(v4, old_val).set_index(["layer", "head", "role"])["verdict"]
    assert lab[(1, 1, "subject_verb (retrospective)")] == "validated"
    assert lab[(1, 1, "subject_verb (predictive)")] == "not tested"
    new_val = old_val.assign(reading="predictive")
    lab = page._labelled_rows(v4, new_val).set_index(["layer", "head", "role"])["verdict"]
    assert lab[(1, 1, "subject_verb (predictive)")] == "validated"
    assert lab[(1, 1, "subject_verb (retrospective)")] == "not tested"


def test_summary_names_readings_real_text_and_bounded_negatives(tmp_path):
    """summary.md: each relation in each reading with its heads and real-text support; a reading
    without a label as a bounded negative (issue 35: "no head above baseline + d at 80% power")."""
    from analyses.cli import main
    from analyses.heads import summaries
    from tests.analyses.heads.planted_tables import planted_heads

    out = tmp_path / "out"
    report.write_csv(planted_heads(), out / "planted" / "heads.csv")
    assert main(["summary", "--out", str(out)]) == 0
    text = (out / "summary.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("- `subject_verb (predictive)`: "))
    assert "L0H0 (pre-verb->subject, generated/all: 0.80 vs 0.30 (n=200), real text: templates only)" in line
    assert "L1H1 (pre-verb->subject" in line
    retro = "L1H1 (verb->subject, generated/all: 0.95 vs 0.30 (n=200), real text: supported (spacy-silver))."
    assert f"- `subject_verb (retrospective)`: {retro}" in text
    assert "- `ioi (predictive)`: L1H0 (final->indirect_object" in text
    read_back = page.read_heads(out / "planted" / "heads.csv")
    bound = summaries.no_label_bound(read_back, "anaphora", "retrospective")
    assert bound.startswith("no head above baseline + ") and f"- `anaphora (retrospective)`: {bound}." in text
    assert "no labelled head" not in text
    row = "| subject_verb | predictive | pre-verb->subject | spacy-silver / attractor, distance 3+ | L1H1 | 0.700 |"
    assert row in text
    assert "Primary roles: " in text and "sink writer 1" in text and "no-op sink 1" in text
