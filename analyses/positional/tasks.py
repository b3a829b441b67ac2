"""Synthetic tasks, one claim each, and hand-set ("planted") models that solve them.

Every task draws batches from a ``torch.Generator`` (so a seed fixes the data) and returns
``(tokens, targets)``, both [batch, pos]; ``targets`` holds the token each position must predict
and ``IGNORE`` (-100, what ``cross_entropy`` skips) where nothing is asked.

- ``OrderTask``: fillers with one ``A`` and one ``B`` somewhere, then a query token; the answer is
  ``YES`` when A comes before B. The multiset of tokens is the same either way, so only order
  decides. ``balanced=True`` returns each sequence next to its A/B-swapped twin (opposite label):
  a model that cannot see order gives both the same answer, one right and one wrong, so exactly
  chance.
- ``CopyBackTask``: random symbols; position t must output the symbol k places back (t - k): a
  relative rule, so it can be tested on sequences longer than the training ones.
- ``InductionTask``: random tokens with one segment repeated later at a random offset; inside the
  second copy the next token is the one that followed the current token in the first copy
  (an induction head's job). The offset is random, so a fixed positional lookup cannot do it.

Planted models (``planted_order_model``, ``planted_copy_model``, ``planted_induction_model``,
``planted_duplicate_induction_model``: the same answer by a duplicate-token head and positions)
are ``models.Transformer``s with hand-set one-hot weights: they check that each task's labels
are what the rule says, and the order one shows the causal mask's leak (no positional encoding
at all, yet ~100% when causal, exactly chance when bidirectional).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

import models

IGNORE = -100


def _check_positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}={v!r}; expected a positive integer")


# --------------------------------------------------------------------------------------------------
# The tasks


@dataclass(frozen=True)
class OrderTask:
    """Does A come before B? ``length`` tokens: ``length - 1`` content tokens (fillers 0..n_fill-1,
    one A, one B), then QUERY; the target at the last position is YES or NO."""

    length: int = 16
    n_fill: int = 8
    name: str = "order"

    def __post_init__(self) -> None:
        _check_positive(length=self.length, n_fill=self.n_fill)
        if self.length < 3:
            raise ValueError(f"length={self.length}; the order task needs at least 3 (A, B, the query)")

    @property
    def A(self) -> int:
        return self.n_fill

    @property
    def B(self) -> int:
        return self.n_fill + 1

    @property
    def QUERY(self) -> int:
        return self.n_fill + 2

    @property
    def YES(self) -> int:
        return self.n_fill + 3

    @property
    def NO(self) -> int:
        return self.n_fill + 4

    @property
    def d_vocab(self) -> int:
        return self.n_fill + 5

    def sample(self, batch: int, gen: torch.Generator, balanced: bool = False) -> tuple[Tensor, Tensor]:
        """``balanced``: rows 2i and 2i+1 are the same sequence with A and B swapped (``batch``
        must be even); otherwise each row is drawn independently."""
        _check_positive(batch=batch)
        if balanced and batch % 2:
            raise ValueError(f"a balanced batch holds sequences and their swapped twins: batch={batch} must be even")
        n = batch // 2 if balanced else batch
        content = self.length - 1
        tokens = torch.randint(0, self.n_fill, (n, self.length), generator=gen)
        # two distinct positions per row: the first for A, the second for B
        pos = torch.argsort(torch.rand(n, content, generator=gen), dim=1)[:, :2]
        rows = torch.arange(n)
        tokens[rows, pos[:, 0]] = self.A
        tokens[rows, pos[:, 1]] = self.B
        tokens[:, -1] = self.QUERY
        if balanced:
            twin = tokens.clone()
            twin[rows, pos[:, 0]] = self.B
            twin[rows, pos[:, 1]] = self.A
            tokens = torch.stack([tokens, twin], dim=1).flatten(0, 1)
        return tokens, self.labels(tokens)

    def labels(self, tokens: Tensor) -> Tensor:
        """The targets of ``tokens`` by the rule (read off the tokens, not the sampler)."""
        pos_a = (tokens == self.A).float().argmax(dim=1)
        pos_b = (tokens == self.B).float().argmax(dim=1)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, -1] = torch.where(pos_a < pos_b, self.YES, self.NO)
        return targets

    @torch.no_grad()
    def accuracy(self, model: models.Transformer, tokens: Tensor, targets: Tensor) -> float:
        """Share of rows whose YES logit beats the NO logit exactly when the answer is YES (ties
        count as NO). Computed in float64 so that the swapped twins of an order-blind model,
        whose logits are equal up to rounding, cannot be told apart by rounding noise."""
        model.eval()
        logits = model.double()(tokens, return_type="logits", allow_beyond_ctx=True)[:, -1]
        model.float()
        says_yes = logits[:, self.YES] > logits[:, self.NO]
        return float((says_yes == (targets[:, -1] == self.YES)).double().mean())


@dataclass(frozen=True)
class CopyBackTask:
    """Random symbols 0..n_symbols-1; the target at position t >= k is the symbol at t - k."""

    length: int = 32
    k: int = 2
    n_symbols: int = 16
    name: str = "copy_back"

    def __post_init__(self) -> None:
        _check_positive(length=self.length, k=self.k, n_symbols=self.n_symbols)
        if self.k >= self.length:
            raise ValueError(f"k={self.k} must be smaller than length={self.length}")

    @property
    def d_vocab(self) -> int:
        return self.n_symbols

    def sample(self, batch: int, gen: torch.Generator, length: int | None = None) -> tuple[Tensor, Tensor]:
        length = length or self.length
        _check_positive(batch=batch, length=length)
        tokens = torch.randint(0, self.n_symbols, (batch, length), generator=gen)
        return tokens, self.labels(tokens)

    def labels(self, tokens: Tensor) -> Tensor:
        targets = torch.full_like(tokens, IGNORE)
        targets[:, self.k :] = tokens[:, : -self.k]
        return targets

    @torch.no_grad()
    def accuracy_by_position(self, model: models.Transformer, tokens: Tensor, targets: Tensor) -> Tensor:
        """[pos] share of rows whose argmax is the target (NaN where nothing is asked)."""
        model.eval()
        pred = model(tokens, return_type="logits", allow_beyond_ctx=True).argmax(-1)
        asked = targets != IGNORE
        hits = ((pred == targets) & asked).double().sum(0)
        return torch.where(asked.any(0), hits / asked.double().sum(0).clamp(min=1), torch.nan)


@dataclass(frozen=True)
class InductionTask:
    """``length`` random tokens (ids 0..d_vocab-1; with ``distinct``, all distinct but for the
    copy) in which the segment [p, p+segment) reappears at [q, q+segment), q >= p + segment, both
    offsets random. Targets: the next token everywhere (language modelling); ``copy_mask`` marks
    the predictions inside the second copy (positions q..q+segment-2), the only ones an induction
    head can make better than chance."""

    length: int = 64
    segment: int = 16
    d_vocab: int = 64
    distinct: bool = False  # True: every token outside the second copy is distinct (no chance repeats)
    name: str = "induction"

    def __post_init__(self) -> None:
        _check_positive(length=self.length, segment=self.segment, d_vocab=self.d_vocab)
        if 2 * self.segment > self.length:
            raise ValueError(f"two copies of segment={self.segment} do not fit in length={self.length}")
        if self.distinct and self.d_vocab < self.length - self.segment:
            raise ValueError(
                f"d_vocab={self.d_vocab} < length - segment={self.length - self.segment}: the tokens outside the "
                "copy are distinct, so the vocabulary must hold them all"
            )

    def sample_with_mask(self, batch: int, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """(tokens, targets, copy_mask), each [batch, length]."""
        _check_positive(batch=batch)
        n, s = self.length, self.segment
        p = torch.randint(0, n - 2 * s + 1, (batch,), generator=gen)
        # q uniform in [p + s, n - s]
        q = p + s + (torch.rand(batch, generator=gen) * (n - s - (p + s) + 1).float()).long()
        offs = torch.arange(s)
        rows = torch.arange(batch)[:, None]
        second = torch.zeros(batch, n, dtype=torch.bool)
        second[rows, q[:, None] + offs] = True
        if self.distinct:  # every token outside the second copy is distinct: the copy is the only repetition
            fill = torch.argsort(torch.rand(batch, self.d_vocab, generator=gen), dim=1)[:, : n - s]
        else:
            fill = torch.randint(0, self.d_vocab, (batch, n - s), generator=gen)
        tokens = torch.zeros(batch, n, dtype=torch.long)
        tokens[~second] = fill.flatten()
        tokens[rows, q[:, None] + offs] = tokens[rows, p[:, None] + offs]
        mask = torch.zeros(batch, n, dtype=torch.bool)
        mask[rows, q[:, None] + offs[:-1]] = True
        return tokens, self.labels(tokens), mask

    def sample_at_distance(
        self, batch: int, gen: torch.Generator, length: int, d_min: int, d_max: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Like ``sample_with_mask`` but ``length`` tokens (any length: to test beyond the training
        one) and the second copy exactly d = q - p after the first, d uniform in [d_min, d_max]
        (d >= segment, so the copies do not overlap; d + segment <= length, so both fit)."""
        _check_positive(batch=batch, length=length, d_min=d_min, d_max=d_max)
        s = self.segment
        if not s <= d_min <= d_max <= length - s:
            raise ValueError(
                f"distances [{d_min}, {d_max}] must lie in [segment, length - segment] = [{s}, {length - s}]"
            )
        d = torch.randint(d_min, d_max + 1, (batch,), generator=gen)
        p = (torch.rand(batch, generator=gen) * (length - s - d + 1).float()).long()
        q = p + d
        offs = torch.arange(s)
        rows = torch.arange(batch)[:, None]
        tokens = torch.randint(0, self.d_vocab, (batch, length), generator=gen)
        tokens[rows, q[:, None] + offs] = tokens[rows, p[:, None] + offs]
        mask = torch.zeros(batch, length, dtype=torch.bool)
        mask[rows, q[:, None] + offs[:-1]] = True
        return tokens, self.labels(tokens), mask

    def sample(self, batch: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        tokens, targets, _ = self.sample_with_mask(batch, gen)
        return tokens, targets

    def labels(self, tokens: Tensor) -> Tensor:
        targets = torch.full_like(tokens, IGNORE)
        targets[:, :-1] = tokens[:, 1:]
        return targets


# --------------------------------------------------------------------------------------------------
# Planted solutions: hand-set one-hot weights in a models.Transformer


def _planted_config(
    d_model: int, n_ctx: int, d_vocab: int, n_layers: int, n_heads: int, d_head: int, **kw
) -> models.Config:
    return models.Config(
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_head=d_head,
        d_mlp=1,
        d_vocab=d_vocab,
        n_ctx=n_ctx,
        norm="rmsnorm",  # no mean subtraction: one-hot directions stay one-hot up to a positive scale
        tie_embeddings=False,
        name="planted",
        **kw,
    )


@torch.no_grad()
def _blank(cfg: models.Config) -> models.Transformer:
    """A model whose every weight is zero (norm gains one): attention-only, since the MLPs write 0."""
    model = models.Transformer(cfg, seed=0)
    for name, p in model.named_parameters():
        p.fill_(1.0 if name.rsplit(".", 1)[-1] == "w" else 0.0)
    return model.eval()


def planted_order_model(task: OrderTask, attention: str = "causal", gain: float = 50.0) -> models.Transformer:
    """Solves the order task with no positional encoding, through the causal mask alone.

    Layer 0: at B, a head attends to A if A is in B's prefix (a causal model sees only the
    prefix) and writes "A came first" into a flag dimension. Layer 1: the query attends to B and
    copies the flag; the unembedding says YES when the flag outweighs a constant dimension. Under
    bidirectional attention B always sees A, the flag is set either way, and the model is
    order-blind (always YES: half right on a balanced set)."""
    V = task.d_vocab
    d_model = V + 2  # token one-hots, the flag, a constant 1 (its logit is the YES/NO threshold)
    flag, const = V, V + 1
    cfg = _planted_config(d_model, task.length, V, 2, 1, d_model, positional="none", attention=attention)
    m = _blank(cfg)
    with torch.no_grad():
        m.W_E[:] = torch.eye(V, d_model)
        m.W_E[:, const] = 1.0
        a0, a1 = m.blocks[0].attn, m.blocks[1].attn
        # layer 0: query B matches key A; keys other than A score 0, so without A in B's prefix
        # the head spreads over fillers and B itself, which carry no flag
        a0.W_Q[0, task.B, 0] = gain
        a0.W_K[0, task.A, 0] = 1.0
        a0.W_V[0, task.A, flag] = 1.0
        a0.W_O[0] = torch.eye(d_model)
        # layer 1: the query attends to B and reads B's flag
        a1.W_Q[0, task.QUERY, 0] = gain
        a1.W_K[0, task.B, 0] = 1.0
        a1.W_V[0, flag, flag] = 1.0
        a1.W_O[0] = torch.eye(d_model)
        m.unembed_weight[task.YES, flag] = 1.0
        m.unembed_weight[task.NO, const] = 1.0
    return m


def _positional_copy_weights(
    model: models.Transformer, layer: int, V: int, pos0: int, n_ctx: int, back: int, gain: float, src: slice, dst: int
) -> None:
    """Head 0 of ``layer`` attends from position t to t - back (learned one-hot positions at
    dims pos0..pos0+n_ctx-1) and copies the token one-hot in ``src`` dims to dims dst..dst+V-1."""
    attn = model.blocks[layer].attn
    for p in range(back, n_ctx):
        attn.W_Q[0, pos0 + p, p - back] = gain
    for p in range(n_ctx):
        attn.W_K[0, pos0 + p, p] = 1.0
    for v in range(V):
        attn.W_V[0, src.start + v, v] = 1.0
        attn.W_O[0, v, dst + v] = 1.0


def planted_copy_model(task: CopyBackTask, gain: float = 50.0) -> models.Transformer:
    """One attention head with learned one-hot positions attends from t to t - k and copies the
    symbol there into an output subspace that the unembedding reads."""
    V, n = task.n_symbols, task.length
    d_model = V + n + V + 1  # token, position, copied token, constant
    d_head = max(n, V)
    cfg = _planted_config(d_model, n, V, 1, 1, d_head, positional="learned")
    m = _blank(cfg)
    with torch.no_grad():
        m.W_E[:] = torch.eye(V, d_model)
        m.W_pos[:] = torch.eye(n, d_model).roll(V, dims=1)
        _positional_copy_weights(m, 0, V, V, n, task.k, gain, slice(0, V), V + n)
        m.unembed_weight[:, V + n : V + n + V] = torch.eye(V)
    return m


def planted_induction_model(task: InductionTask, gain: float = 50.0) -> models.Transformer:
    """Two heads in composition. Layer 0 (previous-token head, learned one-hot positions): copies
    the previous token into a "prev" subspace. Layer 1 (induction head): the query's current
    token matches keys whose previous token equals it; the head copies that key's own token to an
    output subspace, which the unembedding reads."""
    V, n = task.d_vocab, task.length
    d_model = V + n + V + V + 1  # token, position, previous token, output, constant
    prev0, out0 = V + n, V + n + V
    d_head = max(n, V)
    cfg = _planted_config(d_model, n, V, 2, 1, d_head, positional="learned")
    m = _blank(cfg)
    with torch.no_grad():
        m.W_E[:] = torch.eye(V, d_model)
        m.W_pos[:] = torch.eye(n, d_model).roll(V, dims=1)
        _positional_copy_weights(m, 0, V, V, n, 1, gain, slice(0, V), prev0)
        a1 = m.blocks[1].attn
        for v in range(V):
            a1.W_Q[0, v, v] = gain
            a1.W_K[0, prev0 + v, v] = 1.0
            a1.W_V[0, v, v] = 1.0
            a1.W_O[0, v, out0 + v] = 1.0
        # position 0 has no previous token (layer 0 copied its own there): push its key away
        a1.W_K[0, V, :V] = -20.0
        m.unembed_weight[:, out0 : out0 + V] = torch.eye(V)
    return m


def planted_duplicate_induction_model(task: InductionTask, gain: float = 50.0) -> models.Transformer:
    """The other route to the same answer (Q-composition through absolute positions). Layer 0
    (duplicate-token head): each token attends to an earlier occurrence of itself (its own position
    scores minus ``gain``) and writes that occurrence's position into a "dup" subspace. Layer 1: the
    query reads the dup position p' and attends to the key at absolute position p' + 1, whose token
    it copies to the output subspace. Positions are learned one-hots."""
    V, n = task.d_vocab, task.length
    d_model = V + n + n + V  # token, position, duplicate's position, output
    dup0, out0 = V + n, V + 2 * n
    cfg = _planted_config(d_model, n, V, 2, 1, V + n, positional="learned")
    m = _blank(cfg)
    with torch.no_grad():
        m.W_E[:] = torch.eye(V, d_model)
        m.W_pos[:] = torch.eye(n, d_model).roll(V, dims=1)
        a0, a1 = m.blocks[0].attn, m.blocks[1].attn
        for v in range(V):  # same token: + gain
            a0.W_Q[0, v, v] = gain
            a0.W_K[0, v, v] = 1.0
        for p in range(n):  # same position (the token itself): - gain; the value is the key's position
            a0.W_Q[0, V + p, V + p] = gain
            a0.W_K[0, V + p, V + p] = -1.0
            a0.W_V[0, V + p, p] = 1.0
            a0.W_O[0, p, dup0 + p] = 1.0
        for p in range(n - 1):  # query "my duplicate sits at p" matches key position p + 1
            a1.W_Q[0, dup0 + p, p + 1] = gain
        for p in range(n):
            a1.W_K[0, V + p, p] = 1.0
        for v in range(V):
            a1.W_V[0, v, v] = 1.0
            a1.W_O[0, v, out0 + v] = 1.0
        m.unembed_weight[:, out0 : out0 + V] = torch.eye(V)
    return m
