"""IOI against Wang et al.'s classes (analyses.circuits.ioi): each criterion against a computation by
hand on a tiny model with SmolLM2's tokenizer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from analyses.circuits.ioi import WANG_CLASSES, attention_to, classify, copy_scores, path_patch_queries
from analyses.circuits.tasks import circuit_task
from analyses.qk.run import task_positions
from interp.pairs import Pairs
from tests.analyses.circuits.test_contract_face import make_tiny_lm


@pytest.fixture(scope="module")
def ioi():
    model = make_tiny_lm()
    with torch.no_grad():  # larger weights than the init's, so that one head's output moves the logits visibly
        for p in model.parameters():
            if p.ndim == 2 and p.shape[0] != model.cfg.d_vocab:
                p.mul_(4.0)
    ct = circuit_task(model, "ioi", n=24, seed=2, min_accuracy=0, min_pairs=1)
    return model, ct.pairs


def test_attention_is_ends_row_on_the_indirect_object_and_s2(ioi):
    model, pairs = ioi
    to_io, to_s2 = attention_to(model, pairs, batch_size=5)
    rows, io, s2 = task_positions(model, "ioi", pairs)
    assert (s2 > io).all() and (rows > s2).all()  # ... IO ... S2 ... END
    with torch.no_grad():
        _, cache = model.run_with_cache(pairs.clean, attention_mask=pairs.attention_mask)
    for layer in range(model.cfg.n_layers):
        p = cache["pattern", layer].double()
        b = torch.arange(len(pairs))
        want_io = p[b, :, torch.as_tensor(rows), torch.as_tensor(io)].mean(0).numpy()
        want_s2 = p[b, :, torch.as_tensor(rows), torch.as_tensor(s2)].mean(0).numpy()
        np.testing.assert_allclose(to_io[layer], want_io, rtol=1e-6)
        np.testing.assert_allclose(to_s2[layer], want_s2, rtol=1e-6)


def test_copy_score_by_hand(ioi):
    model, pairs = ioi
    got = copy_scores(model, pairs, [(1, 2), (0, 3)], k=5).set_index(["layer", "head"])
    _, io, _ = task_positions(model, "ioi", pairs)
    with torch.no_grad():
        _, cache = model.run_with_cache(pairs.clean, attention_mask=pairs.attention_mask)
        cfg = model.cfg
        for layer, head in [(1, 2), (0, 3)]:
            hits = misses = 0
            for i in range(len(pairs)):
                x = cache["blocks.0.hook_resid_post"][i, io[i]]
                x = x / torch.sqrt(x.pow(2).mean() + cfg.eps) * model.blocks[layer].ln1.w  # RMSNorm
                out = x @ model.blocks[layer].attn.W_V[head // cfg.group_size] @ model.blocks[layer].attn.W_O[head]
                out = out / torch.sqrt(out.pow(2).mean() + cfg.eps) * model.ln_final.w
                logits = out @ model.W_U
                token = int(pairs.clean[i, io[i]])
                hits += token in logits.topk(5).indices.tolist()
                misses += token in (-logits).topk(5).indices.tolist()
            assert got.loc[(layer, head), "copy_score"] == pytest.approx(hits / len(pairs))
            assert got.loc[(layer, head), "negative_copy_score"] == pytest.approx(misses / len(pairs))


def test_path_patching_reaches_only_later_receivers(ioi):
    model, pairs = ioi
    assert (path_patch_queries(model, pairs, (1, 0), [(0, 1), (1, 3)], batch_size=8) == 0).all()
    effect = path_patch_queries(model, pairs, (0, 0), [(1, 1)], batch_size=8)
    other = path_patch_queries(model, pairs, (0, 0), [(1, 2)], batch_size=8)
    assert effect.shape == (len(pairs),) and np.abs(effect).max() > 1e-4 and not np.allclose(effect, other)
    same = Pairs(pairs.clean, pairs.clean, pairs.right, pairs.wrong, pairs.position, pairs.attention_mask)
    assert np.abs(path_patch_queries(model, same, (0, 0), [(1, 1)], batch_size=8)).max() < 1e-4  # no difference


def test_classify_gives_every_circuit_head_one_class(ioi):
    model, pairs = ioi
    scores = pd.Series({f"a{l}.h{h}": float((l + 1) * (h - 1.4)) for l in range(2) for h in range(4)})
    scores["m0"] = 99.0  # MLPs are not classified
    labels = pd.DataFrame(dict(layer=[0, 1], head=[0, 0], role=["previous_token", "induction"], label=[True, False]))
    t = classify(model, pairs, scores, labels, top=5, min_attention=0.0, min_copy=2.0, n_boot=50)
    assert t["node"].tolist() == ["a1.h3", "a1.h0", "a0.h3", "a0.h0", "a1.h2"]  # by |score|, heads only
    assert set(t["wang_class"]) <= set(WANG_CLASSES)
    assert t.set_index("node").loc["a0.h0", "probe_labels"] == "previous_token"
    assert t.set_index("node").loc["a1.h0", "probe_labels"] == ""  # not labelled: label False
    assert (t.set_index("node").loc[["a0.h0"], "wang_class"] == "previous token").all()
    assert t.attrs["name_movers"] == []  # min_copy 2.0: no head can be a name mover, so no path to patch


def test_another_models_labels_are_refused(ioi, tmp_path, monkeypatch, capsys):
    """A probe's heads.csv of another model (its ``model`` column) is refused by ``classify`` and by
    ``python -m analyses.circuits.ioi --labels``, as ``interp validate`` refuses it; the command says so
    in one line before the attribution runs."""
    import models
    from analyses.circuits import ioi as I
    from interp.view import view

    model, pairs = ioi
    scores = pd.Series({f"a{l}.h{h}": float(l + h) for l in range(2) for h in range(4)})
    rows = dict(model=["minilm"], layer=[0], head=[0], role=["previous_token"], label=[True])
    with pytest.raises(ValueError, match=r"column 'model' is 'minilm'.*" + repr(view(model).name)):
        classify(model, pairs, scores, pd.DataFrame(rows), top=3, n_boot=10)
    heads = tmp_path / "heads.csv"
    pd.DataFrame(rows).to_csv(heads, index=False)

    def no_attribution(*a, **k):
        raise AssertionError("the labels must be refused before the attribution")

    monkeypatch.setattr(models, "load", lambda name, **k: model)
    monkeypatch.setattr(I, "node_scores", no_attribution)
    assert I.main(["--labels", str(heads), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{heads}:2: column 'model' is 'minilm'" in err, err
