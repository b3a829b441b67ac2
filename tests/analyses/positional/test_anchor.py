"""The SmolLM2 anchor of the positional study: character spans tile the text, the two units, the
passage bootstrap, the character-frame gain, and end to end on a tiny study model and on SmolLM2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from analyses.data.corpora import english_passages
from analyses.positional import anchor as A
from analyses.positional import study as P
from models.tokenizer import Tokenizer
from tests.factories import tiny_text_budget

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "Indian nationality law -- It is generally difficult to have dual citizenship. Café, 5 €."

TINY = tiny_text_budget(
    name="test-anchor",
    n_ctx=128,  # the study's context: the gain's late range (tokens 96-126) lies inside it
    train=dict(steps=15, batch_size=8, warmup_steps=2, eval_windows=8),
    eval_windows=64,
    head_batch=32,
)


@pytest.fixture(scope="module")
def heldout():
    return english_passages()[1]


@pytest.fixture(scope="module")
def tiny_model():
    """A study model (the study's own training code, a tiny budget: seconds)."""
    data = P.prepare_data(TINY)
    model, _, _ = P.train_scheme("rope", TINY, data, progress=False)
    return model


def _check_tiling(hf, text):
    enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    starts, n_chars = A.token_spans(enc["offset_mapping"])
    assert starts[0] == 0 and np.all(n_chars >= 0)
    assert "".join(text[s : s + n] for s, n in zip(starts, n_chars)) == text  # the spans tile the text
    ascii_tokens = 0
    for tid, s, n in zip(enc["input_ids"], starts, n_chars):
        piece = text[s : s + n]
        if piece.isascii() and n > 0:
            assert hf.decode([tid]) == piece  # each token's span is the text it stands for
            ascii_tokens += 1
    assert ascii_tokens >= len(enc["input_ids"]) // 2
    return n_chars


def test_token_spans_tile_a_known_string_for_both_tokenizers(tiny_model, smollm2):
    study_chars = _check_tiling(tiny_model.tokenizer.hf, TEXT)
    smol_chars = _check_tiling(smollm2.tokenizer.hf, TEXT)
    assert study_chars.sum() == smol_chars.sum() == len(TEXT)
    assert len(smol_chars) < len(study_chars)  # SmolLM2's vocabulary is larger: fewer, longer tokens
    # the study's BPE trims the space from its offsets, SmolLM2's keeps it: the spans agree anyway
    assert A.token_spans([(0, 3), (4, 9)])[1].tolist() == [3, 6]
    assert A.token_spans([(0, 3), (3, 9)])[1].tolist() == [3, 6]


def test_the_start_token_is_the_document_separator(tiny_model, smollm2):
    for model in (tiny_model, smollm2):
        assert model.tokenizer.hf.convert_ids_to_tokens(A.start_token_id(model.tokenizer)) == "<|endoftext|>"
    # a tokenizer told to prepend a BOS keeps it
    told = Tokenizer(smollm2.tokenizer.hf, prepend_bos=True, bos="<|im_start|>")
    assert A.start_token_id(told) == smollm2.tokenizer.hf.convert_tokens_to_ids("<|im_start|>")


def _table(rows):
    return pd.DataFrame(rows, columns=["passage", "token", "char_start", "n_chars", "loss"])


def test_per_character_and_per_token_units_on_a_hand_made_table():
    table = _table(
        [
            (0, 0, 0, 2, 4.0),  # bin 0
            (0, 1, 2, 6, 3.0),  # bin 0
            (0, 2, 8, 4, 2.0),  # bin 1
            (1, 0, 0, 1, 5.0),  # bin 0
            (1, 1, 9, 5, 1.0),  # bin 1
        ]
    )
    char = A.binned_curve(table, bin_chars=8, unit="char", n_boot=20)
    token = A.binned_curve(table, bin_chars=8, unit="token", n_boot=20)
    assert char.bin_start.tolist() == [0, 8] and char.bin_mid.tolist() == [4.0, 12.0]
    assert char.loss.tolist() == pytest.approx([(4 + 3 + 5) / (2 + 6 + 1), (2 + 1) / (4 + 5)])
    assert token.loss.tolist() == pytest.approx([(4 + 3 + 5) / 3, (2 + 1) / 2])
    assert char.tokens.tolist() == [3, 2] and char.passages.tolist() == [2, 2]
    assert np.all(char.low <= char.loss + 1e-12) and np.all(char.loss <= char.high + 1e-12)
    gain = A.char_gain(table, {"early": (1, 8), "late": (8, 16)}, unit="char", n_boot=20)
    assert gain["early"] == pytest.approx(3 / 6) and gain["late"] == pytest.approx(3 / 9)
    assert gain["gain"] == pytest.approx(3 / 6 - 3 / 9)
    with pytest.raises(ValueError, match="early"):
        A.char_gain(table, {"early": (20, 30), "late": (8, 16)})
    nan = A.char_gain(table, {"early": (1, 8), "late": (20, 30)}, empty="nan")
    assert np.isnan(nan["gain"]) and "late" in nan["note"]
    with pytest.raises(ValueError, match="unit"):
        A.binned_curve(table, unit="word")


def _clustered(n_passages=20, per_passage=50, seed=0):
    """Tokens whose loss is mostly their passage's: the tokens of a passage are not independent."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, 1.0, n_passages)
    rows = [(p, t, t, 1, 3.0 + effect[p] + rng.normal(0, 0.1)) for p in range(n_passages) for t in range(per_passage)]
    table = _table(rows)
    return table.assign(token_id=np.arange(len(table)))


def test_the_bootstrap_resamples_passages_not_tokens():
    table = _clustered()
    by_passage = A.binned_curve(table, bin_chars=1000, n_boot=500, seed=1)
    by_token = A.binned_curve(table, bin_chars=1000, n_boot=500, seed=1, cluster="token_id")
    width_passage = float(by_passage.high[0] - by_passage.low[0])
    width_token = float(by_token.high[0] - by_token.low[0])
    assert width_passage > 3 * width_token  # the clustered interval is the honest, wider one
    # the interval is as wide as the spread of passage means says (sd / sqrt(n), 95%)
    means = table.groupby("passage").loss.mean()
    assert width_passage == pytest.approx(2 * 1.96 * means.std() / np.sqrt(len(means)), rel=0.3)
    again = A.binned_curve(table, bin_chars=1000, n_boot=500, seed=1)
    other = A.binned_curve(table, bin_chars=1000, n_boot=500, seed=2)
    assert again.equals(by_passage) and not other.equals(by_passage)  # seeded
    counts = A.passage_bootstrap(7, 30, seed=0)
    assert counts.shape == (30, 7) and np.all(counts.sum(1) == 7)  # each resample draws 7 passages


def test_gain_ranges_from_token_boundaries(tiny_model, heldout):
    assert A.gain_tokens(128) == {"early": (1, 8), "late": (96, 127)}  # study.measure's positions 1-7, 96-126
    assert A.gain_tokens(64) == {"early": (1, 8), "late": (48, 63)}
    assert A.gain_ranges(np.arange(128) * 3.0) == {"early": (3, 24), "late": (288, 381)}
    assert A.gain_ranges(np.arange(64) * 2.0) == {"early": (2, 16), "late": (96, 126)}
    with pytest.raises(ValueError, match="non-decreasing"):
        A.gain_ranges(np.arange(128)[::-1] * 3.0)
    bounds = A.token_boundaries(tiny_model.tokenizer, heldout)
    assert bounds.shape == (128,) and bounds[0] == 0 and np.all(np.diff(bounds) > 0)
    enc = tiny_model.tokenizer.hf(heldout, add_special_tokens=False)["input_ids"]
    long = [t for t, ids in zip(heldout, enc) if len(ids) >= 127]
    first = tiny_model.tokenizer.hf(long[0], add_special_tokens=False, return_offsets_mapping=True)
    assert bounds[1] <= max(len(t) for t in long) and first["offset_mapping"][0][0] == 0


def test_char_offset_losses_match_the_study_loss_by_position(tiny_model, heldout):
    """On passages whose first n_ctx - 1 tokens start before max_chars, the rows are exactly the
    study's passage-start windows (EOS, then the passage): the per-token losses by token index
    equal ``study.loss_by_position`` on ``passage_windows``."""
    n_ctx, max_chars = tiny_model.cfg.n_ctx, 320
    hf = tiny_model.tokenizer.hf
    texts = []
    for text in heldout:
        offsets = hf(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if len(text) >= max_chars and len(offsets) >= n_ctx and A.token_spans(offsets)[0][n_ctx - 2] < max_chars:
            texts.append(text)
        if len(texts) == 6:
            break
    table = A.char_offset_losses(tiny_model, texts, max_chars, batch_size=4)
    assert table.passage.unique().tolist() == list(range(6))
    assert table.groupby("passage").token.max().eq(n_ctx - 2).all()  # windows cut to the context
    windows = P.passage_windows(tiny_model.tokenizer, texts, n_ctx, 6)
    expected = P.loss_by_position(tiny_model, windows)
    got = table.groupby("token").loss.mean().to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # the same passages for any max_chars they all reach, and nothing past max_chars
    short = A.char_offset_losses(tiny_model, texts, 40)
    assert short.char_start.max() < 40 and short.passage.unique().tolist() == list(range(6))
    with pytest.raises(ValueError, match="max_chars"):
        A.char_offset_losses(tiny_model, texts, 10**6)


def test_smollm2_anchor_end_to_end(smollm2, tiny_model, heldout, tmp_path):
    bounds = A.token_boundaries(tiny_model.tokenizer, heldout)
    max_chars = -(-A.gain_ranges(bounds)["late"][1] // 16) * 16 + 64  # past the late range, at a bin edge
    result = A.smollm2_anchor(
        tiny_model.tokenizer,
        n_passages=3,
        max_chars=max_chars,
        n_boot=50,
        model=smollm2,
        study_models={"rope-tiny": tiny_model},
    )
    json.dumps(result)  # JSON-ready
    assert result["passages"] == 3 and result["study"]["rope-tiny"]["passage_index"] == result["passage_index"]
    assert result["start_token"] == "<|endoftext|>" and result["covered_to_max_chars"] == 1.0
    assert result["chars_per_token"] > result["study"]["rope-tiny"]["chars_per_token"]
    curve = pd.DataFrame(result["curve"])
    assert curve.bin_start.tolist() == list(range(0, max_chars, 16))
    # on the study's own axes: SmolLM2's loss per study token, and the tiny model's own token losses
    smol_frame, tiny_frame = result["token_frame"], result["study"]["rope-tiny"]["token_frame"]
    assert smol_frame["passages"] >= 1 and tiny_frame["passages"] == 3
    positions = pd.DataFrame(smol_frame["curve"]).position_start.tolist()
    assert positions == list(range(0, 127, 8)) and result["gain_tokens"] == {"early": [1, 8], "late": [96, 127]}
    own = A.char_offset_losses(tiny_model, heldout, max_chars, n_passages=3).groupby("token").loss.mean()
    assert tiny_frame["gain"]["gain"] == pytest.approx(own[1:8].mean() - own[96:127].mean(), abs=1e-6)
    # a model on its own tokens: its first token is the study's token 0, outside the gain's ranges
    assert tiny_frame["gain_first_token_zeroed"]["gain"] == pytest.approx(tiny_frame["gain"]["gain"], abs=1e-9)
    assert smol_frame["gain_first_token_zeroed"]["early"] <= smol_frame["gain"]["early"]
    for unit in ("gain_per_char", "gain_per_token"):
        g = result[unit]
        assert g["low"] <= g["gain"] <= g["high"] and g["gain"] == pytest.approx(g["early"] - g["late"])
    # SmolLM2's losses through the toolkit's own tokenizer path, <|endoftext|> prepended
    text = heldout[result["passage_index"][0]]
    tok = Tokenizer(smollm2.tokenizer.hf, prepend_bos=True, bos="<|endoftext|>")
    ids = tok([text]).input_ids
    table = A.char_offset_losses(smollm2, heldout, max_chars, n_passages=1)
    k = len(table)
    with torch.no_grad():
        logits = smollm2(ids[:, : k + 1], return_type="logits")
    direct = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1 : k + 1], reduction="none")
    np.testing.assert_allclose(table.loss.to_numpy(), direct.numpy(), rtol=1e-4, atol=1e-4)
    # figures: a panel by character offset, and the anchor on the study's token axes
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = A.plot_char_frame(result, tmp_path / "anchor.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    fig, ax = plt.subplots()
    A.plot_anchor(ax, result, "token")
    xy = ax.lines[0].get_xydata()
    token_curve = pd.DataFrame(smol_frame["curve"])
    np.testing.assert_allclose(xy, token_curve[["position_mid", "loss"]].to_numpy())
    assert ax.get_xlabel() == "position in the passage (study tokens)"
    with pytest.raises(ValueError, match="frame"):
        A.plot_anchor(ax, result, "word")
    plt.close(fig)


def test_losses_spread_evenly_over_characters():
    rows = _table([(0, 0, 0, 4, 4.0), (0, 1, 4, 0, 1.0), (0, 2, 4, 2, 2.0)])
    # 1 nat per character, the 0-character token's nat on character 4
    assert A._cumulative_loss(rows, 6).tolist() == [0, 1, 2, 3, 4, 6, 7]


def test_a_study_model_on_its_own_tokens_keeps_its_own_losses(tiny_model, heldout):
    table = A.char_offset_losses(tiny_model, heldout, 400, n_passages=6)
    wide = table.groupby("passage").n_chars.min() > 0  # passages without 0-character tokens
    table = table[table.passage.isin(wide[wide].index)]
    tokens = A.study_token_losses(table, heldout, tiny_model.tokenizer)
    assert tokens.passage.nunique() == table.passage.nunique() >= 3
    merged = tokens.merge(table, on=["passage", "token"], suffixes=("", "_own"))
    assert len(merged) == len(tokens) == 127 * tokens.passage.nunique()
    np.testing.assert_allclose(merged.loss, merged.loss_own, rtol=1e-9, atol=1e-9)
    # and the study tokens beyond the characters measured are not invented
    with pytest.raises(ValueError, match="max_chars"):
        A.study_token_losses(table[table.char_start < 40], heldout, tiny_model.tokenizer)
