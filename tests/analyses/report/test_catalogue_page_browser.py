"""The head catalogue on the model's page in a real browser (Debian's Chromium, headless, through
Playwright, as ``test_page_browser``): the map switched to the verdict colouring colours each head
by its verdict on the chosen task (grey without a row for it) under the verdict legend, and back;
a head's panel shows its labelled roles beside its rows per task. The page is rendered from a
planted model folder (``catalogue_tables``), as ``interp summary`` renders it."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyses import catalogue as C
from analyses.heads import report
from analyses.report import page
from analyses.report.catalogue import NO_ROW_COLOUR, VERDICT_COLOURS
from tests.analyses.heads.planted_tables import planted_heads
from tests.analyses.report.catalogue_tables import planted_catalogue, write_catalogue
from tests.analyses.report.test_page_browser import _open, _shots


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("catalogue_page")
    report.write_report(planted_heads(), d)
    write_catalogue(d, *planted_catalogue())
    return page.write_page(d)


def _rgb(hex_colour: str) -> str:
    """A #rrggbb colour as the browser reports a style's background: "rgb(r, g, b)"."""
    h = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i : i + 2], 16) for i in (0, 2, 4)))


def _background(tab, layer: int, head: int) -> str:
    return tab.locator(f'td.hx-cell[data-layer="{layer}"][data-head="{head}"]').evaluate("e => e.style.background")


def test_the_map_colours_heads_by_verdict_and_the_panel_shows_both_sides(browser, page_file, tmp_path):
    table, _ = planted_catalogue()
    data = page.read_page_data(page_file.read_text())
    ctx, tab, errors = _open(browser, page_file)
    try:
        primary = {(h["layer"], h["head"]): h["primary"] for h in data["heads"]}
        assert _background(tab, 0, 0) == _rgb(data["colours"][primary[(0, 0)]])  # primary role: the default
        assert tab.locator(".hx-legend-verdict").is_hidden() and tab.locator(".hx-task-label").is_hidden()
        tab.select_option("select.hx-colour", "verdict")
        assert tab.locator(".hx-task-label").is_visible()
        assert tab.locator(".hx-legend-verdict").is_visible()
        assert tab.locator(".hx-legend:not(.hx-legend-verdict)").is_hidden()
        for task in ("subject_verb", "ioi", C.NO_TASK):
            tab.select_option("select.hx-task", task)
            assert task in tab.locator("table.hx-grid caption").inner_text()
            for layer, head in primary:
                row = table[(table["task"] == task) & (table["layer"] == layer) & (table["head"] == head)]
                want = VERDICT_COLOURS[row["verdict"].iloc[0]] if len(row) else NO_ROW_COLOUR
                assert _background(tab, layer, head) == _rgb(want), (task, layer, head)
        # the planted mechanism on subject_verb, and its swatch in the legend
        tab.select_option("select.hx-task", "subject_verb")
        assert _background(tab, 0, 0) == _rgb(VERDICT_COLOURS["mechanism"]) != _rgb(NO_ROW_COLOUR)
        swatch = tab.locator('.hx-legend-verdict span[data-verdict="mechanism"] i').evaluate("e => e.style.background")
        assert swatch == _rgb(VERDICT_COLOURS["mechanism"])
        assert tab.locator('.hx-legend-verdict span[data-verdict="no row for this task"]').is_visible()
        # the no-task rows: only L1H1 has one, every other head is grey
        tab.select_option("select.hx-task", C.NO_TASK)
        assert _background(tab, 1, 1) == _rgb(VERDICT_COLOURS["no causal test"])
        assert _background(tab, 0, 0) == _rgb(NO_ROW_COLOUR)
        # a head's panel: the pattern side (its labels, real-text support) beside the causal side
        tab.click('td.hx-cell[data-layer="1"][data-head="1"]')
        pattern, causal = tab.locator(".hx-detail .hx-pattern"), tab.locator(".hx-detail .hx-causal")
        assert pattern.is_visible() and causal.is_visible()
        assert "subject_verb (retrospective)" in pattern.inner_text()
        assert "supported (spacy-silver)" in pattern.inner_text()
        got = causal.locator("span.hx-verdict").evaluate_all("es => es.map(e => e.dataset.verdict)")
        want = list(table[(table["layer"] == 1) & (table["head"] == 1)]["verdict"])
        assert got == want and "pattern, no effect" in got
        cells = causal.locator("table.hx-tasks tr").nth(1).locator("td").all_inner_texts()
        assert cells[0].startswith("subject_verb") and "subject_verb (predictive)" in cells[0]  # the role it tests
        assert cells[2] == "0.000 [-0.100, 0.100]" and cells[3] == "0.200"  # effect [CI], min effect
        box_p, box_c = pattern.bounding_box(), causal.bounding_box()
        assert box_p["x"] + box_p["width"] <= box_c["x"]  # side by side at this width
        tab.click('td.hx-cell[data-layer="0"][data-head="0"]')
        assert "subject_verb (predictive)" in pattern.inner_text()
        assert causal.locator('span.hx-verdict[data-verdict="mechanism"]').count() == 1
        tab.locator(".hx-root").screenshot(path=str(_shots(tmp_path) / "report_catalogue_verdicts.png"))
        # back to the primary roles: their colours and legend
        tab.select_option("select.hx-colour", "primary")
        assert _background(tab, 0, 0) == _rgb(data["colours"][primary[(0, 0)]])
        assert tab.locator(".hx-legend-verdict").is_hidden() and tab.locator(".hx-task-label").is_hidden()
        assert errors == []
    finally:
        ctx.close()
