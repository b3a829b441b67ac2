# %% [markdown]
# # 04 Causal validation: does a head labelled by its pattern do that job?
#
# An attention pattern shows where a head looks, not what the model uses it for. Here every labelled head is
# **ablated** (its `hook_z` replaced by its mean) and a behaviour tied to its role is measured; the effect is compared
# with ablating random heads. Verdicts: `validated`, `no effect` (labelled by attention; the effect's interval lies
# inside +-min_effect), `inconclusive (under-powered)` (an interval too wide to say either), `inconclusive`. Section 5
# follows one head through the head catalogue, where a head's pattern and its effect are joined into one verdict. The
# notebook runs in about 50 seconds on a 2-core CPU (measured), most of it loading MiniLM and SmolLM2 and patching
# SmolLM2.

# %%
import pandas as pd
import torch
from IPython.display import Markdown

import models
from analyses import validation as V
from analyses.validation.report import report_markdown
from interp import interventions as iv

torch.set_num_threads(1)  # small batches: one thread is fastest on a shared CPU
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
N = 20  # prompts per role on MiniLM

# %% [markdown]
# ## 1. A planted model: the only path versus a decoy
#
# Head A (0, 0) attends to the previous token and writes its identity where the unembedding reads it; head B (0, 1)
# has exactly A's attention pattern but `W_O = 0`. Both would get the label `previous_token` from their patterns. Only
# A should survive the causal test.

# %%
planted, heads = V.planted_model(seed=0)
prompts = V.planted_prompts(n=12, seed=0)
labels = pd.DataFrame(
    [
        dict(layer=0, head=0, role="previous_token", score=1.0, label=True),
        dict(layer=0, head=1, role="previous_token", score=1.0, label=True),
    ]
)
res = V.run(planted, labels, prompts=prompts, seed=0)
Markdown(report_markdown(res, "two hand-set labels"))  # the validation.md `interp validate` writes

# %%
assert res.table.verdict.tolist() == ["validated", "no effect"]
res.effects.sort_values("effect", ascending=False).head(5)[["layer", "head", "effect", "ci_low", "ci_high"]]

# %% [markdown]
# ## 2. The interventions themselves
#
# Zero-, mean- and resample-ablation of any set of heads, and activation patching (clean `z` into a corrupted run)
# through `transformer_lens.patching`.

# %%
f = V.metric_functions(prompts)["loss"]
clean = -f(planted(prompts.tokens)).mean().item()
for kind in iv.ABLATIONS:
    out = iv.run_ablated(planted, prompts.tokens, [heads["A"]], kind=kind, groups=prompts.family)
    print(f"{kind:9s} ablation of A: loss {clean:.3f} -> {-f(out).mean().item():.3f}")
out = iv.run_ablated(planted, prompts.tokens, [heads["B"]], kind="zero")
print(f"zero ablation of B: loss {clean:.3f} -> {-f(out).mean().item():.3f}")

# %% [markdown]
# ## 3. A real encoder: MiniLM
#
# Labels here come from patterns alone (`pattern_labels`: previous-token heads on repeated random tokens); the
# behaviour is a linear probe that reads, from a noun's final state, which determiner preceded it (`prev_word_probe`).
# The CLI does the same with the head-probing report's labels: `interp validate --model minilm --out DIR`.

# %%
minilm = models.load("minilm").eval()
lab = V.pattern_labels(minilm, top=3)
lab = lab[lab.role == "previous_token"]
mres = V.run(minilm, lab, n=N, seed=0, n_null=10, n_layer_null=1, n_boot=300)
mres.table[["layer", "head", "role", "metric", "effect", "null_mean", "null_std", "p_value", "q_value", "verdict"]]

# %% [markdown]
# Each MiniLM metric is a linear probe read from a final state (`sv_probe`: the subject's number, from the masked verb;
# `anaphora_probe`: the antecedent's gender, from the masked pronoun; `prev_word_probe`: "the" or "a", from the
# noun; `delimiter_probe`: "." or "!", from the verb), trained on half of the N prompts of its role and scored on the
# other half with nothing ablated. `clean_accuracy` is the share of those held-out prompts it gets right; each probe
# has two answers, so chance is 0.5. `sv_probe` at 0.40 is below chance: the probe does not read the subject's number
# reliably from MiniLM's masked verb (its mean log-odds is positive only because a few prompts are read with great
# confidence), so an ablation's effect on it would say little; no head is validated on it here (the labels above are
# previous-token heads). The run calls a probe unreadable when its mean held-out log-odds is <= 0, and then gives
# its heads `inconclusive` with that reason instead of a verdict: here `prev_word_probe` (accuracy 0.5, chance), the
# very metric of the previous-token heads above, which is why all three are inconclusive. The last table lists heads
# without a label whose ablation still has a significant effect (none here).

# %%
for metric, acc in mres.info["clean_accuracy"].items():
    print(f"{metric:16s} held-out accuracy {acc:.2f}  mean log-odds {mres.info['clean'][metric]:+.2f}")
for metric, reason in mres.table.groupby("metric").reason.first().items():
    print(f"the verdicts on {metric}: {reason}")
mres.unlabelled.head()

# %% [markdown]
# ## 4. Activation patching on SmolLM2, TransformerLens style
#
# An indirect-object prompt and its corruption (the repeated name swapped): the metric is the logit difference
# " Mary" - " John" at the last token. `iv.patching_table` runs the corrupted prompt once per head with that head's
# `hook_z` taken from the clean run, and returns a `[layer, head]` table normalised as
# `(patched - corrupted) / (clean - corrupted)` (1: the head alone restores the clean answer). It warns when the
# clean - corrupted gap is too small to divide by (`iv.MIN_GAP`). `transformer_lens.patching` takes our model
# directly and gives the same numbers.

# %%
import transformer_lens.patching as tl_patching  # noqa: E402

lm = models.load("smollm2")
clean_ids = lm.to_tokens("When Mary and John went to the store, John gave a drink to")
corrupt_ids = lm.to_tokens("When Mary and John went to the store, Mary gave a drink to")
mary, john = lm.to_single_token(" Mary"), lm.to_single_token(" John")


def logit_diff(logits):
    return (logits[:, -1, mary] - logits[:, -1, john]).mean()


layers = range(8, 20)
heads_to_patch = [(layer, head) for layer in layers for head in range(lm.cfg.n_heads)]
table = iv.patching_table(lm, clean_ids, corrupt_ids, logit_diff, heads=heads_to_patch)
iv.plot_head_table(table.loc[list(layers)], title="patched logit difference, normalised")
table.loc[list(layers)].round(2)

# %%
with torch.no_grad():
    _, clean_cache = lm.run_with_cache(clean_ids)
    theirs = tl_patching.generic_activation_patch(
        lm,
        corrupt_ids,
        clean_cache,
        logit_diff,
        patch_setter=tl_patching.layer_head_vector_patch_setter,
        activation_name="z",
        index_df=pd.DataFrame(heads_to_patch[:4], columns=["layer", "head"]),
    )
    gap = (logit_diff(lm(clean_ids)) - logit_diff(lm(corrupt_ids))).item()
    base = logit_diff(lm(corrupt_ids)).item()
ours = [table.loc[layer, head] for layer, head in heads_to_patch[:4]]
print("ours (normalised):           ", [round(float(x), 4) for x in ours])
print("transformer_lens (same, norm):", [round((float(t) - base) / gap, 4) for t in theirs])

# %% [markdown]
# ## 5. One head from its pattern to its catalogue verdict
#
# `interp catalogue` joins the two sides of this notebook for every head and task: the **pattern side** (the roles
# `interp probe` labelled a head with, from where it attends) and the **causal side** (patching the head from a
# corrupted prompt into the clean one, on a task the model solves). Its verdicts (`analyses.catalogue.VERDICTS`) say
# whether they agree. Here it runs on a planted model whose answers are known (`analyses.catalogue.planted`, 2 layers x
# 8 heads): **(0, 0)** attends from p to p-1 and writes the token there where the unembedding reads it; **(0, 1)** has
# exactly that pattern and a near-zero `W_O`, so it writes nothing; **(1, 5)** is a second copy head. The task
# (named `induction`: on period-2 text a copy of the previous token is induction too): on `a b a b ... a b` predict
# the token before the last, read at the last position as the logit difference `b` - `c`, against a corrupted prompt
# with `c` in that place. Because the corrupted token is the previous token the copy heads read, these pairs can test
# a `previous_token` label, which the generated tasks cannot (docs/catalogue.md); `PLANTED_ROLES` says so to `C.run`.
# This section takes about 3 s on one CPU thread (`C.run` about 1 s of it) and loads no real model.
#
# First the pattern of the head we follow, (0, 0), beside the decoy's and the hidden head's, on one clean prompt.

# %%
import matplotlib.pyplot as plt  # noqa: E402

from analyses import catalogue as C  # noqa: E402
from analyses.catalogue.planted import COPY, DECOY, HIDDEN, TASK, planted_catalogue_inputs  # noqa: E402
from analyses.catalogue.planted import ROLE_TASKS as PLANTED_ROLES  # noqa: E402

cat_model, cat_labels, cat_pairs = planted_catalogue_inputs(n=24, seed=0)
ids = cat_pairs[TASK].clean[:1]
_, cat_cache = cat_model.run_with_cache(ids, names_filter=lambda name: name.endswith("hook_pattern"))
ticks = [str(t) for t in ids[0].tolist()]
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, (layer, head), what in zip(axes, (COPY, DECOY, HIDDEN), ("the copy head", "the decoy", "the hidden copy head")):
    pattern = cat_cache[f"blocks.{layer}.attn.hook_pattern"][0, head]
    ax.imshow(pattern, cmap="viridis", vmin=0, vmax=1)
    ax.set(xticks=range(len(ticks)), xticklabels=ticks, yticks=range(len(ticks)), yticklabels=ticks)
    ax.set(xlabel="key", ylabel="query", title=f"L{layer}H{head}: {what}")
    print(f"L{layer}H{head}: attention on p-1, mean over p >= 1: {pattern.diagonal(-1).mean().item():.2f}")
plt.tight_layout()
plt.show()

# %% [markdown]
# (0, 0) and (0, 1) put all their attention on the previous token, and (1, 5) more than half of it (in layer 1 the
# position signal its queries and keys read is diluted by what layer 0 wrote, so its pattern is softer). By pattern
# alone all three are previous-token heads, and a probe would label (0, 0) and (0, 1) `previous_token` alike.
#
# **The pattern side** is a probe heads table: `interp probe`'s `heads.csv`, one row per head and role, `label` True
# where the role's score clears its baseline. The planted table labels (0, 0) and the decoy `previous_token` and leaves
# (1, 5) unnamed, as a probe does with a head it misses (its pattern on the probe's sentences below the threshold, or a
# role the probe has no name for). Every head also has an unlabelled `local` row.

# %%
cat_labels[cat_labels.label][["model", "layer", "head", "role", "score", "baseline", "label"]]

# %% [markdown]
# **The causal side** and the join: `C.run` measures the model's accuracy on the task's pairs (a task it does not solve
# is skipped), patches every head at the answer position, patches the heads labelled with a role that acts at earlier
# positions (`previous_token`, `duplicate_token`; the best-scoring few of each) at every position too, scores every
# head with EAP-IG (shown, not decided on) and gives each effect a 95% t interval over the pairs. An effect counts when
# the interval clears `min_effect` (5% of the mean clean logit difference); "no effect" needs the whole interval inside
# +-`min_effect`.

# %%
cat = C.run(cat_model, cat_labels, n=24, eap_pairs=8, ig_steps=2, pairs=cat_pairs, role_tasks=PLANTED_ROLES)
task_columns = ["task", "accuracy", "n_used", "clean", "corrupted", "min_effect", "detectable"]
print(cat.tasks[task_columns].to_string(index=False))
rows = cat.table.set_index(["layer", "head"]).loc[[COPY, DECOY, HIDDEN]]
rows[["task", "roles", "site", "effect", "ci_low", "ci_high", "min_effect", "rank", "eap_ig", "state", "verdict"]]

# %% [markdown]
# - **L0H0, `mechanism`.** The pattern the task needs (`previous_token`) and an effect: patching it moves the logit
#   difference more than any other head, its interval far above `min_effect`, and patching and EAP-IG both rank it
#   first. Pattern and effect agree; this is the row a circuit claim can start from.
# - **L0H1, `pattern, no effect`.** The same pattern, the same label, and an interval inside +-`min_effect`: the head
#   looks at the right token and writes nothing the answer uses. This is the verdict to take away: **a pattern alone
#   is not a mechanism**. It is a positive finding (equivalence), not a failure to find: with too few pairs the
#   interval reaches past the band's edge and the verdict is `inconclusive` (below, on 3 pairs).
# - **L1H5, `effect, no named pattern`.** No label for this task, yet patching it at the answer position moves the
#   answer (smaller than L0H0, rank 2). The pattern report missed a head the model uses: a catalogue of patterns alone
#   would be incomplete as well as over-confident.
#
# The other 13 heads are `quiet`: no label for the task and no effect that clears `min_effect`.

# %%
assert rows.verdict.tolist() == ["mechanism", "pattern, no effect", "effect, no named pattern"]
named = [(layer, head) in (COPY, DECOY, HIDDEN) for layer, head in zip(cat.table["layer"], cat.table["head"])]
assert cat.table.verdict[[not x for x in named]].eq("quiet").all() and sum(named) == 3
few = C.run(cat_model, cat_labels, n=3, eap_pairs=0, pairs={TASK: cat_pairs[TASK][:3]}, role_tasks=PLANTED_ROLES)
few.table.set_index(["layer", "head"]).loc[[DECOY], ["n_pairs", "effect", "ci_low", "ci_high", "min_effect", "verdict"]]

# %% [markdown]
# `catalogue.md` (what `C.write` puts beside `catalogue.csv`) shows the 24-pair run as a report:

# %%
Markdown(C.markdown(cat.table, cat.tasks, cat.info))

# %% [markdown]
# **On a real model.** Probe first (the catalogue reads its `heads.csv`), then the catalogue into the same folder:
#
# ```
# interp probe --model smollm2 --out out/smollm2
# interp catalogue --model smollm2 --out out/smollm2
# ```
#
# SmolLM2's tasks are generated (`analyses.tasks.TASKS`: subject_verb, ioi, induction, ...); on an encoder (MiniLM)
# the causal side is `interp validate`'s probe metrics instead. In `out/smollm2/catalogue.md` look at, in order:
# **Tasks** (which tasks the model solves, hence which roles get a causal test at all, and `detectable`, the smallest
# effect the run would find 80% of the time: below it a missing effect means little); **Verdicts per task** (how many
# heads of each kind); **Mechanisms** (labelled heads with an effect, largest first: the candidates for a circuit);
# **Disagreements**, the section this notebook is about (`pattern, no effect`: labels the task does not need;
# `effect, no named pattern`: heads the probe missed); **Inconclusive** (more pairs, `--n`, would decide) and **No
# causal test** (roles no solved task exercises, e.g. `local` or a retrospective reading). `catalogue.csv` has every
# row; `analyses.catalogue.read_catalogue`, `verdict_counts` and `disagreements` read it back.
