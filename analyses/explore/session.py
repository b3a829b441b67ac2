"""One model in memory for ``interp explore``: every request goes through a ``Session``, which holds
the model, checks the text before any forward pass, and serialises the model's work behind one lock
(a forward pass with hooks is not re-entrant: hooks attached by one request would fire in another's).

What it computes, and from which of the toolkit's definitions (imported, never copied):

* the input: the model's one input convention (``analyses.heads.model_input``, the probe's): the
  text with a sink token first where the tokenizer adds none (SmolLM2: ``<|endoftext|>``), stated in
  ``info()["input"]``;
* attention patterns: ``blocks.{l}.attn.hook_pattern``, hooked in *every* layer, so that every layer
  runs the eager attention path and the values are bitwise those of ``model.run_with_cache`` on
  those tokens;
* the norm lens: the probe's norm-based attention (Kobayashi et al. 2020), ``scoring.norm_weighted``
  over ``scoring.value_norms`` of the layer's ``hook_v`` and ``W_O`` (``Adapter.output_weights``);
* word-level rows: ``interp.alignment.word_attention`` over the tokenizer's token-to-word map;
* ablations: ``interp.interventions.run_ablated`` (zero, or mean over a named reference set whose
  ``hook_z`` is averaged by ``cache_z`` + ``ablation_source``);
* a head's catalogue verdicts: the rows of ``interp catalogue``'s catalogue.csv for that head, read
  and checked by ``analyses.explore.catalogue`` (no forward pass).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

import numpy as np
import pandas as pd
import torch

from analyses.explore.catalogue import by_head, check_model, checked, read, summary
from analyses.explore.limits import DEFAULT_MAX_TOKENS, PATTERN_MAX_TOKENS
from analyses.heads.adapter import adapt, model_input
from analyses.heads.examples import readable_sentences
from analyses.heads.labels import labelled_roles, role_map
from analyses.heads.roles import MAP_PRIMARY, MAP_ROLES
from analyses.heads.scoring import norm_weighted, value_norms
from analyses.heads.summaries import real_text
from interp.alignment import word_attention
from interp.display import token_label
from interp.interventions import ablation_source, cache_z, normalize_heads, run_ablated
from interp.names import act_name

__all__ = [
    "Session",
    "InputError",
    "TextTooLong",
    "NoCatalogue",
    "Abandoned",
    "CLIENT_GONE",
    "MODES",
    "REFERENCE_NAME",
    "DEFAULT_MAX_TOKENS",
]

MODES = ("zero", "mean")
TOP_K = 10
# the mean ablation's reference set: the report page's built-in example sentences (words)
REFERENCE_NAME = (
    "the report page's built-in example sentences that the tokenizer can read "
    "(analyses.heads.examples.EXAMPLE_SENTENCES, readable_sentences)"
)
MAX_HEADS = 64  # heads ablated at once: more than enough to explore, bounded work per request


class InputError(ValueError):
    """A request the user can fix; ``status`` is the HTTP status the server answers with."""

    status = 422


class TextTooLong(InputError):
    status = 413


class NoCatalogue(InputError):
    """A head's verdicts asked of a session started without a catalogue."""

    status = 404


class Abandoned(Exception):
    """The request's client went away while it waited for the model: its work was skipped."""


# the server's request (``server._api``) sets this to an Event that is set when its client goes away;
# a request that finds it set once the model is free is skipped (``Abandoned``), so a burst of abandoned
# clicks does not keep the model busy. Unset (a Python caller): every call runs.
CLIENT_GONE: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("client_gone", default=None)


def _floats(t: torch.Tensor) -> list:
    """Nested lists of Python floats, each exactly the float32 value (JSON carries it unchanged)."""
    return t.detach().float().cpu().numpy().astype(np.float64).tolist()


class Session:
    """The model behind the explorer. ``heads``: the probe's table (heads.csv) for the role map, or
    None. ``max_tokens``: the token budget per text (the model's context is the hard limit).
    ``catalogue``: ``interp catalogue``'s catalogue.csv of this model (a path or a table, checked
    by ``analyses.explore.catalogue``), or None; another model's is refused (``ValueError``)."""

    def __init__(
        self,
        model,
        heads: pd.DataFrame | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        catalogue: pd.DataFrame | str | None = None,
    ):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        # the model's one input convention, the probe's (``model_input``): a sink token first where the
        # tokenizer adds none (SmolLM2: <|endoftext|>), so a pattern here is the one the labels scored
        self.adapter = adapt(model)
        self.input = model_input(self.adapter.tokenizer)[1]
        self.view = self.adapter.view
        self.model = self.view.model
        self.limit = min(max_tokens, self.view.n_ctx)
        self.limit_reason = "the token budget (--max-tokens)" if max_tokens < self.view.n_ctx else "the model's context"
        self.roles = _head_roles(heads, self.view.n_layers, self.view.n_heads) if heads is not None else None
        self.verdicts: dict[str, list[dict]] | None = None  # "layer.head" -> its catalogue rows
        self.catalogue_info: dict | None = None
        if catalogue is not None:
            table = checked(catalogue) if isinstance(catalogue, pd.DataFrame) else read(catalogue)
            check_model(table, self.view.name, self.view.n_layers, self.view.n_heads)
            self.verdicts, self.catalogue_info = by_head(table), summary(table)
        self._lock = threading.Lock()
        self.skipped = 0  # requests skipped: their client had gone away, or the server was stopping
        self._stopping = False
        self._mean: dict[int, torch.Tensor] | None = None  # [head, d_head] per layer, on first use
        self._has_norm = self.adapter.output_weights(0) is not None
        self._labels: dict[str, list[int]] | None = None  # a token as shown -> its ids, on first use

    # -- what the page needs to know --------------------------------------------------------------

    def info(self) -> dict:
        v = self.view
        return {
            "model": v.name,
            "n_layers": v.n_layers,
            "n_heads": v.n_heads,
            "causal": v.causal,
            "lm_head": v.lm_head,
            "input": self.input,
            "n_ctx": v.n_ctx,
            "max_tokens": self.limit,
            "limit_reason": self.limit_reason,
            "pattern_max_tokens": min(self.limit, PATTERN_MAX_TOKENS),
            "norm_lens": self._has_norm,
            "modes": list(MODES),
            "reference": REFERENCE_NAME,
            "reference_sentences": [" ".join(s.words) for s in readable_sentences(self.adapter.tokenizer)],
            "roles": list(MAP_ROLES),
            "primary_roles": list(MAP_PRIMARY),  # the legend's order (the page's JSON has its keys sorted)
            "colours": _colours(),
            "heads": self.roles,
            "catalogue": self.catalogue_info,
        }

    # -- input checks (before any forward pass) ---------------------------------------------------

    def encode(self, text):
        """The text tokenised (``models.Batch``), or an ``InputError`` naming what is wrong."""
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        if not text.strip():
            raise InputError("text is empty: type a sentence")
        # a cheap bound first: no tokenizer yields fewer than one token per 64 characters here
        if len(text) > 64 * self.limit:
            raise TextTooLong(
                f"text has {len(text)} characters, far more than {self.limit} tokens ({self.limit_reason})"
            )
        try:
            batch = self.adapter.tokenizer(text)
        except ValueError as e:
            raise InputError(str(e)) from None
        n = int(batch.input_ids.shape[1])
        if n > self.limit:
            raise TextTooLong(
                f"text has {n} tokens, more than {self.limit} ({self.limit_reason}); shorten it to at most {self.limit}"
            )
        return batch

    def _check_head(self, layer, head=0) -> tuple[int, int]:
        v = self.view
        for name, x, n in (("layer", layer, v.n_layers), ("head", head, v.n_heads)):
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n:
                raise InputError(f"{name} must be an integer in 0..{n - 1}, got {x!r}")
        return layer, head

    # -- forward passes -----------------------------------------------------------------------------

    def stop(self) -> None:
        """The server is shutting down: work still waiting for the model is skipped (``Abandoned``),
        so the shutdown waits for the forward pass already running at most, not for the queue."""
        self._stopping = True

    @contextlib.contextmanager
    def _model(self):
        """The model for one request's work: the lock (one forward pass at a time), then, if the
        request's client went away while it waited (``CLIENT_GONE``) or the server is stopping
        (``stop``), ``Abandoned`` instead of the work."""
        with self._lock:
            gone = CLIENT_GONE.get()
            if self._stopping or (gone is not None and gone.is_set()):
                self.skipped += 1
                why = "the server is stopping" if self._stopping else "the client went away"
                raise Abandoned(f"{why} while the request waited for the model: skipped")
            yield

    def _forward_kwargs(self, batch) -> dict:
        kw = {"attention_mask": batch.attention_mask}
        if batch.token_type_ids is not None and not self.view.causal:
            kw["token_type_ids"] = batch.token_type_ids
        return kw

    def _patterns(self, batch, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One layer's pattern [head, q, k] and norm lens [head, q, k] (None without W_O). Every
        layer's pattern hook is attached so that every layer runs eager attention (as under
        ``run_with_cache``); only the asked layer's values are kept."""
        got: dict[str, torch.Tensor] = {}

        def keep_pattern(pattern, hook):
            if int(hook.name.split(".")[1]) == layer:
                got["p"] = pattern.detach()[0].clone()

        def keep_v(v, hook):
            got["v"] = v.detach().clone()

        hooks = [(self.adapter.hook_name(l), keep_pattern) for l in range(self.view.n_layers)]
        if self._has_norm:
            hooks.append((act_name(layer, "attn.hook_v"), keep_v))
        with torch.inference_mode():
            self.adapter.forward(batch, hooks)
        norm = None
        if self._has_norm:
            w_o = self.adapter.output_weights(layer).to(got["p"].device)
            norm = norm_weighted(got["p"][None], value_norms(got["v"], w_o))[0]
        return got["p"], norm

    def _tokens(self, batch, text: str) -> dict:
        return {
            "tokens": list(batch.tokens[0]),
            "labels": [token_label(t) for t in batch.tokens[0]],  # as shown: the one display rule
            "words": list(batch.words[0]),
            "token_to_word": list(batch.token_to_word[0]),
            "ids": batch.input_ids[0].tolist(),
            "notes": self._control_notes(text),
        }

    def _control_notes(self, text: str) -> list[str]:
        """A note per special (control) token typed in the text: the tokenizer reads ``[CLS]`` or
        ``<|endoftext|>`` as that one control token, not as the characters."""
        hf = self.adapter.tokenizer.hf
        specials = set(hf.all_special_tokens) | set(getattr(hf, "added_tokens_encoder", {}))
        return [
            f"{t!r} in the text is read as the tokenizer's control token {t} (id {hf.convert_tokens_to_ids(t)}), "
            "not as those characters"
            for t in sorted(specials)
            if t and t in text
        ]

    def run(self, text) -> dict:
        """Tokens, words and the token-to-word map of ``text``; for a causal LM the top next tokens
        after its last token."""
        batch = self.encode(text)
        out = self._tokens(batch, text)
        if self.view.causal and self.view.lm_head:
            with self._model(), torch.no_grad():
                logits = self.model.run_with_hooks(batch.input_ids, fwd_hooks=[], **self._forward_kwargs(batch))
            probs = torch.softmax(logits[0, -1].double(), -1)
            top = torch.topk(probs, min(TOP_K, probs.shape[0]))
            tokens = [self._token(int(i)) for i in top.indices]
            out["next_token"] = [
                {"id": int(i), "token": t, "label": token_label(t), "p": float(p)}
                for p, i, t in zip(top.values, top.indices, tokens)
            ]
        return out

    def head(self, text, layer, head) -> dict:
        """One head's token x token pattern (weights and norm lens), and both at word level; at most
        ``PATTERN_MAX_TOKENS`` tokens (the answer grows with the square of the length)."""
        layer, head = self._check_head(layer, head)
        batch = self.encode(text)
        n = int(batch.input_ids.shape[1])
        if n > PATTERN_MAX_TOKENS:
            raise TextTooLong(
                f"text has {n} tokens; the head view's token x token pattern takes at most {PATTERN_MAX_TOKENS} "
                f"(the layer view and the ablation take up to {self.limit}); shorten it to see a head's pattern"
            )
        with self._model():
            pattern, norm = self._patterns(batch, layer)
        align, labels = _word_groups(batch.token_to_word[0], batch.words[0])
        out = {**self._tokens(batch, text), "layer": layer, "head": head, "word_labels": labels}
        for key, value in (("pattern", pattern), ("norm", norm)):
            if value is None:
                out[key] = out[f"{key}_words"] = None
                continue
            out[key] = _floats(value[head])
            out[f"{key}_words"] = _floats(word_attention(value[head].float().cpu(), align, len(labels)))
        out["roles"] = (self.roles or {}).get(f"{layer}.{head}")
        return out

    def catalogue(self, layer, head) -> dict:
        """One head's catalogue verdicts: its rows (``analyses.explore.catalogue.by_head``; empty when
        the catalogue has none for it) and the file they come from. ``NoCatalogue`` without one."""
        if self.verdicts is None:
            raise NoCatalogue(
                "no catalogue was given: start interp explore with --catalogue out/MODEL/catalogue.csv "
                "(written by interp catalogue)"
            )
        layer, head = self._check_head(layer, head)
        return {
            "layer": layer,
            "head": head,
            "source": self.catalogue_info["source"],
            "rows": self.verdicts.get(f"{layer}.{head}", []),
        }

    def layer(self, text, layer, query) -> dict:
        """Every head of one layer seen from one query token (bertviz's model view): [head, key]."""
        layer, _ = self._check_head(layer)
        batch = self.encode(text)
        n = int(batch.input_ids.shape[1])
        if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < n:
            raise InputError(f"query must be a token index in 0..{n - 1}, got {query!r}")
        with self._model():
            pattern, norm = self._patterns(batch, layer)
        return {
            **self._tokens(batch, text),
            "layer": layer,
            "query": query,
            "pattern": _floats(pattern[:, query]),
            "norm": None if norm is None else _floats(norm[:, query]),
        }

    # -- ablation -----------------------------------------------------------------------------------

    def mean_source(self) -> dict[int, torch.Tensor]:
        """Every layer's mean ``hook_z`` [head, d_head] over the real tokens of the reference set."""
        if self._mean is None:
            ref = self.adapter.tokenizer.words([list(s.words) for s in readable_sentences(self.adapter.tokenizer)])
            kw = self._forward_kwargs(ref)
            mask = kw.pop("attention_mask")
            _, z = cache_z(self.model, ref.input_ids, range(self.view.n_layers), attention_mask=mask, **kw)
            src = ablation_source(z, "mean", attention_mask=mask)
            self._mean = {layer: value[0, 0].clone() for layer, value in src.items()}
        return self._mean

    def _parse_heads(self, heads) -> list[tuple[int, int]]:
        if not isinstance(heads, list) or not heads or len(heads) > MAX_HEADS:
            raise InputError(f"heads must be a list of 1 to {MAX_HEADS} [layer, head] pairs, got {heads!r:.80}")
        pairs = []
        for pair in heads:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise InputError(f"each head must be a [layer, head] pair, got {pair!r:.40}")
            pairs.append(self._check_head(*pair))
        return normalize_heads(self.model, sorted(set(pairs)))

    def _token(self, tid: int) -> str:
        return self.adapter.tokenizer.hf.convert_ids_to_tokens(tid)

    def _target(self, target) -> tuple[int | None, str | None]:
        """The target's id (None: the default, the clean top token, known after the pass) and, when
        typed as text, what was typed; checked before any forward pass."""
        if target is None:
            return None, None
        n = self.view.d_vocab
        if isinstance(target, str):
            tid = self._target_token(target)
            if tid >= n:  # a token the tokenizer added beyond the model's logits
                raise InputError(f"target {target!r:.40} is token {tid}; the model has logits for ids 0..{n - 1} only")
            return tid, target
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < n:
            raise InputError(f"target must be a token (string) or an id in 0..{n - 1}, got {target!r:.40}")
        return target, None

    def _target_token(self, target: str) -> int:
        """A typed target token: the form the page shows (``_were``), the vocabulary's own (``Ġwere``),
        or text that is one token (`` were``: the leading space is kept, never trimmed)."""
        hf = self.adapter.tokenizer.hf
        try:
            target.encode("utf-8")
        except UnicodeEncodeError as e:  # the tokenizer cannot look it up (a 500)
            raise InputError(
                f"target {target!r:.40} holds a lone surrogate at character {e.start}, which is not valid Unicode; "
                "type the token as the page shows it"
            ) from None
        if self._labels is None:  # built whole, then published: a parallel request never sees half of it
            labels: dict[str, list[int]] = {}
            for tok, i in hf.get_vocab().items():
                labels.setdefault(token_label(tok), []).append(int(i))
            self._labels = labels
        ids = set(self._labels.get(target, []))
        raw = hf.convert_tokens_to_ids(target)
        if raw is not None and (raw != hf.unk_token_id or target == hf.unk_token):
            ids.add(int(raw))
        if not ids and target:  # text, e.g. " were": one token, and not the unknown token
            encoded = hf.encode(target, add_special_tokens=False)
            if len(encoded) == 1 and encoded[0] != hf.unk_token_id:
                ids = {int(encoded[0])}
        if len(ids) > 1:
            names = ", ".join(repr(self._token(i)) for i in sorted(ids))
            raise InputError(f"target {target!r:.40} is shown the same for tokens {names}; type the one you mean")
        if not ids:
            raise InputError(
                f"target token {target!r:.40} is not in the vocabulary; give one token as the page shows it "
                "(a leading space shows as _, e.g. _were) or as text that is one token (' were')"
            )
        return ids.pop()

    def ablate(self, text, heads, mode: str = "zero", position=None, target=None) -> dict:
        """Ablate ``heads`` ([layer, head] pairs) on ``text`` and report what changes at token
        ``position`` (default: the last): for an LM the next-token distribution and ``target``'s
        logit (default: the clean top token); for an encoder the token's final hidden state and
        the mean-pooled sentence embedding (there are no logits)."""
        if mode not in MODES:
            raise InputError(f"mode must be one of {list(MODES)}, got {mode!r:.40}")
        if target is not None and not self.view.lm_head:
            raise InputError(
                f"target is for a model's next-token logits; {self.view.name} has no LM head, so its ablation "
                "reports the change of the final hidden states: leave target out"
            )
        pairs = self._parse_heads(heads)
        batch = self.encode(text)
        n = int(batch.input_ids.shape[1])
        position = n - 1 if position is None else position
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < n:
            raise InputError(f"position must be a token index in 0..{n - 1}, got {position!r}")
        tid, typed = self._target(target) if self.view.lm_head else (None, None)
        kw = self._forward_kwargs(batch)
        mask = kw.pop("attention_mask")
        with self._model(), torch.no_grad():
            source = None
            if mode == "mean":
                mean = self.mean_source()
                source = {l: mean[l][None, None].expand(1, n, *mean[l].shape) for l in {l for l, _ in pairs}}
            clean = self.model.run_with_hooks(batch.input_ids, fwd_hooks=[], attention_mask=mask, **kw)
            ablated = run_ablated(self.model, batch.input_ids, pairs, mode, attention_mask=mask, source=source, **kw)
        out = {
            **self._tokens(batch, text),
            "heads": [list(p) for p in pairs],
            "mode": mode,
            "reference": REFERENCE_NAME if mode == "mean" else None,
            "position": position,
            "position_token": batch.tokens[0][position],
        }
        if self.view.lm_head:
            tid = int(clean[0, position].argmax()) if tid is None else tid
            out.update(_logit_change(clean[0, position], ablated[0, position], tid))
            for row in out["top"]:
                row["token"] = self._token(row["id"])
                row["label"] = token_label(row["token"])
            out["target_token"] = self._token(tid)  # the token actually used, raw and as shown
            out["target_label"] = token_label(out["target_token"])
            out["target_typed"] = typed
        else:
            out.update(_hidden_change(clean[0], ablated[0], position))
        return out


def _colours() -> dict[str, str]:
    """The role map's colours for every primary role, as the report page draws them (idle and
    unclassified included)."""
    from analyses.report.page import role_colours

    colours = role_colours(MAP_PRIMARY)
    return {role: colours[role] for role in MAP_PRIMARY}


def _word_groups(align: list[int], words: list[str]) -> tuple[list[int], list[str]]:
    """The token-to-word map and word labels for word-level rows. A word that owns no token (byte-level
    BPE merged its characters into a neighbour's token, as in ``></``) joins the word before it, whose
    token it shares; so every row stands for at least one token."""
    owned = sorted({w for w in align if w >= 0})
    if not owned:
        return align, []
    index = {w: i for i, w in enumerate(owned)}
    labels = [words[w] for w in owned]
    for w in range(len(words)):
        if w not in index:
            before = [o for o in owned if o < w]
            i = index[before[-1]] if before else 0
            labels[i] = labels[i] + words[w] if before else words[w] + labels[i]  # they share a token: no space
    return [index[w] if w >= 0 else -1 for w in align], labels


def _logit_change(clean: torch.Tensor, ablated: torch.Tensor, target: int) -> dict:
    """Logits at one position [vocab], clean and ablated: the target's logit change (float32 values,
    the difference taken in float64), the two distributions' top tokens and their KL divergence."""
    pc, pa = torch.softmax(clean.double(), -1), torch.softmax(ablated.double(), -1)
    kl = float((pc * (pc.clamp_min(1e-300).log() - pa.clamp_min(1e-300).log())).sum())
    ids = torch.unique(torch.cat([torch.topk(pc, TOP_K).indices, torch.topk(pa, TOP_K).indices]))
    ids = ids[torch.argsort(pc[ids], descending=True)]
    c, a = float(clean[target]), float(ablated[target])
    return {
        "target_id": target,
        "clean_logit": c,
        "ablated_logit": a,
        "logit_change": a - c,
        "clean_p": float(pc[target]),
        "ablated_p": float(pa[target]),
        "kl": kl,
        "top": [{"id": int(i), "clean_p": float(pc[i]), "ablated_p": float(pa[i])} for i in ids],
    }


def _hidden_change(clean: torch.Tensor, ablated: torch.Tensor, position: int) -> dict:
    """Final hidden states [pos, d_model], clean and ablated: per token the relative change
    ||h' - h|| / ||h||, the chosen token's, and the mean-pooled sentence embedding's cosine (the
    sentence-transformers pooling of MiniLM)."""
    c, a = clean.double(), ablated.double()
    rel = ((a - c).norm(dim=-1) / c.norm(dim=-1).clamp_min(1e-30)).tolist()
    cos = float(torch.nn.functional.cosine_similarity(c.mean(0), a.mean(0), dim=0))
    tok = float(torch.nn.functional.cosine_similarity(c[position], a[position], dim=0))
    return {"relative_change": rel, "token_change": rel[position], "token_cosine": tok, "sentence_cosine": cos}


def _head_roles(df: pd.DataFrame, n_layers: int, n_heads: int) -> dict[str, dict]:
    """``"layer.head"`` -> the head's primary role, other roles and the labelled rows behind them
    (the probe's ``role_map`` and ``labelled_roles``), each named with its reading where a relation
    is read both ways ("subject_verb (predictive)"; a heads.csv without ``reading``: retrospective)."""
    need = (
        "layer",
        "head",
        "role",
        "direction",
        "label",
        "score",
        "baseline",
        "margin",
        "source",
        "subset",
        "specials",
    )
    missing = [c for c in need if c not in df]
    if missing:
        raise ValueError(f"the heads table lacks columns {missing}; pass the heads.csv that `interp probe` wrote")
    if len(df) and (df["layer"].max() >= n_layers or df["head"].max() >= n_heads):
        raise ValueError(
            f"the heads table has heads up to L{df['layer'].max()}H{df['head'].max()}, but the model has "
            f"{n_layers} layers of {n_heads} heads: it is another model's heads.csv"
        )
    lab = labelled_roles(df)
    lab = lab.assign(real_text=real_text(lab))
    out = {}
    for r in role_map(df).itertuples():
        rows = lab[(lab["layer"] == r.layer) & (lab["head"] == r.head)]
        out[f"{r.layer}.{r.head}"] = {
            "primary": str(r.primary),
            "secondary": [s for s in str(r.secondary).split(", ") if s],
            "standardised": None if not np.isfinite(r.standardised) else float(r.standardised),
            "evidence": [_evidence(row) for row in rows.itertuples()],
        }
    return out


def _evidence(row) -> dict:
    def num(x):
        return None if x is None or (isinstance(x, float) and not np.isfinite(x)) else float(x)

    get = row._asdict().get
    return {
        "role": str(get("name", row.role)),
        "reading": str(get("reading", "-")),
        "direction": str(get("direction", "all")),
        "weighting": str(get("weighting", "attention")),
        "source": str(get("source", "all")),
        "subset": str(get("subset", "all")),
        "metric": str(get("metric", "")),
        "score": num(row.score),
        "baseline": num(row.baseline),
        "p_adjusted": num(get("p_adjusted")),
        "n": None if get("n") is None else int(get("n")),
        "real_text": str(get("real_text", "-")),
    }
