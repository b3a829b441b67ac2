"""The head catalogue on the model's page and in the summary (``analyses.report.catalogue``; no
browser): the counts per role and verdict by hand, what the page embeds per head, the catalogue's
provenance against the current heads.csv, the page and the summary reading the catalogue instead of
the validation where a folder has one (and the validation as before where it has not), and hostile
text in a catalogue escaped. The catalogue is planted (``catalogue_tables``)."""

from __future__ import annotations

import json
import math
import re
import shutil
from html import unescape

import pandas as pd
import pytest

from analyses import catalogue as C
from analyses.heads import report
from analyses.heads.roles import MAP_ROLES
from analyses.report import catalogue as RC
from analyses.report import page
from tests.analyses.heads.planted_tables import planted_heads
from tests.analyses.report.catalogue_tables import planted_catalogue, write_catalogue


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The probe's heads.csv and report of the planted table (written once: the figures take time)."""
    d = tmp_path_factory.mktemp("probed")
    report.write_report(planted_heads(), d)
    return d


@pytest.fixture
def folder(probed, tmp_path):
    """A model folder as the main job leaves it: the probe's heads.csv and report, the catalogue."""
    d = tmp_path / "out" / "planted"
    shutil.copytree(probed, d)
    write_catalogue(d, *planted_catalogue())
    return d


def _rows(**cols):
    """A catalogue table from columns of equal length (the counts need roles and verdict only)."""
    return pd.DataFrame(cols)


# ---- the counts per role ---------------------------------------------------------------------------


def test_role_verdict_counts_by_hand():
    t = _rows(
        task=["a", "a", "a", "b", "b", "b", C.NO_TASK, "a"],
        roles=[
            "induction; previous_token",  # two roles for one task: counted under each
            "induction",
            "",
            "",
            "",
            "zeta_role",  # a name the map does not know: after the map's names
            "local",
            "previous_token",
        ],
        verdict=[
            "mechanism",
            "inconclusive",
            "effect, no named pattern",
            "quiet",  # not counted: a head with no label and no effect
            "idle",
            "pattern, no effect",
            "no causal test",
            "pattern, no effect",
        ],
    )
    got = RC.role_verdict_counts(t)
    assert list(got.columns) == list(RC.ROLE_VERDICTS)
    named = sorted(["local", "previous_token", "induction"], key=MAP_ROLES.index)  # the map's order
    assert list(got.index) == [*named, "zeta_role", RC.NO_LABEL]
    assert got.loc["induction"].to_dict() == {
        "mechanism": 1,
        "pattern, no effect": 0,
        "effect, no named pattern": 0,
        "inconclusive": 1,
        "no causal test": 0,
    }
    assert got.loc["previous_token", "mechanism"] == 1 and got.loc["previous_token", "pattern, no effect"] == 1
    assert got.loc[RC.NO_LABEL].sum() == 1 and got.loc[RC.NO_LABEL, "effect, no named pattern"] == 1
    assert got.loc["local", "no causal test"] == 1 and got.loc["zeta_role", "pattern, no effect"] == 1
    # every counted row is a row of the table with one of the five verdicts, once per role it names
    counted = t[t["verdict"].isin(RC.ROLE_VERDICTS)]
    assert got.to_numpy().sum() == sum(max(1, len([r for r in x.split("; ") if r])) for x in counted["roles"])


def test_role_verdict_table_compares_models_and_marks_missing_roles():
    a = _rows(roles=["induction", "", "induction"], verdict=["mechanism", "effect, no named pattern", "inconclusive"])
    b = _rows(roles=["ioi (predictive)", ""], verdict=["pattern, no effect", "quiet"])
    got = RC.role_verdict_table({"small": a, "big": b}).set_index("role")
    assert list(got.columns) == ["small", "big"]
    assert list(got.index) == [*sorted(["ioi (predictive)", "induction"], key=MAP_ROLES.index), RC.NO_LABEL]
    assert got.loc["induction", "small"] == "1 / 0 / 0 / 1 / 0" and got.loc["induction", "big"] == "-"
    assert got.loc["ioi (predictive)", "big"] == "0 / 1 / 0 / 0 / 0" and got.loc["ioi (predictive)", "small"] == "-"
    assert got.loc[RC.NO_LABEL, "small"] == "0 / 0 / 1 / 0 / 0" and got.loc[RC.NO_LABEL, "big"] == "0 / 0 / 0 / 0 / 0"
    with pytest.raises(ValueError, match="at least one catalogue"):
        RC.role_verdict_table({})


# ---- what the page embeds --------------------------------------------------------------------------


def test_page_catalogue_embeds_each_heads_rows_and_labels():
    df = planted_heads()
    table, tasks = planted_catalogue()
    got = RC.page_catalogue(RC.ModelCatalogue(table, tasks), df)
    assert got["tasks"] == ["subject_verb", "ioi", C.NO_TASK]  # the catalogue's order, the no-task rows last
    assert set(got["colours"]) == set(C.VERDICTS) and got["no_row"] not in got["colours"].values()
    assert len(set(got["colours"].values())) == len(C.VERDICTS)  # one colour per verdict
    assert sum(len(v) for v in got["heads"].values()) == len(table)
    for r in table.itertuples():
        rec = next(x for x in got["heads"][f"{r.layer},{r.head}"] if x["task"] == r.task)
        assert rec["verdict"] == r.verdict and rec["roles"] == r.roles
        for col in ("effect", "ci_low", "ci_high", "min_effect", "rank", "eap_ig"):
            want = getattr(r, col)
            assert (rec[col] is None) if pd.isna(want) else rec[col] == pytest.approx(want, abs=1e-4), col
    assert [x["task"] for x in got["heads"]["1,1"]] == ["subject_verb", "ioi", C.NO_TASK]
    # the pattern side: the labelled roles of heads.csv, the highest score first, with real-text support
    assert [x["role"] for x in got["labels"]["1,1"]] == ["subject_verb (retrospective)", "subject_verb (predictive)"]
    assert got["labels"]["1,1"][0]["real_text"] == "supported (spacy-silver)"
    want = {"role": "subject_verb (predictive)", "score": 0.8, "baseline": 0.3, "heuristic": "-"}
    assert got["labels"]["0,0"] == [{**want, "real_text": "templates only"}]
    assert "1,2" not in got["labels"]  # no label: nothing on its pattern side
    json.dumps(got, allow_nan=False)  # JSON-ready: no NaN
    # the powered run's group ablation of the head's role, where the catalogue joined it
    i = table.index[(table["layer"] == 1) & (table["head"] == 1) & (table["task"] == "subject_verb")][0]
    table = table.assign(powered_group_effect=math.nan, powered_group_verdict="")
    table.loc[i, "powered_group_effect"], table.loc[i, "powered_group_verdict"] = 2.5, "validated (group of 3)"
    rec = RC.page_catalogue(RC.ModelCatalogue(table, tasks), df)["heads"]["1,1"][0]
    assert rec["powered_group_effect"] == 2.5 and rec["powered_group_verdict"] == "validated (group of 3)"
    assert RC.page_catalogue(RC.ModelCatalogue(table, tasks), df)["heads"]["1,2"][0]["powered_group_verdict"] == ""


def test_labels_take_the_catalogues_verdicts_on_their_tasks():
    from analyses.heads.labels import labelled_roles

    lab = labelled_roles(planted_heads())
    table, _ = planted_catalogue()
    got = dict(zip(zip(lab["layer"], lab["head"], lab["name"]), RC.labels_verdicts(lab, table)))
    assert got[(0, 0, "subject_verb (predictive)")] == "subject_verb: mechanism"
    assert got[(1, 1, "subject_verb (predictive)")] == "subject_verb: pattern, no effect"
    assert got[(1, 1, "subject_verb (retrospective)")] == "no causal test"
    assert got[(1, 0, "ioi (predictive)")] == "ioi: inconclusive"
    assert got[(0, 1, "attention_sink")] == "not in the catalogue"


# ---- provenance ------------------------------------------------------------------------------------


def test_catalogue_provenance_compares_the_heads_csv_it_read(folder):
    table, tasks = planted_catalogue()
    assert RC.catalogue_provenance(folder) is None  # the current heads.csv
    with open(folder / "heads.csv", "a") as f:  # the probe rerun since: another heads.csv
        f.write("\n")
    assert RC.catalogue_provenance(folder).startswith("**Out of date**")
    write_catalogue(folder, table, tasks, sha=None)
    assert "has no `labels_sha256`" in RC.catalogue_provenance(folder)
    (folder / "catalogue.json").write_text("[1, 2]")
    assert "not a JSON object" in RC.catalogue_provenance(folder)
    (folder / "catalogue.json").write_text("{not json")
    assert "is not JSON" in RC.catalogue_provenance(folder)
    (folder / "catalogue.json").unlink()
    assert "no `catalogue.json`" in RC.catalogue_provenance(folder)


def test_read_model_catalogue(folder, tmp_path):
    assert RC.read_model_catalogue(tmp_path) is None  # no catalogue.csv: the page keeps to validation/
    cat = RC.read_model_catalogue(folder)
    assert len(cat.table) == len(planted_catalogue()[0]) and list(cat.tasks["task"]) == ["subject_verb", "ioi"]
    assert cat.markdown.startswith("# Head catalogue") and cat.info["labels_sha256"]
    pd.DataFrame({"layer": [0]}).to_csv(folder / "catalogue.csv", index=False)
    with pytest.raises(ValueError, match=r"lacks columns \['head', 'task', 'verdict'\]"):
        RC.read_model_catalogue(folder)


# ---- the page --------------------------------------------------------------------------------------


def _validation(folder):
    """A validation/ beside the catalogue, as an older run (or `interp validate`) leaves it."""
    (folder / "validation").mkdir()
    pd.DataFrame(
        {"layer": [0], "head": [0], "role": ["subject_verb"], "reading": ["predictive"], "metric": ["m"]}
    ).assign(effect=0.3, p_value=0.01, verdict="validated-by-validate").to_csv(
        folder / "validation" / "validation.csv", index=False
    )
    (folder / "validation" / "validation.md").write_text("## Validation\n\nVALIDATE-MD-TEXT\n")


def test_the_page_reads_the_catalogue_instead_of_the_validation(folder):
    _validation(folder)
    html = page.page_from_folder(folder)
    data = page.read_page_data(html)
    assert data["catalogue"]["tasks"] == ["subject_verb", "ioi", C.NO_TASK] and data["verdicts"] == {}
    text = unescape(html)
    assert "VALIDATE-MD-TEXT" not in text and "validated-by-validate" not in text
    assert '<h2 id="catalogue">Catalogue</h2>' in html
    # the section: tasks with accuracy and power, the verdict counts, the mechanism, the disagreements
    section = text.split('<h2 id="catalogue">', 1)[1].split('<h2 id="validation">', 1)[0]
    cells = ("subject_verb", "logit_diff", "0.90", "yes", "40", "0.200", "0.350")  # accuracy, pairs, min, detectable
    assert "".join(f"<td>{c}</td>" for c in cells) in section.replace("\n", "")
    counts = C.verdict_counts(planted_catalogue()[0])
    assert int(counts.loc["subject_verb", "mechanism"]) == 1
    assert "<h3>Mechanisms (1)</h3>" in section and "<h3>Disagreements (2)</h3>" in section
    assert "<td>L1H1</td>" in section and "<td>L1H0</td>" in section
    # the validation section: the catalogue's counts per role; the heads table: the catalogue's verdicts
    validation = text.split('<h2 id="validation">', 1)[1].split('<h2 id="method">', 1)[0]
    assert "Read from the head catalogue" in validation
    row = re.search(r"<tr>\s*<td>subject_verb \(predictive\)</td>(.*?)</tr>", validation, re.S).group(1)
    assert re.findall(r"<td>(\d+)</td>", row) == ["1", "1", "0", "0", "0"]
    tagged = re.findall(r'<tr data-role="([^"]+)" data-layer="(\d+)" data-verdict="([^"]+)"', text)
    verdicts = {(r, int(l)): v for r, l, v in tagged}
    assert verdicts[("subject_verb (predictive)", 0)] == "subject_verb: mechanism"
    # the verdict colouring's controls and legend are in the page (shown by the script)
    assert '<option value="verdict">catalogue verdict</option>' in html
    assert html.count('<span data-verdict="') == len(C.VERDICTS) + 1  # and "no row for this task"


def test_without_a_catalogue_the_page_shows_the_validation_as_before(folder):
    for name in C.OUTPUTS:
        (folder / name).unlink()
    _validation(folder)
    html = page.page_from_folder(folder, provenance="**PROVENANCE-NOTE**")
    data = page.read_page_data(html)
    assert data["catalogue"] is None and data["verdicts"]["0,0"][0]["verdict"] == "validated-by-validate"
    assert "VALIDATE-MD-TEXT" in html and "PROVENANCE-NOTE" in html
    assert '<h2 id="catalogue">' not in html and '<option value="verdict">' not in html
    assert 'class="hx-legend hx-legend-verdict"' not in html


def test_an_out_of_date_catalogue_is_flagged_on_the_page(folder):
    assert "Out of date" not in page.page_from_folder(folder)
    with open(folder / "heads.csv", "a") as f:
        f.write("\n")
    html = page.page_from_folder(folder)
    assert html.count("<strong>Out of date</strong>") == 2  # the catalogue section and the validation's


HOSTILE = "<!--<script>x</script>"


def test_hostile_text_in_a_catalogue_is_escaped(folder):
    table, tasks = planted_catalogue(tasks=("subject_verb", f"ioi{HOSTILE}"))
    table.loc[table["verdict"] == "mechanism", "reason"] = f"why{HOSTILE}"
    table.loc[table["task"] == C.NO_TASK, "roles"] = f"subject_verb (retrospective){HOSTILE}"
    write_catalogue(folder, table, tasks)
    html = page.page_from_folder(folder)
    assert "<script>x</script>" not in html and "<!--<script>" not in html
    block = html.split('class="hx-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block
    data = page.read_page_data(html)
    assert f"ioi{HOSTILE}" in data["catalogue"]["tasks"]  # kept, as text
    assert any(r["reason"] == f"why{HOSTILE}" for rows in data["catalogue"]["heads"].values() for r in rows)


# ---- the summary -----------------------------------------------------------------------------------


def test_summary_compares_verdicts_per_role_and_reads_validation_where_no_catalogue(folder, tmp_path):
    """Two models: one with a catalogue (whose heads.csv changed since), one with a validation only."""
    from analyses.cli import main

    out = folder.parent
    other = out / "older"
    shutil.copytree(folder, other)
    for name in C.OUTPUTS:
        (other / name).unlink()
    _validation(other)
    _validation(folder)  # ignored: this folder has a catalogue
    with open(folder / "heads.csv", "a") as f:
        f.write("\n")
    assert main(["summary", "--out", str(out)]) == 0
    text = (out / "summary.md").read_text()
    section = text.split("## Causal validation of the labels", 1)[1]
    table = RC.role_verdict_table({"planted": planted_catalogue()[0]})
    header = "| role | planted |"
    assert header in section
    for r in table.itertuples():
        assert f"| {r.role} | {r.planted} |" in section, r.role
    assert "| subject_verb (predictive) | 1 / 1 / 0 / 0 / 0 |" in section
    assert "| (no label) | 0 / 0 / 1 / 0 / 0 |" in section
    assert "**Out of date**: the catalogue read a heads.csv" in section
    assert "- Mechanisms (1): L0H0 subject_verb 0.5 [0.3, 0.7]." in section
    assert "- Effect, no named pattern (1): L1H0 subject_verb 0.6 [0.4, 0.8]." in section
    # the folder without a catalogue: its validation, as before, with its own provenance
    older = section.split("### older", 1)[1]
    assert "validated-by-validate" in older and "does not record which heads.csv" in older
    assert "### planted\n" not in section  # the catalogue's model is not listed again from validation/
    index = (out / "index.html").read_text()
    assert "<td>1 / 1 / 0 / 0 / 0</td>" in index and "<strong>Out of date</strong>" in index
    # the pages re-rendered: the catalogue's with the warning, the other with its validation
    assert "<strong>Out of date</strong>" in (folder / "report.html").read_text()
    assert page.read_page_data((other / "report.html").read_text())["verdicts"]


def test_summary_refuses_a_broken_catalogue_in_one_line(folder, capsys):
    from analyses.cli import main

    pd.DataFrame({"layer": [0], "head": [0]}).to_csv(folder / "catalogue.csv", index=False)
    assert main(["summary", "--out", str(folder.parent)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "lacks columns ['task', 'verdict']" in err
    assert "Traceback" not in err and not (folder.parent / "index.html").exists()
