"""One token display rule (``interp.display``) and the figures that use it: a token ``$$`` (SmolLM2
has one) is drawn as text, not parsed as matplotlib mathtext (issue 24, item 14)."""

from __future__ import annotations

import pytest

import models
from interp.display import figure_label, token_label
from tests.factories import tiny_config


@pytest.mark.parametrize(
    ("token", "shown"),
    [("Ġcat", "_cat"), ("▁cat", "_cat"), ("##ing", "##ing"), ("Ċ", "\\n"), ("a\nb", "a\\nb"), ("cat", "cat")],
)
def test_token_label_is_one_rule_for_every_tokenizer(token, shown):
    assert token_label(token) == shown


def test_figure_label_escapes_mathtext():
    assert figure_label("$$") == "\\$\\$" and figure_label("Ġ$x$") == "_\\$x\\$"


def _dollar_model() -> models.Transformer:
    """A tiny causal model whose word-level vocabulary holds ``$$`` and ``$x$``."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tm
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "the", "price", "is", "$$", "$x$", "."])}
    t = Tokenizer(tm.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]")
    cfg = tiny_config(d_vocab=len(vocab), n_layers=1, attention="causal", name="dollars $$")
    return models.Transformer(cfg, tokenizer=models.Tokenizer(hf), seed=0).eval()


def test_tour_pattern_with_a_dollar_token_draws(tmp_path):
    from analyses.report.tour import plot_pattern

    m = _dollar_model()
    path = plot_pattern(m, "the price is $$ $x$ .", 0, 0, tmp_path / "p.png")
    assert path.stat().st_size > 1000


def test_probe_pattern_figure_with_a_dollar_token_draws():
    import numpy as np

    from analyses.heads.report import pattern_figure

    ex = {"title": "x: L0H0 $", "sentence": "the $$ .", "tokens": ["the", "Ġ$$", "$x$"], "pattern": np.eye(3)}
    png = pattern_figure({**ex, "row": 1, "col": 0, "query_word": "$$"})
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
