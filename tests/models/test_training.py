"""Training: loss goes down on real text, runs repeat exactly, save/load/resume is bit-identical."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

import models
from analyses.data.corpora import english_passages
from models import bpe
from models.training import STATE_FILE, TrainConfig, Trainer, heldout_windows, lr_factor
from tests.factories import run_unblocking_fifo, tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


@pytest.fixture(scope="module")
def corpus():
    """A tiny English corpus: the first 200 distinct passages, a 320-token BPE trained on them."""
    train_texts, heldout_texts = english_passages(max_passages=200)
    tok = bpe.train_bpe(train_texts, vocab_size=320)
    return tok, bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts)


def _model(tok, seed=0, **kw):
    cfg = tiny_config(d_vocab=len(tok.hf), positional=kw.pop("positional", "rope"), tie_embeddings=True, **kw)
    return models.Transformer(cfg, tokenizer=tok, seed=seed)


TC = TrainConfig(steps=12, batch_size=4, lr=3e-3, warmup_steps=3, eval_windows=8, eval_every=4)


def test_split_is_fixed_and_disjoint():
    train_a, held_a = english_passages(max_passages=300)
    train_b, held_b = english_passages(max_passages=300)
    assert (train_a, held_a) == (train_b, held_b)
    assert not set(train_a) & set(held_a)
    assert 0.01 < len(held_a) / (len(train_a) + len(held_a)) < 0.15  # about 1 in 20
    # a passage's side of the split does not depend on how many passages were read
    train_small, held_small = english_passages(max_passages=100)
    assert set(held_small) <= set(held_a) and set(train_small) <= set(train_a)


def test_bpe_tokenizer_aligns_words_and_round_trips(corpus):
    tok, train_ids, _ = corpus
    batch = tok(["The cat sleeps, and he runs."])
    assert batch.words[0] == ["The", "cat", "sleeps", ",", "and", "he", "runs", "."]
    # every word gets at least one token, in order; only bare-space tokens are unaligned
    aligned = [w for w in batch.token_to_word[0] if w >= 0]
    assert sorted(set(aligned)) == list(range(8)) and aligned == sorted(aligned)
    assert all(t == "Ġ" for t, w in zip(batch.tokens[0], batch.token_to_word[0]) if w < 0)
    text = "Byte-level BPE never fails: naïve café ☃."
    assert tok.decode(tok.hf(text, add_special_tokens=False)["input_ids"]) == text
    assert int(train_ids.max()) < len(tok.hf) <= 320
    assert (train_ids == tok.hf.eos_token_id).sum() > 100  # one EOS per passage


def test_short_run_lowers_heldout_loss(corpus):
    tok, train_ids, heldout_ids = corpus
    model = _model(tok)
    tc = TrainConfig(steps=40, batch_size=8, lr=5e-3, warmup_steps=4, eval_windows=16)
    trainer = Trainer(model, train_ids, heldout_ids, tc)
    before = trainer.evaluate()
    assert abs(before - math.log(len(tok.hf))) < 0.3  # an untrained model is near uniform
    history = trainer.train(progress=False)
    after = history[-1]["heldout_loss"]
    assert after < before - 0.7, (before, after)


def _train(tok, train_ids, heldout_ids, steps, seed=0, tc=TC):
    trainer = Trainer(_model(tok, seed=seed), train_ids, heldout_ids, tc.replace(seed=seed))
    trainer.train(steps=steps, progress=False)
    return trainer


def test_same_seed_repeats_and_other_seed_differs(corpus):
    a, b, c = (_train(*corpus, steps=6, seed=s) for s in (0, 0, 1))
    assert [h["train_loss"] for h in a.history] == [h["train_loss"] for h in b.history]
    for (n, pa), pb in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(pa, pb), n
    assert [h["train_loss"] for h in a.history] != [h["train_loss"] for h in c.history]


def test_save_load_resume_is_bit_identical(corpus, tmp_path):
    tok, train_ids, heldout_ids = corpus
    straight = _train(tok, train_ids, heldout_ids, steps=TC.steps)

    half = _train(tok, train_ids, heldout_ids, steps=6)
    half.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / STATE_FILE).exists()
    # loading alone reproduces the model exactly (weights and tokenizer)
    loaded = models.load(str(tmp_path / "ckpt"))
    probe = heldout_windows(heldout_ids, 32, 2)
    assert torch.equal(loaded(probe), half.model.eval()(probe))
    assert loaded.tokenizer("The cat sleeps.").input_ids.tolist() == tok("The cat sleeps.").input_ids.tolist()

    resumed = Trainer.resume(tmp_path / "ckpt", train_ids, heldout_ids)
    assert resumed.step == 6
    resumed.train(progress=False)
    assert resumed.step == TC.steps
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
    assert [h.get("heldout_loss") for h in resumed.history] == [h.get("heldout_loss") for h in straight.history]
    for (n, pa), pb in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(pa, pb), n

    meta = json.loads((tmp_path / "ckpt" / "interp_config.json").read_text())
    assert meta["extra"]["step"] == 6 and meta["extra"]["training"]["seed"] == 0


def test_resume_needs_optimizer_state(corpus, tmp_path):
    tok, train_ids, heldout_ids = corpus
    t = Trainer(_model(tok), train_ids, heldout_ids, TC)
    t.save(tmp_path / "c", optimizer_state=False)
    with pytest.raises(FileNotFoundError, match="optimizer state"):
        Trainer.resume(tmp_path / "c", train_ids, heldout_ids)


def test_schedule_warms_up_then_decays_to_the_floor():
    tc = TrainConfig(steps=100, warmup_steps=10, lr=1.0, min_lr_ratio=0.1, schedule="cosine")
    f = [lr_factor(s, tc) for s in range(tc.steps)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(a < b for a, b in zip(f[:10], f[1:10]))
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert f[-1] == pytest.approx(0.1)
    mid = 10 + (100 - 10 - 1) // 2
    assert lr_factor(mid, tc) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (mid - 10) / 89)))
    lin = TrainConfig(steps=100, warmup_steps=10, min_lr_ratio=0.0, schedule="linear")
    assert lr_factor(99, lin) == pytest.approx(0.0) and lr_factor(10, lin) == pytest.approx(1.0)


def test_bad_settings_are_refused(corpus):
    tok, train_ids, heldout_ids = corpus
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="exp")
    with pytest.raises(ValueError, match="unknown training settings"):
        TrainConfig.from_dict({"stepz": 3})
    with pytest.raises(ValueError, match="seq_len"):
        Trainer(_model(tok), train_ids, heldout_ids, TC.replace(seq_len=64))
    with pytest.raises(ValueError, match="causal"):
        Trainer(
            models.Transformer(tiny_config(attention="bidirectional", d_vocab=len(tok.hf))), train_ids, heldout_ids, TC
        )
    with pytest.raises(ValueError, match="vocabulary"):
        Trainer(models.Transformer(tiny_config(d_vocab=50)), train_ids, heldout_ids, TC)


@pytest.mark.parametrize(
    "settings, expected",
    [
        (dict(lr=-0.001), r"training\.lr=-0\.001; expected a positive finite number"),
        (dict(lr=float("nan")), r"training\.lr=nan; expected a positive finite number"),
        (dict(lr=float("inf")), r"training\.lr=inf; expected a positive finite number"),
        (dict(lr="3e-3"), r"training\.lr='3e-3'; expected a positive finite number"),
        (dict(lr=True), r"training\.lr=True; expected a positive finite number"),
        (dict(steps=2.5), r"training\.steps=2\.5; expected an integer"),
        (dict(batch_size="8"), r"training\.batch_size='8'; expected an integer"),
        (dict(weight_decay=-1.0), r"training\.weight_decay=-1\.0; expected a finite number >= 0"),
        (dict(grad_clip=float("nan")), r"training\.grad_clip=nan; expected a finite number >= 0, or null"),
        (dict(betas=[0.9]), r"training\.betas=\[0\.9\]; expected two numbers in \[0, 1\)"),
        (dict(min_lr_ratio="low"), r"training\.min_lr_ratio='low'; expected a number in \[0, 1\]"),
    ],
)
def test_training_settings_of_the_wrong_kind_are_refused_before_training(settings, expected):
    """Refused when the config is built (before any data is read or step taken), not from inside
    torch's optimizer."""
    with pytest.raises(ValueError, match=expected):
        TrainConfig.from_dict(settings)


def test_a_checkpoint_is_saved_as_a_set(corpus, tmp_path, monkeypatch):
    """Weights, config, tokenizer and optimizer state of one step, or of the previous one: an
    interrupt while saving leaves the previous checkpoint whole; files that are not the
    checkpoint's (a model card) stay."""
    tok, train_ids, heldout_ids = corpus
    t = _train(tok, train_ids, heldout_ids, steps=2)
    folder = tmp_path / "ckpt"
    t.save(folder)
    (folder / "MODEL_CARD.md").write_text("card")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    t.train(steps=4, progress=False)

    def interrupted(obj, f, *args, **kwargs):  # the weights and config of step 4 are written by now
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t.save(folder)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert json.loads((folder / "interp_config.json").read_text())["extra"]["step"] == 2
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]

    t.save(folder, optimizer_state=False)
    assert (folder / "MODEL_CARD.md").read_text() == "card"
    assert not (folder / STATE_FILE).exists()  # a stale state would resume the wrong step
    assert json.loads((folder / "interp_config.json").read_text())["extra"]["step"] == 4


class _Planted:
    """An object whose unpickling runs code: what an attacker puts into a trainer state."""

    def __reduce__(self):
        return (os.system, (f"touch {os.environ['INTERP_TEST_MARKER']}",))


def test_resume_never_runs_code_planted_in_the_trainer_state(corpus, tmp_path, monkeypatch):
    tok, train_ids, heldout_ids = corpus
    t = Trainer(_model(tok), train_ids, heldout_ids, TC)
    t.save(tmp_path / "ckpt")
    state = torch.load(tmp_path / "ckpt" / STATE_FILE, weights_only=True)  # today's state: plain data
    marker = tmp_path / "ran"
    monkeypatch.setenv("INTERP_TEST_MARKER", str(marker))
    state["step"] = _Planted()
    torch.save(state, tmp_path / "ckpt" / STATE_FILE)
    with pytest.raises(ValueError, match=r"trainer_state\.pt: holds more than tensors and plain data"):
        Trainer.resume(tmp_path / "ckpt", train_ids, heldout_ids)
    assert not marker.exists()


def test_a_checkpoint_on_a_mount_point_saves(corpus, tmp_path, monkeypatch):
    """A checkpoint folder on another file system than its parent (a Docker volume): every rename
    stays inside it (forced here: a rename across its boundary fails with EXDEV)."""
    import errno

    tok, train_ids, heldout_ids = corpus
    t = _train(tok, train_ids, heldout_ids, steps=2)
    folder = (tmp_path / "vol").resolve()
    folder.mkdir()
    real = os.replace

    def inside(p):
        p = os.path.realpath(p)
        return p == str(folder) or p.startswith(str(folder) + os.sep)

    def replace(src, dst):
        if inside(src) != inside(dst):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    t.save(folder)
    t.save(folder)  # and a second checkpoint over the first
    monkeypatch.undo()
    assert Trainer.resume(folder, train_ids, heldout_ids).step == 2


def test_a_users_file_of_a_checkpoint_name_is_refused_before_training(corpus, tmp_path):
    from interp.io import OutputError

    tok, train_ids, heldout_ids = corpus
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "vocab.txt").write_text("my word list")  # matches the tokenizer's `vocab.*`
    t = Trainer(_model(tok), train_ids, heldout_ids, TC)
    with pytest.raises(OutputError, match=r"vocab\.txt.*no toolkit run recorded"):
        t.train(out_dir=folder, progress=False, force=False)
    assert t.step == 0 and (folder / "vocab.txt").read_text() == "my word list"


def test_a_config_can_come_from_a_pipe(tmp_path):
    from models.training import read_config

    for text in ('{"model": {"d_model": 16}}', "[model]\nd_model = 16\n"):
        r, w = os.pipe()
        os.write(w, text.encode())
        os.close(w)
        try:
            assert read_config(f"/dev/fd/{r}") == {"model": {"d_model": 16}}
        finally:
            os.close(r)


# --------------------------------------------------------------------------------------------------
# Issue 41 item 6: a checkpoint's interp_config.json that is a FIFO or a link to /dev/zero is refused
# in one line by the readers of the saved training settings too, not read for ever


def _saved_with_special_meta(corpus, tmp_path, kind):
    tok, train_ids, heldout_ids = corpus
    folder = tmp_path / "ckpt"
    Trainer(_model(tok), train_ids, heldout_ids, TC).save(folder)
    meta = folder / "interp_config.json"
    meta.unlink()
    if kind == "fifo":
        os.mkfifo(meta)
    else:
        meta.symlink_to("/dev/zero")
    return folder, meta


def _refused_without_hanging(call, fifo):
    """call() in a thread (``run_unblocking_fifo``): the ValueError it raised; the test fails instead
    of hanging on ``fifo``."""
    outcome, hung = run_unblocking_fifo(call, fifo)
    assert not hung, f"hung reading the FIFO {fifo}"
    error = outcome.get("error")
    assert isinstance(error, ValueError) and "\n" not in str(error), error
    assert str(fifo) in str(error) and "not a regular file" in str(error)
    return error


def test_resume_refuses_an_interp_config_that_is_a_fifo_instead_of_hanging(corpus, tmp_path):
    _, train_ids, heldout_ids = corpus
    folder, meta = _saved_with_special_meta(corpus, tmp_path, "fifo")
    _refused_without_hanging(lambda: Trainer.resume(folder, train_ids, heldout_ids), meta)


def test_the_positional_study_refuses_a_checkpoint_whose_interp_config_is_a_fifo(corpus, tmp_path):
    from analyses.positional.study import BUDGETS, load_scheme

    folder, meta = _saved_with_special_meta(corpus, tmp_path, "fifo")
    _refused_without_hanging(lambda: load_scheme(folder, BUDGETS["quick"]), meta)


def test_train_resume_refuses_an_interp_config_linked_to_dev_zero_in_one_line(corpus, tmp_path):
    """Before: read until memory ran out (here, under a 4 GiB address-space limit: a MemoryError traceback)."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    folder, meta = _saved_with_special_meta(corpus, tmp_path, "link to /dev/zero")
    config = Path(__file__).resolve().parents[2] / "configs" / "tiny.json"
    code = "import sys; from analyses.cli import main; sys.exit(main(sys.argv[1:]))"
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # noqa: E731
    done = subprocess.run(
        [sys.executable, "-c", code, "train", "--resume", "--out", str(folder), "--config", str(config)],
        capture_output=True, text=True, timeout=120, preexec_fn=limit, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("interp train: ") and str(meta) in lines[0] and "not a regular file" in lines[0]
