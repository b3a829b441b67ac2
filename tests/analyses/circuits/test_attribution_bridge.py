"""Our node-level EAP on SmolLM2 agrees with TransformerLens 4.3's own ``attribution_patch`` (node
granularity) on its ``TransformerBridge`` over the same weights. Our model runs its eager path
(``exact``, bitwise Hugging Face eager, which the bridge wraps), so the two differ only in how the
gradients are taken: bound |ours - TL| <= 1e-4 * max |score| (fp32). EAP-IG on the bridge is
refused, as TransformerLens refuses ig_steps > 1."""

from __future__ import annotations

import pytest
import torch

from analyses.circuits import Pairs, node_scores


def _ioi_pairs(model) -> Pairs:
    texts = [
        ("When John and Mary went to the store, John gave a drink to", " Mary", " John"),
        ("When Mary and John went to the park, Mary gave a book to", " John", " Mary"),
    ]
    clean, corrupted, right, wrong = [], [], [], []
    for text, a, b in texts:
        ids = model.to_tokens(text)[0]
        name_a, name_b = model.to_single_token(a), model.to_single_token(b)
        bad = ids.clone()
        bad[ids == name_b] = name_a  # the other name repeated: the indirect object is no longer unique
        clean.append(ids)
        corrupted.append(bad)
        right.append(name_a)
        wrong.append(name_b)
    assert len({len(c) for c in clean}) == 1
    n = len(clean[0])
    return Pairs(torch.stack(clean), torch.stack(corrupted), right, wrong, [n - 1] * len(texts))


def test_our_node_eap_matches_transformer_lens_on_the_bridge(smollm2, smollm2_bridge):
    pairs = _ioi_pairs(smollm2)
    before = smollm2.exact
    smollm2.exact = True
    try:
        ours = node_scores(smollm2, pairs, batch_size=2)
    finally:
        smollm2.exact = before
    theirs = node_scores(smollm2_bridge, pairs)
    assert list(ours.node) == list(theirs.node)
    scale = ours.score.abs().max()
    assert scale > 0.1
    err = (ours.score - theirs.score).abs().max()
    assert err <= 1e-4 * scale, (err, scale)


def test_eap_ig_on_the_bridge_is_refused(smollm2, smollm2_bridge):
    with pytest.raises(NotImplementedError, match="ig_steps"):
        node_scores(smollm2_bridge, _ioi_pairs(smollm2), method="eap-ig")
