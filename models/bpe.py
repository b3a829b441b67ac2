"""A byte-level BPE tokenizer for the toolkit's own training runs.

>>> from analyses.data import english_passages          # the corpus (BoolQ passages, offline)
>>> from models import bpe
>>> train_texts, heldout_texts = english_passages()
>>> tok = bpe.train_bpe(train_texts, vocab_size=2048)      # a models.Tokenizer
>>> ids = bpe.encode_stream(tok, heldout_texts)             # 1-D LongTensor, passages joined by EOS
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from models.tokenizer import Tokenizer

EOS = "<|endoftext|>"


def train_bpe(texts: Iterable[str], vocab_size: int = 2048, min_frequency: int = 2) -> Tokenizer:
    """Train a byte-level BPE (GPT-2 style: every byte is a token, so nothing is ever unknown) and
    wrap it as a ``models.Tokenizer`` (fast tokenizer with offsets, so word alignment works).
    ``<|endoftext|>`` (id 0) separates documents and doubles as BOS and padding."""
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers import decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + 1:
        raise ValueError(f"vocab_size={vocab_size}: a byte-level BPE needs at least 257 (256 bytes + EOS)")
    raw = RawTokenizer(BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    # trim_offsets: a token's character span excludes its leading space, so it maps onto one word
    raw.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(list(texts), trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=EOS, bos_token=EOS, pad_token=EOS)
    return Tokenizer(hf, prepend_bos=False)


def encode_stream(tokenizer: Tokenizer, texts: Sequence[str]) -> torch.Tensor:
    """Encode passages and concatenate them into one 1-D LongTensor, each passage followed by EOS."""
    eos = tokenizer.hf.eos_token_id
    out: list[int] = []
    for ids in tokenizer.hf(list(texts), add_special_tokens=False)["input_ids"]:
        out.extend(ids)
        out.append(eos)
    return torch.tensor(out, dtype=torch.long)
