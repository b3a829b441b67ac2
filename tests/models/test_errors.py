"""Bad input gives a clear error that says what was wrong (issue 2)."""

from __future__ import annotations

import re

import pytest
import torch
from safetensors.torch import load_file, save_file

import models
from interp.hooks import UnknownHookError
from tests.factories import tiny_config


def _noop(value, hook):
    return None


# ---- hook names ---------------------------------------------------------------------------------


def test_an_unknown_hook_name_reaches_the_command_line_as_one_line(tiny, monkeypatch, capsys):
    """A KeyError escaped the command line's error handling as a traceback; bad input is one line."""
    import analyses.cli.tour as tour
    from analyses.cli import main

    def run(args):
        _, cache = tiny.run_with_cache(torch.arange(5))
        return cache["blocks.0.attn.hook_patern"]

    monkeypatch.delenv("INTERP_TRACEBACK", raising=False)
    monkeypatch.setattr(tour, "run", run)
    assert main(["tour"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interp tour: no activation 'blocks.0.attn.hook_patern'"), err
    assert "did you mean blocks.0.attn.hook_pattern" in err and "Traceback" not in err


def test_unknown_hook_name_suggests_near_names(tiny):
    tokens = torch.arange(5)
    bad = "blocks.0.attn.hook_patern"
    calls = [
        lambda: tiny.run_with_hooks(tokens, fwd_hooks=[(bad, _noop)]),
        lambda: tiny.run_with_cache(tokens, names_filter=bad),
        lambda: tiny.add_hook(bad, _noop),
    ]

    def ctx():
        with tiny.hooks(fwd_hooks=[(bad, _noop)]):
            tiny(tokens)

    for call in [*calls, ctx]:
        with pytest.raises(UnknownHookError) as err:
            call()
        msg = str(err.value)
        assert bad in msg and "blocks.0.attn.hook_pattern" in msg
    # it is also a KeyError, as TransformerLens users would catch, and a ValueError (bad input)
    assert issubclass(UnknownHookError, KeyError) and issubclass(UnknownHookError, ValueError)
    assert sum(len(h._forward_hooks) for h in tiny.hook_dict.values()) == 0


def test_unknown_layer_suggests_the_same_hook_elsewhere(tiny):
    with pytest.raises(UnknownHookError, match=r"blocks\.1\.attn\.hook_pattern"):
        tiny.run_with_hooks(torch.arange(5), fwd_hooks=[("blocks.7.attn.hook_pattern", _noop)])


# ---- context length -----------------------------------------------------------------------------


def test_too_long_for_learned_positions(tiny):
    n_ctx = tiny.cfg.n_ctx
    assert tiny(torch.zeros(n_ctx, dtype=torch.long)).shape[1] == n_ctx  # exactly n_ctx is fine
    for allow in (False, True):  # learned positions have no embedding past n_ctx, whatever is asked
        with pytest.raises(ValueError, match=rf"{n_ctx + 1} tokens.*n_ctx={n_ctx}.*learned"):
            tiny(torch.zeros(n_ctx + 1, dtype=torch.long), allow_beyond_ctx=allow)


def test_too_long_for_rope_unless_allowed():
    model = models.Transformer(tiny_config(positional="rope", n_ctx=8), seed=0).eval()
    tokens = torch.zeros(1, 12, dtype=torch.long)
    with pytest.raises(ValueError, match=r"12 tokens.*n_ctx=8.*allow_beyond_ctx=True"):
        model(tokens)
    with torch.no_grad():
        out = model(tokens, allow_beyond_ctx=True)
    assert out.shape == (1, 12, model.cfg.d_vocab) and torch.isfinite(out).all()


# ---- empty input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "empty",
    [torch.zeros(0, dtype=torch.long), torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, 4, dtype=torch.long), []],
    ids=["pos0", "batch1_pos0", "batch0", "empty_list"],
)
def test_empty_token_input(tiny, empty):
    with pytest.raises(ValueError, match="empty input"):
        tiny(empty)


@pytest.mark.parametrize("text", ["", "   ", [""]])
def test_empty_text(minilm, text):
    with pytest.raises(ValueError, match="empty"):
        minilm(text)


def test_empty_text_list(minilm):
    with pytest.raises(ValueError, match="empty"):
        minilm.to_words([])


def test_text_without_tokenizer(tiny):
    with pytest.raises(ValueError, match="no tokenizer"):
        tiny("the cat")


# ---- token ids, masks ---------------------------------------------------------------------------


def test_token_ids_out_of_range(tiny):
    v = tiny.cfg.d_vocab
    with pytest.raises(ValueError, match=rf"0\.\.{v - 1}.*max {v}"):
        tiny(torch.tensor([[1, 2, v]]))
    with pytest.raises(ValueError, match=r"min -1"):
        tiny(torch.tensor([[1, -1, 2]]))


def test_float_tokens_rejected(tiny):
    with pytest.raises(TypeError, match="integer"):
        tiny(torch.tensor([[1.0, 2.0]]))


def test_mask_shape_mismatch(tiny):
    tokens = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape("(2, 4)") + ".*" + re.escape("(2, 5)")):
        tiny(tokens, attention_mask=torch.ones(2, 4, dtype=torch.long))


def test_all_zero_mask_row(tiny):
    tokens = torch.zeros(2, 5, dtype=torch.long)
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1] = 0
    with pytest.raises(ValueError, match="all-zero"):
        tiny(tokens, attention_mask=mask)


def test_bad_return_type(tiny):
    with pytest.raises(ValueError, match="return_type"):
        tiny(torch.arange(4), return_type="probs")


def test_encoder_has_no_logits_or_loss():
    enc = models.Transformer(tiny_config(attention="bidirectional", lm_head=False), seed=0)
    with pytest.raises(ValueError, match="no LM head|without an LM head"):
        enc(torch.arange(4), return_type="logits")
    # AttributeError (what hasattr() relies on), with a message that says why and what to do
    with pytest.raises(AttributeError, match="no LM head.*no W_U.*return_type='hidden'"):
        _ = enc.W_U
    assert not hasattr(enc, "W_U")
    with pytest.raises(AttributeError, match="W_nonexistent"):  # other misses stay plain
        _ = enc.W_nonexistent


# ---- model names and checkpoints ----------------------------------------------------------------


def test_unknown_model_name_lists_known_ones():
    with pytest.raises(ValueError) as err:
        models.load("gpt-9000")
    msg = str(err.value)
    assert "gpt-9000" in msg
    for name in models.KNOWN_MODELS:
        assert name in msg
    assert {"minilm", "smollm2"} <= set(models.KNOWN_MODELS)


def test_folder_without_any_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="interp_config.json.*config.json"):
        models.load(str(tmp_path))


@pytest.fixture
def checkpoint(tmp_path, tiny):
    folder = models.save_checkpoint(tiny, tmp_path / "ckpt")
    return folder, folder / "model.safetensors"


def test_checkpoint_missing_tensor(checkpoint):
    folder, weights = checkpoint
    state = load_file(str(weights))
    del state["blocks.1.attn.k_weight"]
    save_file(state, str(weights))
    with pytest.raises(models.CheckpointError, match=r"missing tensor 'blocks\.1\.attn\.k_weight'.*\(32, 32\)"):
        models.load_checkpoint(folder)


def test_checkpoint_misshapen_tensor(checkpoint):
    folder, weights = checkpoint
    state = load_file(str(weights))
    state["blocks.0.mlp.in_weight"] = torch.zeros(63, 32)
    save_file(state, str(weights))
    with pytest.raises(models.CheckpointError) as err:
        models.load(str(folder))
    msg = str(err.value)
    assert "blocks.0.mlp.in_weight" in msg and "(63, 32)" in msg and "(64, 32)" in msg


def test_checkpoint_unexpected_tensor(checkpoint):
    folder, weights = checkpoint
    state = load_file(str(weights))
    state["blocks.0.attn.extra"] = torch.zeros(3)
    save_file(state, str(weights))
    with pytest.raises(models.CheckpointError, match=r"blocks\.0\.attn\.extra"):
        models.load_checkpoint(folder)


def test_checkpoint_without_weights(checkpoint):
    folder, weights = checkpoint
    weights.unlink()
    with pytest.raises(models.CheckpointError, match="model.safetensors"):
        models.load_checkpoint(folder)


def test_invalid_config_values():
    with pytest.raises(ValueError, match="positional.*'rotary'"):
        tiny_config(positional="rotary")
    with pytest.raises(ValueError, match="n_heads=4.*n_kv_heads=3"):
        tiny_config(n_kv_heads=3)
    with pytest.raises(ValueError, match="rotary_dim=12"):
        tiny_config(positional="rope", rotary_dim=12)
