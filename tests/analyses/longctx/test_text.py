"""Long windows of real text: exact lengths, each window from passages of its own, determinism by
seed, and a clear error when the shipped passages cannot fill the windows asked for."""

from __future__ import annotations

import pytest

from analyses.longctx.text import SEPARATOR, distinct_passages, long_windows


class PassageTokenizer:
    """One token per word, every token of a passage being that passage's index: a window's ids say
    which passages it was built from. Takes ``add_special_tokens`` as a Hugging Face tokenizer does."""

    def __init__(self):
        self.index = {p: i for i, p in enumerate(distinct_passages())}
        self.calls = []

    def encode(self, text, add_special_tokens=True):
        assert add_special_tokens is False  # the windows carry no special tokens
        assert text.endswith(SEPARATOR)
        self.calls.append(text)
        return [self.index[text[: -len(SEPARATOR)]]] * len(text.split())


class ToolkitLikeTokenizer:
    """The toolkit's tokenizer takes no ``add_special_tokens``."""

    def encode(self, text):
        return [len(w) for w in text.split()]


def test_windows_have_exactly_n_tokens_from_passages_of_their_own():
    tok = PassageTokenizer()
    windows = long_windows(tok, n_tokens=700, n_windows=5, seed=1)
    assert len(windows) == 5 and all(len(w) == 700 for w in windows)
    used = [set(w) for w in windows]
    for i in range(5):
        for j in range(i + 1, 5):
            assert not used[i] & used[j], f"windows {i} and {j} share a passage"
    # a window is whole passages in order, the last one cut: every passage but the last fills its run
    for w in windows:
        runs = [p for k, p in enumerate(w) if k == 0 or w[k - 1] != p]
        assert len(runs) == len(set(runs)) >= 2  # 700 words need several passages (~100 words each)


def test_seed_determines_the_windows():
    a = long_windows(PassageTokenizer(), 300, 3, seed=7)
    assert a == long_windows(PassageTokenizer(), 300, 3, seed=7)
    assert a != long_windows(PassageTokenizer(), 300, 3, seed=8)


def test_toolkit_tokenizer_without_add_special_tokens():
    windows = long_windows(ToolkitLikeTokenizer(), 50, 2, seed=0)
    assert [len(w) for w in windows] == [50, 50]


def test_too_many_windows_is_a_clear_error():
    n_passages = len(distinct_passages())
    with pytest.raises(ValueError, match=r"hold only \d+ windows of 100000 tokens; ask for at most that many"):
        long_windows(PassageTokenizer(), 100_000, n_passages, seed=0)
    with pytest.raises(ValueError, match="both must be >= 1"):
        long_windows(PassageTokenizer(), 0, 1)
    with pytest.raises(ValueError, match="both must be >= 1"):
        long_windows(PassageTokenizer(), 10, 0)
