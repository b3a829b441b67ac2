# %% [markdown]
# # Head roles: which attention heads do what, with numbers you can defend
#
# `analyses.heads.probe_heads` classifies every head of a model into roles (`local`, `subject_verb`, `anaphora`,
# `delimiter`, and finer ones: `previous_token`, `next_token`, `self_token`, `attention_sink`, `sep_eos`,
# `punctuation`, `broad`, `induction`, `duplicate_token`). Each score comes with a baseline (best fixed offset,
# nearest noun, uniform attention), a 95% bootstrap interval over sentences, the same head's score in a randomly
# initialised model, and a Holm-adjusted p-value. This notebook uses a small N so it runs fast: the CLI (`interp probe
# --model minilm --out DIR`) uses more sentences and writes the full report.

# %%
import pandas as pd
from IPython.display import Image, display

import models
from analyses import heads
from analyses.data import load_items
from analyses.heads import report

pd.set_option("display.width", 160)
pd.set_option("display.precision", 4)  # 4 decimals: the last bits of a float sum are not stable
N = 12  # items per relation; small for speed (the CLI default is 100)
OPTS = dict(n_boot=40, null_n=12, batch_size=36)

# %% [markdown]
# ## The words the tables use
#
# One row is one test: a head (`layer`, `head`), a `role` read in a `direction`, on a data `source` and `subset`.
# - `score`: the head's mean over sentences: for `subject_verb` and `anaphora` the share of sentences whose largest
#   attention weight (from the row word) lands on the right word; for the other roles the attention mass on the
#   role's target (for `broad`, an entropy-based score).
# - `ci_low`, `ci_high`: the 95% bootstrap interval of `score` over sentences.
# - `baseline` (`baseline_kind` says which): what a head without the role would score, e.g. always attending the best
#   fixed offset, the nearest noun, or attending uniformly.
# - `null_score`: the same head's score in a randomly initialised model of the same architecture: what the
#   architecture and the positions alone give, before any training.
# - `p_adjusted`: the one-sided p-value of "score - baseline exceeds a minimum effect (the margin)", from a t-test
#   over sentences, corrected with Holm's method for testing every head of a role at once (sort the role's
#   p-values, multiply the smallest by the number of tests, the next by one less, and so on; the chance of any false
#   label in a role stays <= 0.05). NaN where the row is descriptive (no test, never a label).
# - `label`: `p_adjusted` <= 0.05, `ci_low` above the baseline, and (except `broad`) above `null_score`.
# The role map adds per head: `effect` = score - baseline; `standardised` = effect / margin; `relative` = effect /
# (ceiling - baseline), the share of the way from the baseline to the best score the metric allows (1 for most roles,
# 0.5 for induction and duplicate_token): the primary role is the labelled role with the largest `relative`. A head
# whose only labels are sink roles (attention parked on a token such as [CLS] or BOS) is a `sink writer` (the norm
# lens confirms that the parked attention moves information), a `no-op sink` (by weight only) or, where there are no
# norm rows, `idle (sink)`; a head with no label is `unclassified`. `sink_weight` and `sink_norm`: its attention on
# the sink, by weight and by the norm lens.

# %% [markdown]
# ## The encoder: MiniLM (BERT, bidirectional)

# %%
minilm = models.load("minilm")
items = load_items(n=N, seed=0)
df_enc = heads.probe_items(minilm, items, n_repeat=12, seed=0, **OPTS)
cols = [
    "layer",
    "head",
    "role",
    "direction",
    "source",
    "subset",
    "score",
    "ci_low",
    "ci_high",
    "baseline",
    "baseline_kind",
    "null_score",
    "p_adjusted",
]
df_enc[df_enc.label].sort_values("score", ascending=False)[cols].head(15)

# %% [markdown]
# The map: every head's primary role (its labelled roles ranked by (score - baseline) / margin), then the secondary
# ones. `heads.headline(df)` keeps one row per head, role and direction (all sources pooled, Clark et al.'s
# special-token convention).

# %%
display(Image(report.role_map_figure(heads.role_map(df_enc), title="minilm")))
heads.role_map(df_enc).head(12)

# %% [markdown]
# The head explorer (the same one as in the report page `interp probe` writes): click a head for its scores per role
# with baselines and intervals, and its attention on a few example sentences, by attention weight and by the norm lens
# (hover a row of the matrix to highlight it). A code host that does not run JavaScript still shows the grid.

# %%
from analyses.report.page import HeadExplorer

HeadExplorer.build(df_enc, minilm)

# %% [markdown]
# Subject-verb and anaphora are scored in both directions on a bidirectional model. With this few sentences the Holm
# correction over all tests is demanding; the best heads and their baselines:

# %%
ling = heads.headline(df_enc)
ling = ling[ling.role.isin(["subject_verb", "anaphora"])]
ling.sort_values("score", ascending=False).groupby(["role", "direction"]).head(1)[cols + ["label"]]

# %%
display(Image(report.heatmap_figure(heads.headline(df_enc), title="minilm")))

# %% [markdown]
# Attention patterns of the top heads: the row of *sleeps* in "the cat sleeps", a pronoun's row, a delimiter head.

# %%
for ex in heads.example_patterns(minilm, df_enc, roles=["subject_verb", "anaphora", "delimiter"]):
    display(Image(report.pattern_figure(ex)))

# %% [markdown]
# ## The causal LM: SmolLM2-135M (Llama, causal; the upper triangle is masked)

# %%
smol = models.load("smollm2")
df_lm = heads.probe_items(smol, items[::2], n_repeat=6, seed=0, **OPTS)
df_lm[df_lm.label].sort_values("score", ascending=False)[cols].head(15)

# %%
ex = heads.example_patterns(smol, df_lm, roles=["subject_verb"])[0]
display(Image(report.pattern_figure(ex)))

# %% [markdown]
# ## Where the roles live: encoder vs causal LM

# %%
import pathlib
import tempfile

from analyses.report import compose

out = pathlib.Path(tempfile.mkdtemp())
print(compose.write_comparison({"minilm": df_enc, "smollm2": df_lm}, out).read_text())

# %% [markdown]
# ## Adding a role of your own
#
# A role is a per-sentence score computed from a pattern `[batch, head, query, key]`, a per-sentence baseline, and a
# test. Here: *attends to one token* (the mean attention, over a sentence's real query rows, on that token), against a
# uniform head (1 / number of real tokens), reduced in a hook with the same streaming reducer and statistics the probe
# uses. The test is one-sided against a minimum effect: a head is labelled only if its score beats the baseline by
# more than `MARGIN` (Holm-adjusted p <= 0.05) and its interval's lower end clears the baseline.

# %%
import torch

from interp import stats
from interp.reducers import PairedReducer, PoissonBootstrap

cfg = minilm.cfg
MARGIN = 0.1  # attention mass above a uniform head
sentences = [list(it.words) for it in items]


def attends_to(target):
    """The role 'attends to the token at target(mask)' ([batch] indices) on every MiniLM head: one row per head."""
    red = PairedReducer((cfg.n_layers, cfg.n_heads), n_boot=100)
    boot = PoissonBootstrap(100, seed=0)
    for i in range(0, len(sentences), 16):
        batch = minilm.tokenizer.words(sentences[i : i + 16])
        mask = batch.attention_mask.bool()
        at = target(mask)
        n_real = mask.sum(-1).float()
        baseline = 1.0 / n_real  # a uniform head (bidirectional)
        w = boot.weights(len(batch))

        def hook(pattern, hook):
            layer = int(hook.name.split(".")[1])
            to_it = pattern[torch.arange(len(at)), :, :, at]  # [batch, head, query]
            score = (to_it * mask[:, None]).sum(-1) / n_real[:, None]  # mean over real rows
            red.update(layer, score, baseline[:, None], torch.ones(len(at), 1, dtype=torch.bool), w)

        minilm.run_with_hooks(
            batch.input_ids,
            attention_mask=batch.attention_mask,
            return_type=None,
            fwd_hooks=[(lambda n: n.endswith("attn.hook_pattern"), hook)],
        )
    s = red.summary()
    p = stats.holm(stats.one_sided_p_from_sums(s.n, s.mean_diff, s.sd_diff, margin=MARGIN))
    lo, hi = s.ci()
    table = pd.DataFrame(
        {
            "layer": [l for l in range(cfg.n_layers) for h in range(cfg.n_heads)],
            "head": list(range(cfg.n_heads)) * cfg.n_layers,
            "score": s.score.ravel(),
            "ci_low": lo.ravel(),
            "baseline": s.baseline.ravel(),
            "p_holm": p.ravel(),
        }
    )
    table["effect"] = table.score - table.baseline
    table["label"] = (table.p_holm <= 0.05) & (table.ci_low > table.baseline)
    return table


to_last = attends_to(lambda mask: mask.sum(-1) - 1)  # the last real token, [SEP]
best = to_last.loc[to_last.effect.idxmax()]
print(f"attends to [SEP]: {to_last.label.sum()} of {len(to_last)} heads labelled")
layer, head = int(best["layer"]), int(best["head"])
print(f"best head L{layer}H{head}: score {best.score:.3f} - uniform {best.baseline:.3f} = {best.effect:.3f}")
print(f"{(to_last.effect > MARGIN).sum()} heads beat the uniform head by more than the margin {MARGIN}")
to_last.sort_values("score", ascending=False).head(5)

# %% [markdown]
# Nothing is labelled, and not for lack of sentences: no MiniLM head puts even 0.1 more attention on [SEP] than a
# uniform head would (the best one, in layer 0, puts about twice the uniform share on it, an effect below the margin).
# Unlike BERT-base, whose middle layers park attention on [SEP], this sentence-transformers model parks it on [CLS],
# the first token: the same role aimed at position 0 labels nearly every head.

# %%
to_first = attends_to(lambda mask: torch.zeros(len(mask), dtype=torch.long))  # [CLS]
print(f"attends to [CLS]: {to_first.label.sum()} of {len(to_first)} heads labelled")
print("labelled per layer:", to_first.groupby("layer").label.sum().tolist())
to_first.sort_values("score", ascending=False).head(5)
