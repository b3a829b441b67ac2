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
import os

import pandas as pd
from IPython.display import Image, display

import models
from analyses import heads
from analyses.data import load_items
from analyses.heads import report

pd.set_option("display.width", 160)
pd.set_option("display.precision", 4)  # 4 decimals: the last bits of a float sum are not stable
SMOKE = os.environ.get("NOTEBOOKS_SMOKE") == "1"  # tests/test_notebooks.py runs every cell on less data
N = 4 if SMOKE else 12  # items per relation; small for speed (the CLI default is 100)
OPTS = dict(n_boot=40, null_n=12, batch_size=36)

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
# test. Here: *attends to the last token*, against a uniform head, reduced in a hook with the same streaming reducer
# and statistics the probe uses.

# %%
import torch

from interp import stats
from interp.reducers import PairedReducer, PoissonBootstrap

cfg = minilm.cfg
red = PairedReducer((cfg.n_layers, cfg.n_heads), n_boot=100)
boot = PoissonBootstrap(100, seed=0)
sentences = [list(it.words) for it in items]
for i in range(0, len(sentences), 16):
    batch = minilm.tokenizer.words(sentences[i : i + 16])
    mask = batch.attention_mask.bool()
    last = mask.sum(-1) - 1  # index of the last real token ([SEP])
    n_real = mask.sum(-1).float()
    baseline = 1.0 / n_real  # a uniform head (bidirectional)
    w = boot.weights(len(batch))

    def hook(pattern, hook):
        layer = int(hook.name.split(".")[1])
        to_last = pattern[torch.arange(len(last)), :, :, last]  # [batch, head, query]
        score = (to_last * mask[:, None]).sum(-1) / n_real[:, None]  # mean over real rows
        red.update(layer, score, baseline[:, None], torch.ones(len(last), 1, dtype=torch.bool), w)

    minilm.run_with_hooks(
        batch.input_ids,
        attention_mask=batch.attention_mask,
        return_type=None,
        fwd_hooks=[(lambda n: n.endswith("attn.hook_pattern"), hook)],
    )
s = red.summary()
p = stats.holm(stats.one_sided_p_from_sums(s.n, s.mean_diff, s.sd_diff, margin=0.1))
lo, hi = s.ci()
mine = pd.DataFrame(
    {
        "layer": [l for l in range(cfg.n_layers) for h in range(cfg.n_heads)],
        "head": list(range(cfg.n_heads)) * cfg.n_layers,
        "score": s.score.ravel(),
        "ci_low": lo.ravel(),
        "baseline": s.baseline.ravel(),
        "p_holm": p.ravel(),
    }
)
mine["label"] = (mine.p_holm <= 0.05) & (mine.ci_low > mine.baseline)
mine.sort_values("score", ascending=False).head(5)
