"""``interp explore --catalogue``: a clicked head's catalogue verdicts. The catalogue is a real one,
``analyses.catalogue.run`` on the planted copy model (L0H0 a labelled previous-token head the
induction task needs: ``mechanism``; L0H1 labelled, near-zero output: ``pattern, no effect``; L1H3
labelled ``delimiter``, a role no task tests: a ``-`` row), given a word tokenizer so that the
explorer can run it. Checked: what the server sends for a head against the file, the refusals of a
file that is not this model's catalogue (one line, exit 2), and the page in Debian's Chromium."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

import models
from analyses import catalogue as C
from analyses.explore.catalogue import read
from analyses.explore.server import allowed_hosts, create_app
from analyses.explore.session import Session
from analyses.validation.planted import planted_copies
from tests.analyses.catalogue.test_catalogue import COPY, DECOY, HIDDEN, PLANTED_ROLES, heads_table, planted_pairs
from tests.analyses.explore.test_explore import TEXT, _free_port_is_closed, _open, _shots, _stopped, _type_and_run
from tests.factories import VOCAB, word_tokenizer

DELIMITER = (1, 3)  # labelled with a role that no task tests
HOSTILE = "<img src=x onerror=alert(1)>"


def _planted():
    """The catalogue tests' planted copy model over the factories' word vocabulary (context 16)."""
    m = planted_copies({COPY: 1.0, HIDDEN: 1.0}, n_layers=2, n_heads=8, vocab=len(VOCAB), n_ctx=16)
    m.tokenizer = word_tokenizer()
    return m.eval()


@pytest.fixture(scope="module")
def planted():
    return _planted()


@pytest.fixture(scope="module")
def folder(planted, tmp_path_factory) -> Path:
    """``interp catalogue``'s output set for the planted model."""
    labels = heads_table(planted, {COPY: "previous_token", DECOY: "previous_token", DELIMITER: "delimiter"})
    res = C.run(planted, labels, n=16, eap_pairs=0, pairs={"induction": planted_pairs(16)}, role_tasks=PLANTED_ROLES)
    return C.write(res, tmp_path_factory.mktemp("catalogue") / "planted")


def _client(session: Session):
    from starlette.testclient import TestClient

    return TestClient(create_app(session, allowed_hosts("127.0.0.1", 8765)), base_url="http://127.0.0.1:8765")


def _num(x):
    return None if isinstance(x, float) and math.isnan(x) else float(x)


# -- what the server sends ----------------------------------------------------------------------------


def test_the_server_sends_a_heads_rows_of_the_file(planted, folder):
    table = C.read_catalogue(folder)
    session = Session(planted, catalogue=folder)
    with _client(session) as client:
        for layer in range(2):
            for head in range(8):
                r = client.post("/api/catalogue", json={"layer": layer, "head": head})
                assert r.status_code == 200, r.text
                d = json.loads(r.text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))  # NaN: null
                assert (d["layer"], d["head"], d["source"]) == (layer, head, str(folder / "catalogue.csv"))
                mine = table[(table["layer"] == layer) & (table["head"] == head)]
                mine = pd.concat([mine[mine["task"] != C.NO_TASK], mine[mine["task"] == C.NO_TASK]])
                assert len(d["rows"]) == len(mine) > 0
                for sent, (_, row) in zip(d["rows"], mine.iterrows()):
                    assert (sent["task"], sent["verdict"], sent["site"], sent["reason"]) == (
                        row["task"], row["verdict"], row["site"], row["reason"]
                    )  # fmt: skip
                    for key in ("effect", "ci_low", "ci_high", "min_effect"):
                        assert sent[key] == _num(row[key]), key
                    assert sent["roles"] == [x for x in row["roles"].split("; ") if x]
                    assert sent["no_task"] == (row["task"] == C.NO_TASK)
        rows = client.post("/api/catalogue", json={"layer": 0, "head": 0}).json()["rows"]
        assert [(r["task"], r["verdict"], r["roles"]) for r in rows] == [("induction", "mechanism", ["previous_token"])]
        assert rows[0]["ci_low"] > rows[0]["min_effect"] and rows[0]["n_pairs"] == 16
        rows = client.post("/api/catalogue", json={"layer": 0, "head": 1}).json()["rows"]
        assert rows[0]["verdict"] == "pattern, no effect"
        rows = client.post("/api/catalogue", json={"layer": 1, "head": 3}).json()["rows"]
        assert rows[-1]["task"] == C.NO_TASK and rows[-1]["roles"] == ["delimiter"] and rows[-1]["effect"] is None
        assert rows[-1]["verdict"] == "no causal test"
        bad = client.post("/api/catalogue", json={"layer": 2, "head": 0})
        assert bad.status_code == 422 and "layer must be an integer in 0..1" in bad.json()["error"]
        bad = client.post("/api/catalogue", json={"layer": 0, "head": 0, "text": "x"})
        assert bad.status_code == 400 and "unknown field" in bad.json()["error"]
    about = session.info()["catalogue"]
    assert about["tasks"] == ["induction"] and about["model"] == "planted" and about["heads"] == 16


def test_a_head_without_rows_and_a_session_without_a_catalogue(planted, folder):
    table = C.read_catalogue(folder)
    table = table[~((table["layer"] == 1) & (table["head"] == 7))]
    with _client(Session(planted, catalogue=table)) as client:
        assert client.post("/api/catalogue", json={"layer": 1, "head": 7}).json()["rows"] == []
        assert len(client.post("/api/catalogue", json={"layer": 1, "head": 6}).json()["rows"]) == 1
    with _client(Session(planted)) as client:
        r = client.post("/api/catalogue", json={"layer": 0, "head": 0})
        assert r.status_code == 404 and "--catalogue" in r.json()["error"]
        assert client.get("/api/info").json()["catalogue"] is None


def test_another_models_catalogue_is_refused(planted, folder):
    table = C.read_catalogue(folder)
    with pytest.raises(ValueError, match=r"is the catalogue of model minilm, not of 'planted', the model explored"):
        Session(planted, catalogue=table.assign(model="minilm"))
    with pytest.raises(ValueError, match="has heads up to layer 2, head 7, but planted has 2 layers of 8 heads"):
        Session(planted, catalogue=pd.concat([table, table.tail(1).assign(layer=2)]))


# -- a file that is not a catalogue ---------------------------------------------------------------------


def _write(tmp_path: Path, name: str, content) -> Path:
    path = tmp_path / name
    if isinstance(content, pd.DataFrame):
        content.to_csv(path, index=False)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _bad_files(tmp_path: Path, table: pd.DataFrame) -> list[tuple[Path, str]]:
    """(path, what the one-line error says) for every way a file can fail to be a catalogue."""
    two = pd.concat([table, table.head(1).assign(model="smollm2")])
    heads = pd.DataFrame({"model": ["planted"], "layer": [0], "head": [0], "role": ["local"], "score": [0.5]})
    (tmp_path / "empty_folder").mkdir()
    return [
        (tmp_path / "nowhere.csv", "nowhere.csv: no such file; run `interp catalogue"),
        (tmp_path / "empty_folder", "empty_folder holds no catalogue.csv; run `interp catalogue"),
        (_write(tmp_path, "heads.csv", heads), "heads.csv lacks columns ['task', 'verdict']: not a catalogue.csv"),
        (_write(tmp_path, "empty.csv", ""), "empty.csv is not a catalogue.csv (not a CSV table"),
        (_write(tmp_path, "binary.csv", b"\xff\xfe\x00\x81" * 64), "binary.csv is not a catalogue.csv"),
        (_write(tmp_path, "nosite.csv", table.drop(columns="site")), "lacks columns ['site']: not a catalogue.csv"),
        (_write(tmp_path, "header.csv", table.head(0)), "header.csv holds no rows"),
        (_write(tmp_path, "great.csv", table.assign(verdict="great")), "unknown verdicts ['great']"),
        (_write(tmp_path, "lname.csv", table.assign(layer="L0")), "column layer holds 'L0', not a head number"),
        (_write(tmp_path, "big.csv", table.assign(effect="big")), "column effect holds 'big', not a number"),
        (_write(tmp_path, "two.csv", two), "holds the rows of several models ['planted', 'smollm2']"),
    ]


def test_read_refuses_what_is_not_a_catalogue_in_one_line(folder, tmp_path):
    assert len(read(folder)) == len(read(folder / "catalogue.csv")) == len(C.read_catalogue(folder))
    for path, says in _bad_files(tmp_path, C.read_catalogue(folder)):
        with pytest.raises((FileNotFoundError, ValueError)) as e:
            read(path)
        assert says in str(e.value) and "\n" not in str(e.value), (path, str(e.value))


def test_cli_catalogue_errors_exit_2(folder, tmp_path, capsys):
    """A bad --catalogue is refused before the model loads (the model named here does not exist: its
    error would come first otherwise); another model's catalogue once the model has loaded."""
    from analyses.cli import main

    for path, says in _bad_files(tmp_path, C.read_catalogue(folder)):
        assert main(["explore", "--model", "no-such-model", "--port", "0", "--catalogue", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"interp explore: --catalogue {tmp_path}") and err.count("\n") == 1, err
        assert says in err, err
    model = models.save_checkpoint(_planted(), tmp_path / "planted")
    other = _write(tmp_path, "minilm.csv", C.read_catalogue(folder).assign(model="minilm"))
    assert main(["explore", "--model", str(model), "--port", "0", "--catalogue", str(other)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"interp explore: {other} is the catalogue of model minilm, not of 'planted', the model explored; "
        "pass planted's catalogue.csv (interp catalogue --model planted)\n"
    )


# -- the page in a browser -----------------------------------------------------------------------------


@contextmanager
def _explore(tmp_path: Path, *flags: str):
    """``interp explore`` on the planted folder model in a subprocess: yields (proc, url, port)."""
    model = tmp_path / "planted"
    if not model.exists():
        models.save_checkpoint(_planted(), model)
    cmd = [sys.executable, "-c", "import sys; from analyses.cli import main; sys.exit(main())", "explore"]
    proc = subprocess.Popen(
        [*cmd, "--model", str(model), "--port", "0", *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("interp explore: planted at http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split(" at ")[1].split()[0]
        yield proc, url, int(url.rsplit(":", 1)[1].strip("/"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _shown_rows(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#catalogue table.verdicts tr[data-task]",
        """trs => trs.map(tr => {
            const td = [...tr.querySelectorAll('td')];
            const v = (cls) => { const x = tr.querySelector('.' + cls); return x ? x.dataset.v : null; };
            return {task: tr.dataset.task, cells: td.map(c => c.textContent), reason: td[1].title,
                    effect: v('effect'), low: v('ci-low'), high: v('ci-high'), min: v('min-effect')};
        })""",
    )


def _click(page, layer: int, head: int) -> None:
    page.click(f"#grid button[data-layer='{layer}'][data-head='{head}']")
    page.wait_for_selector(f"#catalogue[data-layer='{layer}'][data-head='{head}']")


def test_clicking_a_head_shows_its_verdicts_in_the_browser(browser, folder, tmp_path):
    """`interp explore --catalogue` on the planted model, driven through Chromium: a clicked head's
    panel shows its verdict per task with the file's exact numbers, the untested roles' row, and a
    head without rows says so. The catalogue's folder name and one row's site are markup: both show
    as text, and no element is made of them."""
    table = C.read_catalogue(folder)
    table.loc[(table["layer"] == 0) & (table["head"] == 1), "site"] = "</script><b id=hostile>site</b>"
    table = table[~((table["layer"] == 1) & (table["head"] == 7))]
    hostile = tmp_path / HOSTILE
    hostile.mkdir()
    table.to_csv(hostile / "catalogue.csv", index=False)
    with _explore(tmp_path, "--catalogue", str(hostile)) as (proc, url, port):
        ctx, page, errors = _open(browser, url)
        assert f"Catalogue verdicts from {hostile / 'catalogue.csv'}" in page.text_content("#catalogue-info")
        _click(page, 0, 0)  # before any text is run: the verdicts need no forward pass
        (row,) = _shown_rows(page)
        mine = table[(table["layer"] == 0) & (table["head"] == 0)].iloc[0]
        assert row["task"] == "induction" and row["cells"][1] == "mechanism" and row["reason"] == mine["reason"]
        assert [float(row[k]) for k in ("effect", "low", "high", "min")] == [
            mine["effect"], mine["ci_low"], mine["ci_high"], mine["min_effect"]
        ]  # fmt: skip
        assert row["cells"][2] == f"{mine['effect']:.3f} [{mine['ci_low']:.3f}, {mine['ci_high']:.3f}]"
        assert row["cells"][4:] == [mine["site"], "previous_token", "-"]
        _click(page, 0, 1)
        (row,) = _shown_rows(page)
        assert row["cells"][1] == "pattern, no effect" and row["cells"][4] == "</script><b id=hostile>site</b>"
        _click(page, 1, 3)
        rows = _shown_rows(page)
        assert [r["task"] for r in rows] == ["induction", "-"]
        assert rows[1]["cells"][:2] == ["- (no solved task tests these roles)", "no causal test"]
        assert rows[1]["cells"][5] == "delimiter" and rows[1]["effect"] is None
        _click(page, 1, 7)
        assert "L1H7 has no rows in the catalogue" in page.text_content("#catalogue")
        assert _shown_rows(page) == []
        _type_and_run(page, TEXT)  # the pattern and the verdicts side by side
        page.click("#grid button[data-layer='0'][data-head='0']")
        page.wait_for_selector("#pattern[data-layer='0'][data-head='0']")
        page.wait_for_selector("#catalogue[data-layer='0'][data-head='0']")
        assert _shown_rows(page)[0]["cells"][1] == "mechanism"
        assert page.query_selector("img") is None and page.query_selector("#hostile") is None
        assert page.eval_on_selector_all("script", "ss => ss.length") == 2
        page.screenshot(path=str(_shots(tmp_path) / "explore_catalogue.png"), full_page=True)
        ctx.close()
        assert errors == [], errors
        proc.send_signal(signal.SIGINT)
        _stopped(proc)
    assert _free_port_is_closed(port)
