"""``interp probe``'s work, callable from Python: load the model, keep the sentences it can score,
probe every head (``analyses.heads.probe.probe_items``).

>>> from analyses.data import load_items
>>> from analyses.heads.run import run_probe
>>> run = run_probe("minilm", load_items(n=50, sources="generated,conllu=my.conllu"))
>>> run.df, run.n_items, run.n_dropped
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from analyses.data.items import Item, keep_tokenizable
from analyses.heads.probe import probe_items
from interp.distributed import World, current
from models.tokenizer import LostWordsWarning

__all__ = ["ProbeRun", "run_probe"]


@dataclass
class ProbeRun:
    """What one probe run gives: the table (None on a worker other than rank 0), the model, how
    many sentences were probed and how many were dropped because a word got no token."""

    df: pd.DataFrame | None
    model: object
    n_items: int
    n_dropped: int
    words: dict = field(default_factory=dict)  # words, lost (to [UNK]), changed (by normalisation)

    @property
    def name(self) -> str:
        return self.model.cfg.name


def run_probe(
    model,
    items: Sequence[Item],
    *,
    n: int = 100,
    seed: int = 0,
    null_model: bool = True,
    n_boot: int = 200,
    alpha: float = 0.05,
    batch_size: int = 32,
    weighting: Sequence[str] = ("attention", "norm"),
    device: str = "cpu",
    dtype: str = "float32",
    world: World | None = None,
    progress: bool = True,
) -> ProbeRun:
    """The probe as ``interp probe`` runs it: ``model`` is a name or folder for ``models.load`` (on
    ``device``, in ``dtype``; with several CUDA workers each takes ``cuda:<local rank>``) or a loaded
    model. Sentences in which a word gets no token of its own under the model's tokenizer (a
    byte-level BPE can merge two punctuation words of real text) are dropped and counted: word-level
    scores cannot be defined there. ``n`` sets the random repeated-token sequences (``max(20,
    min(n, 200))``). The other arguments go to ``probe_items``."""
    import torch

    import models

    w = world if world is not None else current()  # probe_items takes the same default
    items = list(items)
    with torch.no_grad():  # scoped: also called in-process (tests, notebooks)
        if isinstance(model, str):
            if w.size > 1 and torch.device(device).type == "cuda":
                device = f"cuda:{w.local_rank}"  # one GPU per worker
            model = models.load(model, device=device, dtype=dtype)
        words: dict = {}
        with warnings.catch_warnings():  # lost and changed words are counted once for the run (``words``)
            warnings.simplefilter("ignore", LostWordsWarning)
            kept = items if model.tokenizer is None else keep_tokenizable(items, model.tokenizer, counts=words)
            df = probe_items(
                model,
                kept,
                n_repeat=max(20, min(n, 200)),
                seed=seed,
                null_model=null_model,
                n_boot=n_boot,
                alpha=alpha,
                batch_size=batch_size,
                progress=progress and w.is_main,
                weighting=tuple(weighting),
                world=world,
            )
    if w.is_main:
        df.attrs["word_losses"] = words
    return ProbeRun(
        df=df if w.is_main else None, model=model, n_items=len(kept), n_dropped=len(items) - len(kept), words=words
    )
