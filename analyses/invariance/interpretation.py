"""What the W_Q/W_K and W_V/W_O invariances mean for interpretation: which quantities of one head
(W_Q's entries, singular vectors and values, column space, the circuits W_QK and W_OV through
TransformerLens's ``FactoredMatrix``) change under an orthogonal R or an invertible A, and which do
not (``interpretation_table``, with what theory says; ``interpretation_rows``: its rows of the
invariance table).

The rotations themselves live in ``analyses.invariance.rotation``.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import Tensor

from analyses.invariance.common import (
    U64,
    attention_inputs,
    generator,
    make_row,
    model_tokens,
    random_invertible,
    random_orthogonal,
)
from interp.view import view

__all__ = ["interpretation_table", "interpretation_rows"]


def _sign_aligned_change(a: Tensor, b: Tensor) -> float:
    """1 - min_i |<a_i, b_i>| over columns (unit vectors): 0 when each vector is unchanged up to sign."""
    return float(1 - (a * b).sum(0).abs().min())


def _projector_change(a: Tensor, b: Tensor) -> float:
    """||P_a - P_b||_2 for the orthogonal projectors onto the column spaces (0 = same subspace)."""
    qa, _ = torch.linalg.qr(a)
    qb, _ = torch.linalg.qr(b)
    return float(torch.linalg.matrix_norm(qa @ qa.T - qb @ qb.T, ord=2))


# quantity -> (invariant under orthogonal R, invariant under invertible A); the rows' order
_THEORY = {
    "W_Q entries (the per-dimension query directions)": (False, False),
    "query values per d_head dimension, x W_Q": (False, False),
    "W_Q right singular vectors (d_head side)": (False, False),
    "W_Q singular values": (True, False),
    "W_Q column space in d_model (projector)": (True, True),
    "W_QK = W_Q W_K^T (FactoredMatrix.AB)": (True, True),
    "singular values of W_QK (FactoredMatrix.S)": (True, True),
    "scores x W_QK x^T": (True, True),
    "W_OV = W_V W_O (FactoredMatrix.AB)": (True, False),
    "singular values of W_OV (FactoredMatrix.S)": (True, False),
}


def _head_quantities(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor) -> dict[str, Tensor]:
    """Every quantity of ``_THEORY`` for one head's (possibly transformed) weights, in float64."""
    from transformer_lens import FactoredMatrix

    u, s, vh = torch.linalg.svd(wq, full_matrices=False)
    qk, ov = FactoredMatrix(wq, wk.T), FactoredMatrix(wv, wo)
    return {
        "W_Q entries (the per-dimension query directions)": wq,
        "query values per d_head dimension, x W_Q": x @ wq,
        "W_Q right singular vectors (d_head side)": vh.T,
        "W_Q singular values": s,
        "W_Q column space in d_model (projector)": wq,
        "W_QK = W_Q W_K^T (FactoredMatrix.AB)": qk.AB,
        "singular values of W_QK (FactoredMatrix.S)": qk.S,
        "scores x W_QK x^T": x @ qk.AB @ x.T,
        "W_OV = W_V W_O (FactoredMatrix.AB)": ov.AB,
        "singular values of W_OV (FactoredMatrix.S)": ov.S,
    }


def _change(key: str, old: Tensor, new: Tensor) -> float:
    """How much a quantity moved, in the measure that fits it (sign-aligned vectors, projectors, or
    max relative entry)."""
    if "singular vectors" in key:
        return _sign_aligned_change(old, new)
    if "column space" in key:
        return _projector_change(old, new)
    return float((new - old).abs().max() / old.abs().max())


def interpretation_table(
    model, layer: int = 0, head: int = 0, tokens: Tensor | None = None, seed: int = 0, cond: float = 100.0
) -> pd.DataFrame:
    """Quantities of one head before and after W_Q R, W_K R (orthogonal R) and W_Q A, W_K A^-T
    (invertible A, cond ``cond``), and W_V R, R^T W_O, all in float64 with TransformerLens's
    ``FactoredMatrix`` for the circuits. Columns: quantity, change_orthogonal, change_invertible,
    invariant_orthogonal (bool, what theory says), invariant_invertible, tolerance, passed.

    Tolerance: the quantities are computed in fp64 from matrices of norm ~||W||; by Weyl's theorem a
    singular value moves by at most ||dM||_2 <= gamma_d ||W|| (cond(A) for the product), so a
    relative change above ``tolerance = 10 * d_model * u64 * cond`` is a real change. With RoPE the
    table describes the pre-rotary bilinear form (the circuit seen by two tokens at the same position).
    """
    cfg = model.cfg  # with RoPE, W_Q W_K^T is the circuit before the rotary matrices (position 0)
    gen = generator(seed)
    g = head // cfg.group_size
    attn = model.blocks[layer].attn
    wq = attn.W_Q[head].detach().double()
    wk = attn.W_K[g].detach().double()
    wv = attn.W_V[g].detach().double()
    wo = attn.W_O[head].detach().double()
    r = random_orthogonal(cfg.d_head, gen)
    a = random_invertible(cfg.d_head, cond, gen)
    a_it = torch.linalg.inv(a).T
    tokens = model_tokens(model) if tokens is None else tokens
    x = attention_inputs(model, tokens)[layer][0].double()
    base = _head_quantities(x, wq, wk, wv, wo)
    rot = _head_quantities(x, wq @ r, wk @ r, wv @ r, r.T @ wo)
    inv = _head_quantities(x, wq @ a, wk @ a_it, wv @ a, a.T @ wo)  # W_V A, A^T W_O: orthogonality needed there
    rows = []
    for key, (inv_r, inv_a) in _THEORY.items():
        c_r, c_a = _change(key, base[key], rot[key]), _change(key, base[key], inv[key])
        tol_r, tol_a = 10 * cfg.d_model * U64, 10 * cfg.d_model * U64 * cond
        ok = ((c_r <= tol_r) == inv_r) and ((c_a <= tol_a) == inv_a)
        rows.append(
            dict(
                model=view(model).name,
                layer=layer,
                head=head,
                quantity=key,
                change_orthogonal=c_r,
                invariant_orthogonal=inv_r,
                change_invertible=c_a,
                invariant_invertible=inv_a,
                tolerance_orthogonal=tol_r,
                tolerance_invertible=tol_a,
                passed=ok,
            )
        )
    return pd.DataFrame(rows)


def interpretation_rows(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in table.itertuples():
        for kind, change, inv, tol in (
            ("orthogonal R", r.change_orthogonal, r.invariant_orthogonal, r.tolerance_orthogonal),
            ("invertible A", r.change_invertible, r.invariant_invertible, r.tolerance_invertible),
        ):
            rows.append(
                make_row(
                    r.model,
                    "rotation: what can be interpreted",
                    f"L{r.layer}H{r.head} {r.quantity} under {kind}",
                    change,
                    tol,
                    "holds" if inv else "breaks",
                    dtype="float64",
                    rule="10 * d_model * u64 * cond(A) (Weyl: |d sigma| <= ||dM||_2)",
                    detail="W_V A, A^T W_O for the invertible case (orthogonality is needed there)"
                    if "OV" in r.quantity
                    else "",
                )
            )
    return pd.DataFrame(rows)
