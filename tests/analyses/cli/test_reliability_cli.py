"""Nothing lost, nothing silently wrong: the command-line items of issue 13.

5-7. Bad inputs (a labels CSV with the wrong schema or values, an empty --text) are refused with one
     line naming the file, the column, the row and what is expected, before any model is loaded.
8.   A command's output is committed as a whole (an interrupt keeps the previous set), other
     commands' files in the same folder are left alone, a second concurrent writer is refused, and a
     validation computed from an older heads.csv is flagged by ``interp summary``.
9.   ``interp train`` does not replace a checkpoint unless told to, and ``--resume`` checks the model.
10.  ``--out`` is checked before the work, for every command.
Messages: one line ``interp <command>: ...`` and exit status 2, no traceback.

The models are the planted ones of tests/factories.py and analyses.validation (seconds, not minutes);
``models.load`` is patched to hand them out.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

import analyses.data
import models
from analyses import validation as V
from analyses.cli import main
from models import bpe
from tests.factories import planted_items, planted_model, tiny_train_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


def _refuse(*args, **kwargs):
    raise AssertionError("the work started before the arguments were checked")


@pytest.fixture
def no_work(monkeypatch):
    """Any model load or tokenizer training means the command did not check its arguments first."""
    monkeypatch.setattr(models, "load", _refuse)
    monkeypatch.setattr(bpe, "train_bpe", _refuse)


@pytest.fixture
def word_planted(monkeypatch):
    """`interp probe --model planted`: the hand-set word-level encoder and its planted items."""
    from analyses import heads

    model = planted_model()
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: model)
    monkeypatch.setattr(analyses.data, "load_items", lambda n, seed, sources, conllu, **kw: planted_items(n, seed))
    examples = heads.example_patterns  # the planted items have one relation: roles of others are unscored
    monkeypatch.setattr(heads, "example_patterns", lambda m, df, **kw: examples(m, df[df["score"].notna()], **kw))
    return model


@pytest.fixture
def causal_planted(monkeypatch):
    """`interp validate --model planted`: the hand-set causal model and its prompts."""
    import analyses.validation.runner as run

    model, _ = V.planted_model(seed=0)
    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: model)
    monkeypatch.setattr(run, "build_prompts", lambda m, n=8, seed=0: V.planted_prompts(n=n, seed=seed))
    return model


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.startswith(f"interp {command}: "), err
    assert "\n" not in err, err
    return err


def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _probe(out, seed=0, n=8):
    return main(["probe", "--model", "planted", "--out", str(out), "--n", str(n), "--n-boot", "10", "--no-null",
                 "--seed", str(seed)])  # fmt: skip


TRAIN_CONFIG = tiny_train_config(steps=2)


def _config(tmp_path, name="c.json", **model_changes):
    conf = json.loads(json.dumps(TRAIN_CONFIG))
    conf["model"].update(model_changes)
    path = tmp_path / name
    path.write_text(json.dumps(conf))
    return path


# ---- 6. interp validate --labels ------------------------------------------------------------------

GOOD = "model,layer,head,role,direction,score,label\nplanted,0,0,previous_token,back,0.99,True\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "layer,head,role,label\n0,0,previous_token,yes\n0,1,previous_token,no\n",
            r"labels\.csv:2: column 'label' is 'yes'; expected true or false",
        ),
        ("layer,head,role\n0,0,previous_token\n", r"labels\.csv: no column 'label'.*expected"),
        ("layer,head,role,label\n0,0,previous_token,true\n2.7,1,previous_token,true\n",
         r"labels\.csv:3: column 'layer' is '2\.7'; expected an integer"),
        ("layer,head,role,label\n0,x,previous_token,true\n",
         r"labels\.csv:2: column 'head' is 'x'; expected an integer"),
        ("layer,head,role,label\n0,0,,true\n", r"labels\.csv:2: column 'role' is empty"),
        ("layer,head,role,label\n5,0,previous_token,true\n",
         r"labels\.csv:2: column 'layer' is 5; expected 0\.\.1 \(the model has 2 layers\)"),
        ("layer,head,role,label\n0,24,previous_token,true\n",
         r"labels\.csv:2: column 'head' is 24; expected 0\.\.23 \(the model has 24 heads per layer\)"),
        ("layer,head,role,label\n0,0,previous_token,true,extra\n", r"labels\.csv:2: 5 fields, expected 4"),
        ("layer,head,role,label\n0,0,previous_token\n", r"labels\.csv:2: 3 fields, expected 4"),
        ("", r"labels\.csv: is empty"),
        ("layer,head,role,label\n", r"labels\.csv: has a header but no rows"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"labels\.csv: is not a CSV text file"),
        (b"layer,head,role,label\n0,0,caf\xe9,true\n", r"labels\.csv:2: is not UTF-8"),
    ],
    ids=["yes-no", "no-label-column", "layer-2.7", "head-x", "role-empty", "layer-range", "head-range",
         "ragged-long", "ragged-short", "empty", "header-only", "binary", "latin1"],  # fmt: skip
)  # fmt: skip
def test_validate_refuses_a_bad_labels_csv(tmp_path, capsys, causal_planted, text, expected):
    path = tmp_path / "labels.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = tmp_path / "val"
    assert main(["validate", "--model", "planted", "--labels", str(path), "--out", str(out)]) == 2
    err = _one_line_error(capsys, "validate")
    assert str(path) in err
    import re

    assert re.search(expected, err), err
    assert not (out / "validation.csv").exists()


def test_validate_accepts_a_good_labels_csv_and_records_its_hash(tmp_path, capsys, causal_planted):
    path = tmp_path / "labels.csv"
    path.write_text(GOOD)
    out = tmp_path / "val"
    assert main(["validate", "--model", "planted", "--labels", str(path), "--out", str(out)]) == 0
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    record = json.loads((out / "validation.json").read_text())
    assert record["labels_sha256"] == sha and record["labels"] == str(path)
    assert sha in (out / "validation.md").read_text()


# ---- 7. interp invariance --text -----------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_invariance_refuses_empty_text(tmp_path, capsys, no_work, text):
    assert main(["invariance", "--model", "minilm", "--out", str(tmp_path / "inv"), "--text", text]) == 2
    err = _one_line_error(capsys, "invariance")
    assert "--text" in err and "empty" in err


def test_model_tokens_refuses_empty_text():
    from analyses.invariance.common import model_tokens

    model = planted_model()
    assert model_tokens(model, "the cat sleeps .").shape[-1] >= 4
    for text in ("", "  "):
        with pytest.raises(ValueError, match="empty"):
            model_tokens(model, text)


# ---- 8. output sets -------------------------------------------------------------------------------


def test_probe_interrupted_keeps_the_previous_set_and_rerun_keeps_other_commands_files(
    tmp_path, capsys, word_planted, cheap_figures, monkeypatch
):
    out = tmp_path / "planted"
    assert _probe(out, seed=0) == 0
    (out / "invariance").mkdir()
    (out / "invariance" / "invariance.csv").write_text("owned by interp invariance")
    (out / "validation").mkdir()
    (out / "validation" / "validation.csv").write_text("owned by interp validate")
    before = _tree(out)

    import analyses.heads.report as report

    heatmap = report.heatmap_figure

    def interrupted(*args, **kwargs):  # heads.csv is written by now; the figures come next
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "heatmap_figure", interrupted)
    try:
        rc = _probe(out, seed=1, n=10)
    except KeyboardInterrupt:  # escaping, it would stop the whole test session
        pytest.fail("the interrupt escaped `interp probe` (expected exit status 130 and a message)")
    assert rc == 130
    assert "interrupted" in capsys.readouterr().err
    assert _tree(out) == before  # not a seed-1 table beside a seed-0 report
    assert sorted(os.listdir(tmp_path)) == ["planted"]

    monkeypatch.setattr(report, "heatmap_figure", heatmap)
    assert _probe(out, seed=1, n=10) == 0
    after = _tree(out)
    assert after["heads.csv"] != before["heads.csv"]
    assert after["invariance/invariance.csv"] == b"owned by interp invariance"
    assert after["validation/validation.csv"] == b"owned by interp validate"
    assert sorted(os.listdir(tmp_path)) == ["planted"]


def test_a_second_writer_of_the_same_out_is_refused(tmp_path, capsys, no_work):
    from interp.io import output_dir

    out = tmp_path / "inv"
    with output_dir(out, owned=["invariance.csv"], command="interp invariance"):
        assert main(["invariance", "--model", "minilm", "--out", str(out)]) == 2
    err = _one_line_error(capsys, "invariance")
    assert "being written by another run" in err and f"pid {os.getpid()}" in err and "interp invariance" in err


def test_summary_flags_a_validation_of_an_older_heads_csv(tmp_path, capsys, word_planted, cheap_figures, monkeypatch):
    out = tmp_path / "out"
    assert _probe(out / "planted", seed=0) == 0
    word = word_planted
    model, _ = V.planted_model(seed=0)
    import analyses.validation.runner as run

    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: model)
    monkeypatch.setattr(run, "build_prompts", lambda m, n=8, seed=0: V.planted_prompts(n=n, seed=seed))
    labels = out / "planted" / "heads.csv"
    assert (
        main(["validate", "--model", "planted", "--labels", str(labels), "--out", str(out / "planted" / "validation")])
        == 0
    )
    old_sha = hashlib.sha256(labels.read_bytes()).hexdigest()

    assert main(["summary", "--out", str(out)]) == 0
    assert "out of date" not in (out / "summary.md").read_text().lower()

    monkeypatch.setattr(models, "load", lambda name, device="cpu", dtype=None: word)
    assert _probe(out / "planted", seed=1, n=10) == 0  # a new table; the validation is of the old one
    new_sha = hashlib.sha256(labels.read_bytes()).hexdigest()
    assert new_sha != old_sha
    assert main(["summary", "--out", str(out)]) == 0
    text = (out / "summary.md").read_text()
    assert "out of date" in text.lower() and old_sha[:12] in text and new_sha[:12] in text

    (out / "planted" / "validation" / "validation.json").unlink()  # as an older version wrote it
    assert main(["summary", "--out", str(out)]) == 0
    assert "does not record which heads.csv" in (out / "summary.md").read_text()


# ---- 9. interp train into an existing checkpoint --------------------------------------------------


def test_train_refuses_an_existing_checkpoint_unless_told(tmp_path, capsys):
    run = tmp_path / "run"
    one = _config(tmp_path, "one.json")
    two = _config(tmp_path, "two.json", n_layers=2, d_mlp=48)
    assert main(["train", "--config", str(one), "--out", str(run), "--no-progress"]) == 0
    weights = (run / "model.safetensors").read_bytes()
    capsys.readouterr()

    assert main(["train", "--config", str(two), "--out", str(run), "--no-progress"]) == 2
    err = _one_line_error(capsys, "train")
    assert "already holds a checkpoint" in err and "--resume" in err and "--force" in err
    assert (run / "model.safetensors").read_bytes() == weights

    assert main(["train", "--config", str(two), "--out", str(run), "--no-progress", "--resume", "--steps", "3"]) == 2
    err = _one_line_error(capsys, "train")
    assert "n_layers" in err and "d_mlp" in err and "1" in err and "2" in err and "n_heads" not in err
    assert (run / "model.safetensors").read_bytes() == weights

    assert main(["train", "--config", str(two), "--out", str(run), "--resume", "--force"]) == 2
    assert "either" in _one_line_error(capsys, "train")

    assert main(["train", "--config", str(two), "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "no such folder" in _one_line_error(capsys, "train")
    (tmp_path / "empty").mkdir()
    assert main(["train", "--config", str(two), "--out", str(tmp_path / "empty"), "--resume"]) == 2
    assert "no checkpoint to resume" in _one_line_error(capsys, "train")

    assert main(["train", "--config", str(two), "--out", str(run), "--no-progress", "--force"]) == 0
    assert json.loads((run / "interp_config.json").read_text())["config"]["n_layers"] == 2


# ---- 10. --out checked first, for every command ---------------------------------------------------

COMMANDS = {
    "probe": ["probe", "--model", "minilm"],
    "invariance": ["invariance", "--model", "minilm"],
    "validate": ["validate", "--model", "minilm"],
    "tour": ["tour", "--model", "minilm"],
    "summary": ["summary"],
    "train": ["train", "--config", "CONFIG"],
}


@pytest.mark.parametrize("bad", ["file", "name_too_long", "under_a_file"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_out_fails_first_with_one_line(tmp_path, capsys, no_work, command, bad):
    (tmp_path / "f.txt").write_text("x")
    out = {
        "file": tmp_path / "f.txt",
        "name_too_long": tmp_path / ("o" * 300),
        "under_a_file": tmp_path / "f.txt" / "o",
    }
    argv = [str(_config(tmp_path)) if a == "CONFIG" else a for a in COMMANDS[command]]
    t0 = time.perf_counter()
    assert main(argv + ["--out", str(out[bad])]) == 2
    assert time.perf_counter() - t0 < 1.0
    err = _one_line_error(capsys, command)
    assert "--out" in err and ("is a file" in err or "too long" in err)


# ---- messages: one line, exit status 2 ------------------------------------------------------------

LR_CASES = {"negative": -0.001, "nan": float("nan"), "string": "fast", "zero": 0}


def _bad_config(tmp_path, case):
    if case == "json-syntax":
        path = tmp_path / "c.json"
        path.write_text('{\n  "model": {"d_model": 16,},\n  "training": {}\n}\n')
        return path, r"c\.json:2:\d+: JSON syntax error"
    if case == "toml-syntax":
        path = tmp_path / "c.toml"
        path.write_text("[model]\nd_model = 16\nn_layers = = 2\n")
        return path, r"c\.toml:3:\d+: TOML syntax error"
    if case == "not-utf8":
        path = tmp_path / "c.json"
        path.write_bytes(b'{"model": {"name": "caf\xe9"}}')
        return path, r"c\.json:1: is not UTF-8"
    if case == "not-an-object":
        path = tmp_path / "c.json"
        path.write_text("[1, 2]")
        return path, r"c\.json: expected an object with \[model\]"
    conf = json.loads(json.dumps(TRAIN_CONFIG))
    conf["training"]["lr"] = LR_CASES[case]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(conf))  # NaN is written as the literal NaN, which json reads back
    return path, r"training\.lr=.*expected a positive finite number"


@pytest.mark.parametrize("case", ["json-syntax", "toml-syntax", "not-utf8", "not-an-object", *LR_CASES])
def test_train_config_messages(tmp_path, capsys, no_work, case):
    path, expected = _bad_config(tmp_path, case)
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    err = _one_line_error(capsys, "train")
    import re

    assert re.search(expected, err), err
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_train_config_with_a_byte_order_mark_is_read(tmp_path):
    from models.training import read_config

    plain = _config(tmp_path, "plain.json")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_config(bom) == read_config(plain) == TRAIN_CONFIG
    toml = tmp_path / "bom.toml"
    toml.write_bytes(b"\xef\xbb\xbf[model]\nd_model = 16\n")
    assert read_config(toml) == {"model": {"d_model": 16}}


@pytest.mark.parametrize("command", ["probe", "invariance", "validate", "tour"])
def test_unknown_model_is_one_line(tmp_path, capsys, command):
    assert main([command, "--model", "nope", "--out", str(tmp_path / "o")]) == 2
    err = _one_line_error(capsys, command)
    assert "unknown model 'nope'" in err


def test_real_bugs_keep_their_traceback(tmp_path, monkeypatch):
    def bug(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(models, "load", bug)
    with pytest.raises(ZeroDivisionError):
        main(["tour", "--model", "minilm", "--out", str(tmp_path / "t")])


def test_sigterm_mid_run_keeps_the_previous_output_and_frees_the_folder(tmp_path):
    """`kill PID` (SIGTERM) while a command works: exit status 143, the previous output set intact,
    no staging folder or lock left behind, and the next run may write."""
    import signal
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from interp.io import output_dir

    out = tmp_path / "out"
    with output_dir(out, owned=["summary.md", "comparison.md"], command="interp summary") as tmp:
        (tmp / "summary.md").write_text("previous summary")  # a previous run's set, with its manifest
        (tmp / "comparison.md").write_text("previous comparison")
    (out / "m").mkdir(parents=True)
    code = textwrap.dedent(
        f"""
        import sys, time
        import analyses.report.summary as S
        from analyses.cli import main

        def slow(out, dest=None):
            (dest / "summary.md").write_text("half of a new summary")
            print("ready", flush=True)
            time.sleep(60)

        S.summarise = slow
        sys.exit(main(["summary", "--out", {str(out)!r}]))
        """
    )
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "interp summary: terminated" in err and "Traceback" not in err
    assert (out / "summary.md").read_text() == "previous summary"
    assert (out / "comparison.md").read_text() == "previous comparison"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert not [n for n in os.listdir(out) if n.startswith(".interp-") and n != ".interp-manifest.json"]


# ---- second round (issue 24): links, a user's files, a signal after the commit --------------------


def test_a_planted_link_at_the_lock_clobbers_nothing(tmp_path, capsys, no_work):
    victim = tmp_path / "v.txt"
    victim.write_text("mine")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".t.interp-lock").symlink_to(victim)
    assert main(["tour", "--model", "minilm", "--out", str(tmp_path / "d" / "t")]) == 2
    assert "symbolic link" in _one_line_error(capsys, "tour")
    assert victim.read_text() == "mine"


def test_a_users_own_report_in_out_is_refused_before_the_work(tmp_path, capsys, no_work):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "heads.csv").write_text("my own table")
    assert main(["probe", "--model", "minilm", "--out", str(mine)]) == 2
    err = _one_line_error(capsys, "probe")
    assert "heads.csv" in err and "no toolkit run recorded" in err and "--force" in err
    assert (mine / "heads.csv").read_text() == "my own table"


def test_train_refuses_a_users_file_of_a_checkpoint_name_before_the_work(tmp_path, capsys, no_work):
    run = tmp_path / "run"
    run.mkdir()
    (run / "vocab.txt").write_text("my word list")  # the tokenizer's `vocab.*`
    assert main(["train", "--config", str(_config(tmp_path)), "--out", str(run), "--no-progress"]) == 2
    err = _one_line_error(capsys, "train")
    assert "vocab.txt" in err and "no toolkit run recorded" in err and "--force" in err
    assert (run / "vocab.txt").read_text() == "my word list"


def test_a_sigterm_after_the_commit_says_the_set_was_written(tmp_path, capsys, monkeypatch):
    import signal

    import analyses.cli.summary as cli_summary
    import analyses.report.summary as S

    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(S, "summarise", lambda out, dest=None: (dest / "summary.md").write_text("new"))
    monkeypatch.setattr(S, "model_pages", lambda out: {})
    # the signal arrives after the commit, while the command prints its last line
    monkeypatch.setattr(cli_summary, "print", lambda *a, **k: signal.raise_signal(signal.SIGTERM), raising=False)
    assert main(["summary", "--out", str(out)]) == 143
    err = capsys.readouterr().err
    assert "terminated" in err and f"a complete new output set to {out.resolve()} before the signal" in err
    assert (out / "summary.md").read_text() == "new"


# ---- issue 41: interp summary takes every model folder's checks before writing anything ----------


def test_summary_refused_by_a_model_folder_writes_nothing(tmp_path, capsys, word_planted, cheap_figures):
    """A model folder being written by another run, or whose report.html another command wrote,
    refuses `interp summary` before summary.md, index.html or any page is replaced."""
    from interp.io import output_lock

    out = tmp_path / "out"
    assert _probe(out / "a") == 0 and _probe(out / "b") == 0
    assert main(["summary", "--out", str(out)]) == 0
    names = ["summary.md", "index.html", "a/report.html", "b/report.html"]
    before = {n: ((out / n).stat().st_ino, (out / n).read_bytes()) for n in names}
    capsys.readouterr()
    with output_lock(out / "b", "interp probe"):
        assert main(["summary", "--out", str(out)]) == 2
    assert "being written by another run" in _one_line_error(capsys, "summary")
    assert {n: ((out / n).stat().st_ino, (out / n).read_bytes()) for n in names} == before
    manifest = json.loads((out / "b" / ".interp-manifest.json").read_text())
    manifest["files"]["report.html"] = "interp circuit"
    (out / "b" / ".interp-manifest.json").write_text(json.dumps(manifest))
    assert main(["summary", "--out", str(out)]) == 2
    assert "report.html (written by interp circuit)" in _one_line_error(capsys, "summary")
    assert {n: ((out / n).stat().st_ino, (out / n).read_bytes()) for n in names} == before
    assert not [p for p in out.rglob(".interp-*") if p.is_dir()]


# ---- issue 41: a failed run leaves no new empty --out (the commands that lock their folder themselves)


def test_a_failed_train_or_tour_removes_the_empty_out_it_created(tmp_path, capsys, word_planted):
    """`interp train` (a config with a syntax error) and `interp tour` (a head the model lacks) fail
    after --out was created and locked: the folders they created are removed again; a folder that
    existed before stays, with what it holds."""
    bad = tmp_path / "bad.toml"
    bad.write_text("x = [\n")
    new = tmp_path / "new" / "run"
    assert main(["train", "--config", str(bad), "--out", str(new), "--no-progress"]) == 2
    assert "bad.toml" in _one_line_error(capsys, "train")
    assert main(["tour", "--model", "planted", "--layer", "99", "--out", str(new)]) == 2
    assert "--layer 99" in _one_line_error(capsys, "tour")
    assert sorted(os.listdir(tmp_path)) == ["bad.toml"]  # neither new/ nor new/run, nor a lock file
    kept = tmp_path / "kept"
    kept.mkdir()
    assert main(["tour", "--model", "planted", "--layer", "99", "--out", str(kept)]) == 2
    capsys.readouterr()
    assert kept.is_dir() and os.listdir(kept) == []


# ---- issue 41: the module commands (python -m analyses.circuits.ioi / review) check --out first ----


@pytest.mark.parametrize("module", ["ioi", "review"])
def test_module_commands_refuse_a_bad_out_in_one_line_before_the_work(module, tmp_path, capsys, no_work):
    """`python -m analyses.circuits.ioi|review --out` a file, or a folder holding a file of their names
    that no toolkit run wrote: one line, exit status 2, before any model is loaded (it was a traceback
    after the whole run); the file stays."""
    import importlib

    mod = importlib.import_module(f"analyses.circuits.{module}")
    name = next(iter(mod.OUTPUTS))
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / name).write_text("a user's table")
    for out, says in ((afile, "is a file, not a folder"), (theirs, "no toolkit run recorded writing them")):
        assert mod.main(["--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"python -m analyses.circuits.{module}: ") and says in err, err
        assert "\n" not in err and "Traceback" not in err, err
    assert afile.read_text() == "mine" and (theirs / name).read_text() == "a user's table"
