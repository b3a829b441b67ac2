"""A thin wrapper over a Hugging Face fast tokenizer that keeps the token-to-word alignment."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from interp.alignment import join_words, split_words, token_to_word

if TYPE_CHECKING:  # transformers is imported only when a Hugging Face tokenizer is loaded
    from transformers import PreTrainedTokenizerBase

Text = str | Sequence[str]  # a text, or a list of words

# What a folder needs to have a tokenizer, and what a model without one says when given text
ADD_TOKENIZER_FILES = (
    "add the tokenizer's files to the model folder and load it again: tokenizer.json, or the Hugging Face "
    "tokenizer files (tokenizer_config.json with vocab.txt, vocab.json + merges.txt or tokenizer.model), as "
    "tokenizer.save_pretrained(folder) writes them"
)
NO_TOKENIZER = f"has no tokenizer attached; pass token ids, or {ADD_TOKENIZER_FILES}"


class UnreadableTextError(ValueError):
    """A text every word of which the tokenizer loses to its unknown token: the model would read
    nothing of it. A ValueError (one line on the command line); callers that can do without one
    sentence (built-in examples on a tiny vocabulary) catch this class."""


class LostWordsWarning(UserWarning):
    """Words of a call lost to the unknown token or changed by the tokenizer's normalisation (see
    ``Batch.lost`` / ``Batch.changed``); its own category, so a caller can filter or record it."""


@dataclass
class Batch:
    """Tokenised, right-padded batch. ``token_to_word[b][t]`` is the word index of token t of
    sequence b, or -1 for special tokens, whitespace and padding (an [UNK] token that stands for a
    word, such as an emoji, belongs to that word)."""

    input_ids: Tensor  # [batch, pos]
    attention_mask: Tensor  # [batch, pos] 1 real, 0 padding
    token_type_ids: Tensor | None  # [batch, pos] or None
    tokens: list[list[str]]
    words: list[list[str]]
    token_to_word: list[list[int]]
    texts: list[str]
    # per sentence, per word: ``lost[b][w]`` the word reached the model only as the unknown token
    # ([UNK]: MiniLM's vocabulary has no 猫); ``changed[b][w]`` the tokenizer's normaliser changed it
    # other than by case (accents stripped: が becomes か, café becomes cafe), so the model reads
    # another word. A call that loses or changes words warns once, with the counts.
    lost: list[list[bool]] = field(default_factory=list)
    changed: list[list[bool]] = field(default_factory=list)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def lengths(self) -> list[int]:
        return self.attention_mask.sum(-1).tolist()

    @property
    def n_lost(self) -> int:
        """Words lost to the unknown token, over the batch."""
        return sum(sum(row) for row in self.lost)

    @property
    def n_changed(self) -> int:
        """Words changed by the tokenizer's normalisation (not lost), over the batch."""
        return sum(sum(row) for row in self.changed)


class Tokenizer:
    """Text or word lists in; token ids, mask and token-to-word alignment out.

    ``prepend_bos``: None follows the tokenizer's own habit (BERT adds [CLS]/[SEP]; SmolLM2 adds
    nothing); True puts the BOS token first where the tokenizer would not. ``bos``: the special
    token ``prepend_bos`` puts first, where it is not the tokenizer's own BOS (the head probe
    starts SmolLM2's sentences with ``<|endoftext|>``, its pre-training document separator, not
    with its BOS ``<|im_start|>``, a chat-turn marker).

    ``padding_side`` ("right" unless set) is the side ``model.to_tokens`` pads a batch of texts
    on when its own ``padding_side`` is not given, as on a TransformerLens model, whose
    ``utilities.get_attention_mask(model.tokenizer, tokens, prepend_bos)`` reads it too. Calling
    the tokenizer itself (``tokenizer(texts)``, ``model.to_words``) gives the word-aligned
    ``Batch``, which is right-padded always (its ``token_to_word`` rows end in -1s).

    Any other attribute (``decode``, ``batch_decode``, ``encode``, ``eos_token``, ``vocab_size``,
    ...) is the Hugging Face tokenizer's (``hf``), as TransformerLens users reach them through
    ``model.tokenizer``; ``bos_token``/``bos_token_id`` and ``pad_token``/``pad_token_id`` are
    this wrapper's own (the token ``prepend_bos`` puts first; the id padding is written with).
    """

    def __init__(
        self, hf_tokenizer: PreTrainedTokenizerBase, prepend_bos: bool | None = None, bos: str | None = None
    ) -> None:
        if not getattr(hf_tokenizer, "is_fast", False):
            raise TypeError("a fast (Rust-backed) Hugging Face tokenizer is needed for character offsets")
        if bos is not None and bos not in set(hf_tokenizer.all_special_tokens):
            known = hf_tokenizer.all_special_tokens
            raise ValueError(f"bos={bos!r} is not a special token of this tokenizer; it has {known}")
        self.hf = hf_tokenizer
        self.prepend_bos = prepend_bos
        self.bos = bos
        self._padding_side = "right"

    def __getattr__(self, name: str) -> object:
        # only reached for names this class does not define: the Hugging Face tokenizer's
        if name.startswith("_") or "hf" not in self.__dict__:  # unpickling, copying: not delegated
            raise AttributeError(name)
        try:
            return getattr(self.__dict__["hf"], name)
        except AttributeError:
            raise AttributeError(
                f"neither the toolkit's Tokenizer nor its Hugging Face tokenizer ({type(self.hf).__name__}) has "
                f"attribute {name!r}"
            ) from None

    @property
    def padding_side(self) -> str:
        """The side ``model.to_tokens`` pads on when not told: "right" (default) or "left"."""
        return self._padding_side

    @padding_side.setter
    def padding_side(self, side: str) -> None:
        if side not in ("right", "left"):
            raise ValueError(f"padding_side={side!r}; use 'right' or 'left'")
        self._padding_side = side

    @property
    def bos_token_id(self) -> int | None:
        """The id ``prepend_bos=True`` puts first: ``bos``'s, else the tokenizer's BOS."""
        return self.hf.bos_token_id if self.bos is None else self.hf.convert_tokens_to_ids(self.bos)

    @property
    def bos_token(self) -> str | None:
        """The token ``prepend_bos=True`` puts first (``bos_token_id``'s text)."""
        return self.hf.bos_token if self.bos is None else self.bos

    @property
    def own_start_id(self) -> int | None:
        """The id of the start token the Hugging Face tokenizer itself puts first ([CLS] for BERT,
        ``<s>`` for Llama 2, ``<bos>`` for Gemma), or None (SmolLM2, GPT-2 add nothing): what
        ``to_tokens`` keeps by default and drops for ``prepend_bos=False``."""
        hf = self.hf
        starts = {i for i in (hf.bos_token_id, getattr(hf, "cls_token_id", None)) if i is not None}
        with_special = hf("a")["input_ids"]
        plain = hf("a", add_special_tokens=False)["input_ids"]
        if with_special and with_special[0] in starts and with_special[: len(plain)] != plain:
            return with_special[0]
        return None

    @property
    def pad_token_id(self) -> int:
        for tid in (self.hf.pad_token_id, self.hf.eos_token_id, 0):
            if tid is not None:
                return tid
        return 0

    @property
    def pad_token(self) -> str:
        """The token padding is written with (``pad_token_id``'s text)."""
        return self.hf.convert_ids_to_tokens(self.pad_token_id)

    def _stands_for_a_word(self, tid: int, text: str, span: tuple[int, int]) -> bool:
        """Whether a token of a special id stands for a word of the text. Only the unknown token
        does: WordPiece writes [UNK] for a word it cannot spell (an emoji, a rare symbol), and that
        token covers the word's characters. Not when the text literally says "[UNK]", and not where
        the tokenizer also uses that id as BOS, EOS, padding or separator."""
        hf = self.hf
        if tid != hf.unk_token_id or text[span[0] : span[1]] == hf.unk_token:
            return False
        roles = ("bos", "eos", "pad", "cls", "sep", "mask")
        return tid not in {getattr(hf, f"{role}_token_id", None) for role in roles}

    def _encode_one(
        self, item: Text, index: int = 0
    ) -> tuple[list[int], list[int], list[str], list[str], list[int], str, list[bool], list[bool]]:
        if isinstance(item, str):
            if not item.strip():
                raise ValueError(f"empty text {item!r}: need at least one word")
            text = item
            words, spans = split_words(text)
        else:
            words = list(item)
            text, spans = join_words(words)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"text {index} holds a lone surrogate {text[e.start]!r} at character {e.start}, which is not "
                "valid Unicode; remove it, or decode the source bytes with errors='replace'"
            ) from None
        enc = self.hf(text, return_offsets_mapping=True, return_token_type_ids=True)
        ids = list(enc["input_ids"])
        offsets = [tuple(o) for o in enc["offset_mapping"]]
        types = list(enc.get("token_type_ids") or [0] * len(ids))
        bos = self.bos_token_id
        if self.prepend_bos and bos is not None and (not ids or ids[0] != bos):
            ids, offsets, types = [bos] + ids, [(0, 0)] + offsets, [0] + types
        align = token_to_word(text, spans, offsets)
        # a token of a special id never belongs to a word, whatever its offsets claim
        special = set(self.hf.all_special_ids)
        align = [
            -1 if tid in special and not self._stands_for_a_word(tid, text, span) else w
            for tid, w, span in zip(ids, align, offsets)
        ]
        lost, changed = self._word_flags(words, ids, align)
        if words and all(lost):
            raise UnreadableTextError(
                f"text {index} ({text[:60]!r}): every word is unknown to the tokenizer (each became "
                f"{self.hf.unk_token}), so the model would read nothing of it; use a model whose vocabulary covers it"
            )
        return ids, types, self.hf.convert_ids_to_tokens(ids), words, align, text, lost, changed

    def _word_flags(self, words: list[str], ids: list[int], align: list[int]) -> tuple[list[bool], list[bool]]:
        """Per word: lost (each of its tokens is the unknown token) and changed (some of its tokens
        are, or the tokenizer's normaliser rewrites it other than by case or spacing)."""
        unk = self.hf.unk_token_id
        tokens_of: list[list[int]] = [[] for _ in words]
        for tid, w in zip(ids, align):
            if w >= 0:
                tokens_of[w].append(tid)
        lost = [unk is not None and bool(toks) and all(t == unk for t in toks) for toks in tokens_of]
        # partly unknown (猫です: [UNK] て ##す) is changed, not lost
        changed = [not gone and unk in toks for gone, toks in zip(lost, tokens_of)]
        normalizer = getattr(getattr(self.hf, "backend_tokenizer", None), "normalizer", None)
        if normalizer is not None:
            for w, word in enumerate(words):
                seen, plain = "".join(normalizer.normalize_str(word).split()), "".join(word.split())
                changed[w] = changed[w] or (not lost[w] and seen not in (plain, plain.lower()))
        return lost, changed

    def __call__(self, texts: Text | Sequence[Text], max_length: int | None = None, **hf_kwargs: object) -> Batch:
        if hf_kwargs:
            raise TypeError(
                f"Tokenizer(texts) gives the word-aligned Batch and takes max_length only, not {sorted(hf_kwargs)}; "
                "for the Hugging Face tokenizer's own call use tokenizer.hf(texts, ...)"
            )
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError("empty input: no texts to tokenise")
        # each item is a text (str) or a list of words; use words() for one sentence's words
        encoded = [self._encode_one(t, i) for i, t in enumerate(texts)]
        n = max(len(e[0]) for e in encoded)
        if max_length is not None and n > max_length:
            longest = max(range(len(encoded)), key=lambda i: len(encoded[i][0]))
            raise ValueError(f"text {longest} has {n} tokens, more than max_length={max_length}")
        ids = torch.full((len(encoded), n), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), n), dtype=torch.long)
        types = torch.zeros((len(encoded), n), dtype=torch.long)
        for b, (i, ty, *_rest) in enumerate(encoded):
            ids[b, : len(i)] = torch.tensor(i)
            mask[b, : len(i)] = 1
            types[b, : len(i)] = torch.tensor(ty)
        batch = Batch(
            input_ids=ids,
            attention_mask=mask,
            token_type_ids=types,
            tokens=[e[2] for e in encoded],
            words=[e[3] for e in encoded],
            token_to_word=[e[4] + [-1] * (n - len(e[4])) for e in encoded],
            texts=[e[5] for e in encoded],
            lost=[e[6] for e in encoded],
            changed=[e[7] for e in encoded],
        )
        if batch.n_lost or batch.n_changed:
            warnings.warn(_word_loss_summary(batch), LostWordsWarning, stacklevel=2)
        return batch

    def words(self, word_lists: Sequence[Sequence[str]], max_length: int | None = None) -> Batch:
        """Tokenise pre-split words (one list per sentence), keeping the given word boundaries."""
        if isinstance(word_lists, (str,)) or (word_lists and isinstance(word_lists[0], str)):
            raise TypeError("words() takes a list of word lists, e.g. [['the', 'cat', 'sleeps']]")
        return self([list(w) for w in word_lists], max_length=max_length)

    def decode(self, ids: int | Sequence[int] | Tensor) -> str:
        return self.hf.decode(ids)

    def save(self, folder: str | Path) -> None:
        self.hf.save_pretrained(str(folder))


def _word_loss_summary(batch: Batch) -> str:
    """One line: how many words of the call were lost to [UNK] or changed, with examples."""
    n_words = sum(len(w) for w in batch.words)
    lost = [w for words, flags in zip(batch.words, batch.lost) for w, f in zip(words, flags) if f]
    changed = [w for words, flags in zip(batch.words, batch.changed) for w, f in zip(words, flags) if f]
    parts = []
    if lost:
        parts.append(f"{len(lost)} lost to the unknown token (e.g. {', '.join(map(repr, lost[:3]))})")
    if changed:
        parts.append(f"{len(changed)} changed by its normalisation (e.g. {', '.join(map(repr, changed[:3]))})")
    return f"tokenizer: of {n_words} words, " + " and ".join(parts) + "; see Batch.lost and Batch.changed"
