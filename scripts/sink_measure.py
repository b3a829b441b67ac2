"""Issue 21's sink measurement, redone: on generated subject-verb items, how many SmolLM2 heads put
the verb row's largest weight on word 0, and how many reach 0.6 accuracy (verb -> subject, the
largest weight among the other words), with no BOS, with ``<|im_start|>`` first and with
``<|endoftext|>`` first (what the head probe now prepends). docs/head-roles.md ("The sink") quotes it.

    PYTHONPATH=. .venv/bin/python scripts/sink_measure.py [N]      # N items, default 120 (~3 min)
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import models
from analyses.data.generated import generate_subject_verb
from models.tokenizer import Tokenizer


def measure(m, tok, items, batch=20):
    L, H = m.cfg.n_layers, m.cfg.n_heads
    word0, acc, acc_x0, first = (np.zeros((L, H)) for _ in range(4))
    for s in range(0, len(items), batch):
        chunk = items[s : s + batch]
        b = tok.words([list(it.words) for it in chunk])
        pats = {}
        hooks = [
            (f"blocks.{l}.attn.hook_pattern", lambda x, hook, l=l: pats.__setitem__(l, x.detach())) for l in range(L)
        ]
        with torch.inference_mode():
            m.run_with_hooks(b.input_ids, attention_mask=b.attention_mask, fwd_hooks=hooks, return_type=None)
        for i, it in enumerate(chunk):
            align = torch.tensor(b.token_to_word[i])
            n = int(b.attention_mask[i].sum())
            cols = torch.zeros(align.shape[0], len(it.words))
            for t in range(n):
                if align[t] >= 0:
                    cols[t, align[t]] = 1
            verb = [t for t in range(n) if align[t] == it.query]
            for l in range(L):
                row = pats[l][i][:, verb].mean(1)  # [head, key]
                words = row @ cols  # [head, word]: attention to a word sums over its tokens
                special = row[:, align < 0].sum(-1, keepdim=True)  # special tokens as one column
                words[:, it.query] = -1.0  # self excluded
                word0[l] += (torch.cat([words, special], -1).argmax(-1) == 0).numpy()
                acc[l] += (words.argmax(-1) == it.target).numpy()
                words[:, 0] = -1.0
                acc_x0[l] += (words.argmax(-1) == it.target).numpy()
                first[l] += pats[l][i][:, :n, 0].mean(-1).numpy()
    k = len(items)
    return word0 / k, acc / k, acc_x0 / k, first / k


def main(n: int = 120) -> None:
    torch.set_num_threads(1)
    m = models.load("smollm2")
    items = generate_subject_verb(n=n, seed=0)
    hf = m.tokenizer.hf
    for name, tok in (
        ("no BOS", m.tokenizer),
        ("<|im_start|> first", Tokenizer(hf, prepend_bos=True)),
        ("<|endoftext|> first", Tokenizer(hf, prepend_bos=True, bos="<|endoftext|>")),
    ):
        word0, acc, acc_x0, first = measure(m, tok, items)
        best = np.argsort(-acc.ravel())[:4]
        tops = ", ".join(f"L{i // m.cfg.n_heads}H{i % m.cfg.n_heads} {acc.ravel()[i]:.2f}" for i in best)
        print(
            f"{name}: argmax on word 0 in >90% of rows: {(word0 > 0.9).sum()}/{word0.size} heads; "
            f"accuracy >= 0.6: {(acc >= 0.6).sum()}; with word 0 left out: {(acc_x0 >= 0.6).sum()}; "
            f"mean attention > 0.5 on position 0: {(first > 0.5).sum()}; best: {tops}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
