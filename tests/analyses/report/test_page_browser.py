"""The report page in a real browser: Debian's Chromium, headless, driven by Playwright for Python
(launched with ``executable_path``; no browser is ever downloaded). Clicks a head, checks its detail
and pattern, hovers a token, filters and sorts the heads table, reads the page with JavaScript off,
and fails on any console error. Screenshots go to pytest's tmp folder, or to
``$INTERP_TEST_ARTIFACTS`` when set.

A missing browser skips these tests, except under ``CI=true``, where it fails them:
``scripts/test.sh`` installs Chromium (apt) when it is missing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from analyses import heads
from analyses.heads import report
from analyses.report import page
from tests.factories import planted_items, planted_model


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    """The planted encoder's page, written as `interp probe` writes it (report, examples, page)."""

    m = planted_model("bidirectional", values=True)
    df = heads.probe_items(
        m, planted_items(40, seed=5), n_repeat=10, n_boot=20, null_model=False, weighting=("attention", "norm")
    )
    df["model"] = df.attrs["model"] = "planted"
    out = tmp_path_factory.mktemp("page")
    report.write_report(df, out)
    sentences = (("near", ("the", "cat", "near", "the", "old", "box", "sleeps", ".")),)
    (out / "examples.json").write_text(json.dumps(heads.example_patterns(m, sentences=sentences).page()))
    return page.write_page(out)


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("INTERP_TEST_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _open(browser, path: Path, js: bool = True):
    ctx = browser.new_context(java_script_enabled=js, viewport={"width": 1280, "height": 1000})
    tab = ctx.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("request", lambda r: errors.append(f"request {r.url}") if not r.url.startswith(("file:", "data:")) else None)
    tab.goto(path.as_uri())
    return ctx, tab, errors


def test_click_a_head_shows_its_detail_and_pattern(browser, page_file, tmp_path):
    ctx, tab, errors = _open(browser, page_file)
    try:
        tab.click('td.hx-cell[data-layer="0"][data-head="2"]')
        title = tab.locator(".hx-detail h3.hx-title")
        assert title.get_attribute("data-layer") == "0" and title.get_attribute("data-head") == "2"
        assert "L0H2" in title.inner_text() and "subject_verb" in title.inner_text()
        cells = tab.locator("table.hx-matrix td")
        n_tok = tab.locator("table.hx-matrix th.hx-row").count()
        assert n_tok > 3 and cells.count() == n_tok * n_tok
        weights = [float(w) for w in tab.eval_on_selector_all("table.hx-matrix td", "es => es.map(e => e.dataset.w)")]
        assert sum(w > 0 for w in weights) >= n_tok and max(weights) > 0.9  # a real, non-empty pattern
        # hovering a token's row highlights that row
        tab.hover("table.hx-matrix tr[data-query='2'] th")
        assert tab.locator("table.hx-matrix tr.hx-hover").get_attribute("data-query") == "2"
        # the norm lens: another matrix for the same head
        tab.click("button[data-weighting='norm']")
        assert tab.locator(".hx-detail h3.hx-title").get_attribute("data-head") == "2"
        assert tab.locator("table.hx-matrix td").count() == n_tok * n_tok
        # colour by a role's score recolours the grid
        before = tab.locator('td.hx-cell[data-layer="0"][data-head="0"]').evaluate("e => e.style.background")
        tab.select_option("select.hx-colour", "previous_token")
        after = tab.locator('td.hx-cell[data-layer="0"][data-head="0"]').evaluate("e => e.style.background")
        assert before != after
        tab.screenshot(path=str(_shots(tmp_path) / "report_planted_head.png"), full_page=True)
        assert (_shots(tmp_path) / "report_planted_head.png").stat().st_size > 10_000
        assert errors == []
    finally:
        ctx.close()


def test_heads_table_filters_and_sorts(browser, page_file):
    ctx, tab, errors = _open(browser, page_file)
    try:
        rows = tab.locator("table.hx-heads tbody tr")
        n = rows.count()
        roles = tab.eval_on_selector_all("table.hx-heads tbody tr", "rs => rs.map(r => r.dataset.role)")
        sv = "subject_verb (retrospective)"  # the label's name: the reading named (an encoder's: the verb's row)
        assert n >= 3 and sv in roles
        tab.select_option("form.hx-filters select[name='role']", sv)
        visible = tab.eval_on_selector_all(
            "table.hx-heads tbody tr", "rs => rs.filter(r => !r.hidden).map(r => r.dataset.role)"
        )
        assert visible and set(visible) == {sv} and len(visible) == roles.count(sv)
        assert tab.locator(".hx-count").inner_text() == f"{len(visible)} of {n} rows"
        tab.select_option("form.hx-filters select[name='role']", "")
        tab.locator("table.hx-heads th", has_text="score").first.click()  # ascending
        scores = [
            float(s)
            for s in tab.eval_on_selector_all(
                "table.hx-heads tbody tr td:nth-child(7)", "es => es.map(e => e.dataset.v)"
            )
        ]
        assert scores == sorted(scores)
        tab.locator("table.hx-heads th", has_text="score").first.click()  # descending
        scores = [
            float(s)
            for s in tab.eval_on_selector_all(
                "table.hx-heads tbody tr td:nth-child(7)", "es => es.map(e => e.dataset.v)"
            )
        ]
        assert scores == sorted(scores, reverse=True)
        assert errors == []
    finally:
        ctx.close()


def test_page_reads_with_javascript_off(browser, page_file, tmp_path):
    ctx, tab, errors = _open(browser, page_file, js=False)
    try:
        assert tab.locator("table.hx-grid td.hx-cell").count() == 4  # the grid is plain HTML
        assert tab.locator("table.hx-grid td.hx-cell").first.is_visible()
        assert tab.locator("table.hx-heads tbody tr").first.is_visible()
        assert not tab.locator(".hx-detail").is_visible()  # the detail needs the script
        assert tab.locator("h2", has_text="Data and method").is_visible()
        assert tab.locator("img").count() >= 2 and tab.locator("strong").count() > 0
        tab.screenshot(path=str(_shots(tmp_path) / "report_planted_nojs.png"), full_page=True)
        assert errors == []
    finally:
        ctx.close()


HOSTILE = "<!--<script>"  # opens the script data's "double-escaped" state if `<` and `!` reach it raw


def _crafted(df):
    """The planted table with a hostile model name and a hostile role cell on a descriptive row."""
    df = df.copy()
    df["model"] = f"planted{HOSTILE}"
    row = df.index[(df["role"] == "broad") & ~df["label"].astype(bool)][0]
    df.loc[row, "role"] = f"broad{HOSTILE}"
    df.attrs["model"] = f"planted{HOSTILE}"
    return df


def _page_is_whole(browser, path: Path, n_cells: int = 4) -> None:
    """The grid, the heads table and the method section all render, the script ran (the detail
    opens) and the data block reads back as JSON with the hostile text in it, as text."""
    ctx, tab, errors = _open(browser, path)
    try:
        assert tab.locator("table.hx-grid td.hx-cell").count() == n_cells
        assert tab.locator("table.hx-heads tbody tr").first.is_visible()
        assert tab.locator("h2", has_text="Data and method").is_visible()
        tab.click('td.hx-cell[data-layer="0"][data-head="2"]')
        assert "L0H2" in tab.locator(".hx-detail h3.hx-title").inner_text()
        data = tab.evaluate("() => JSON.parse(document.querySelector('script.hx-data').textContent)")
        assert data["model"].endswith(HOSTILE)
        assert errors == []
    finally:
        ctx.close()
    raw = path.read_text()
    block = raw.split('class="hx-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block  # written as \u003c etc.


def test_a_hostile_model_name_and_role_cell_leave_the_page_whole(browser, page_file, tmp_path):
    """Issue 24 item 3: `<!--<script` in the model name or a role cell blanked the page."""
    src = page_file.parent
    df = _crafted(page.read_heads(src / "heads.csv"))
    html = page.render_page(
        df,
        sections=report.read_sections((src / "report.md").read_text()),
        figures={p.name: p.read_bytes() for p in src.glob("*.png")},
        examples=json.loads((src / "examples.json").read_text()),
    )
    out = tmp_path / "hostile.html"
    out.write_text(html)
    _page_is_whole(browser, out)


def test_summary_re_renders_a_crafted_heads_csv_whole(browser, page_file, tmp_path):
    """The same through `interp summary` re-rendering a heads.csv someone edited, and index.html."""
    from analyses.cli import main

    out = tmp_path / "out"
    shutil.copytree(page_file.parent, out / "planted")
    csv = out / "planted" / "heads.csv"
    _crafted(page.read_heads(csv)).to_csv(csv, index=False)
    # the planted folder was rendered by the test, not by a toolkit run (no manifest): --force
    assert main(["summary", "--out", str(out), "--force"]) == 0
    _page_is_whole(browser, out / "planted" / "report.html")
    ctx, tab, errors = _open(browser, out / "index.html")
    try:
        assert tab.locator("h1", has_text="Head-probing summary").is_visible()
        assert tab.locator("a[href='planted/report.html']").count() >= 1
        assert errors == []
    finally:
        ctx.close()


def test_the_detail_and_its_table_name_the_same_roles_and_the_caption_follows_the_colour(browser, page_file):
    """Issue 23: the detail said "Also: ..., noop_sink" while its table bolded delimiter; the grid's
    caption kept describing the primary-role colours after a switch to a role's score."""
    data = page.read_page_data(page_file.read_text())
    ctx, tab, errors = _open(browser, page_file)
    try:
        # the planted no-op head: its only label is a sink's, so it idles (issue 21: the sink is background)
        assert "no-op sink" in {h["primary"] for h in data["heads"]}  # issue 35: the idle kinds apart
        for h in data["heads"]:
            tab.click(f'td.hx-cell[data-layer="{h["layer"]}"][data-head="{h["head"]}"]')
            bold = tab.eval_on_selector_all(
                ".hx-detail table.hx-scores tr.hx-lab",
                "rs => rs.map(r => [r.cells[0].textContent, r.cells[7].textContent])",
            )
            named = {lab.split("as ", 1)[1] if "as " in lab else role.split(" ")[0] for role, lab in bold}
            roles = {h["primary"], *[r for r in h["secondary"].split(", ") if r]} - {"unclassified"}
            # the sink labels (attention_sink, and boundary roles by weight only: noop_sink) are the
            # map's sink layer, not roles; a head with nothing else idles
            sink = {"attention_sink", "noop_sink"}
            assert named - sink == roles - set(heads.IDLE_PRIMARIES), (h["layer"], h["head"], bold, roles)
            if h["primary"] in heads.IDLE_PRIMARIES:
                assert named and named <= sink, (h["layer"], h["head"], bold)
            notes = tab.eval_on_selector_all(".hx-detail dl.hx-roles dt", "es => es.map(e => e.textContent)")
            assert set(notes) == roles | ({"unclassified"} if not roles else set())
        caption = tab.locator("table.hx-grid caption")
        assert "primary role" in caption.inner_text()
        tab.select_option("select.hx-colour", "previous_token")
        assert "previous_token score" in caption.inner_text() and "primary role" not in caption.inner_text()
        tab.select_option("select.hx-colour", "primary")
        assert "effect of the primary role, % of the way from baseline to ceiling" in caption.inner_text()
        assert errors == []
    finally:
        ctx.close()


def test_a_heads_validation_verdict_says_how_many_prompts_it_rests_on(browser, page_file, tmp_path):
    """Issue 41 item 2: the head's causal verdict in its detail names the prompts it rests on."""
    import shutil

    import pandas as pd

    folder = tmp_path / "model"
    shutil.copytree(page_file.parent, folder)
    (folder / "validation").mkdir()
    pd.DataFrame({"layer": [0], "head": [2], "role": ["subject_verb"], "metric": ["sv_probe"], "effect": [0.4]}).assign(
        p_value=0.2, n_items=8, verdict="inconclusive", reason="x"
    ).to_csv(folder / "validation" / "validation.csv", index=False)
    ctx, tab, errors = _open(browser, page.write_page(folder))
    try:
        tab.click('td.hx-cell[data-layer="0"][data-head="2"]')
        text = tab.locator(".hx-detail p.hx-verdicts").inner_text()
        assert "subject_verb inconclusive (sv_probe 0.400, p=0.200, 8 prompts)" in text, text
        assert errors == []
    finally:
        ctx.close()
