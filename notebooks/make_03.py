"""Write notebooks/03_invariances.ipynb (run: python notebooks/make_03.py)."""

from nbformat.v4 import new_code_cell, new_markdown_cell
from nbwrite import write

cells = [
    new_markdown_cell(
        "# 03 Invariances: each claim, its measurement on real weights, its figure\n\n"
        "Every table below comes from `analyses.invariance` and has the columns "
        "`model, check, quantity, value, tolerance, expected, passed, baseline`. `expected = holds` is an "
        "invariance (value within tolerance, and the guard `baseline` — the same metric for a different "
        "input — far above it); `expected = breaks` is a negative control. The loaded models are never "
        "modified: every edit is made on a `copy.deepcopy`."
    ),
    new_code_cell(
        "import pandas as pd, torch, matplotlib.pyplot as plt\n"
        "import models\n"
        "from analyses import invariance\n"
        "from analyses.invariance import permutation as perm, rotation as rot\n"
        "from analyses.invariance import position as pos, scale\n"
        "from analyses.invariance.common import model_tokens, double_copy\n"
        "pd.set_option('display.max_colwidth', 90)\n"
        "torch.set_num_threads(1)  # the machines that run this are shared; oversubscribed threads run ~10x slower\n"
        "COLS = ['quantity', 'dtype', 'value', 'tolerance', 'baseline', 'expected', 'passed']\n"
        "minilm = models.load('minilm')\n"
        "snapshot = {k: v.clone() for k, v in minilm.state_dict().items()}\n"
        "tokens = model_tokens(minilm, n_tokens=14)\n"
        "minilm64 = double_copy(minilm)\n"
        "minilm"
    ),
    new_markdown_cell(
        "## 1. Attention alone is order-blind\n"
        "One attention layer, fed its own input from a real run: permuting the input permutes the "
        "output (fp32 round-off), unless a causal mask is applied."
    ),
    new_code_cell("perm.layer_permutation(minilm, tokens, model64=minilm64)[COLS]"),
    new_markdown_cell(
        "The whole encoder with its position embeddings zeroed (`hook_pos_embed`) is equivariant: "
        "'dog bites man' and 'man bites dog' give the same token vectors, permuted. With positions they differ."
    ),
    new_code_cell("perm.model_permutation(minilm, tokens, model64=minilm64)[COLS + ['detail']]"),
    new_markdown_cell(
        "Per head: shuffle the tokens, undo the shuffle on the pattern, and measure the mean total-variation "
        "distance to the original pattern (the attention mass that had to move; 0 = content only). "
        "Positional heads stand out."
    ),
    new_code_cell(
        "heads = perm.head_position_sensitivity(minilm, tokens, n_perms=3, model64=minilm64)\n"
        "perm.tv_heatmap(heads); plt.show()\n"
        "heads.sort_values('tv', ascending=False).head(5)"
    ),
    new_markdown_cell(
        "## 2. Rotations: W_Q R, W_K R and W_V R, R^T W_O change nothing\n"
        "Every head of every layer is edited at once; scores, patterns and the final hidden state are compared "
        "with the original model in fp64. Negative controls must break."
    ),
    new_code_cell("rot.model_rotation_checks(minilm, tokens, model64=minilm64)[COLS]"),
    new_markdown_cell(
        "Any invertible A with W_Q A and W_K A^-T keeps the scores; the round-off grows linearly with cond(A) "
        "(relative error about u * cond(A)), always inside the a-priori bound."
    ),
    new_code_cell(
        "sweep = rot.conditioning_sweep(minilm, tokens, conds=(1, 1e2, 1e4, 1e6), layers=[0, 3, 5])\n"
        "rot.conditioning_figure(sweep); plt.show()\n"
        "sweep"
    ),
    new_markdown_cell(
        "What can be interpreted: the factors change under rotation, their products and spectra do not "
        "(TransformerLens `FactoredMatrix`)."
    ),
    new_code_cell("rot.interpretation_table(minilm, layer=2, head=0, tokens=tokens)"),
    new_markdown_cell(
        "## 3. RoPE and grouped-query attention (SmolLM2)\n"
        "A general orthogonal R does not commute with the rotary matrices, so it changes the model; rotations "
        "inside each rotary plane do not. Each key/value head's rotation must be shared by its whole group."
    ),
    new_code_cell(
        "smollm2 = models.load('smollm2')\n"
        "stoks = model_tokens(smollm2, n_tokens=8)\n"
        "print(models.rope_planes(smollm2.cfg)[:3], '...')\n"
        "rot.model_rotation_checks(smollm2, stoks, fp64=False)[COLS]"
    ),
    new_markdown_cell(
        "## 4. Relative position\n"
        "Shift every position by s: RoPE (SmolLM2 itself) and ALiBi (a small model) scores do not change "
        "beyond the angle round-off, which grows with position; learned absolute positions (MiniLM) do."
    ),
    new_code_cell(
        "rel_s, rows_s = pos.relative_position_checks(smollm2, shifts=(1, 100, 1000, 4000))\n"
        "rel_m, rows_m = pos.relative_position_checks(minilm, shifts=(1, 100))\n"
        "pd.concat([rows_s, rows_m[rows_m.quantity.str.startswith('learned')]])[COLS]"
    ),
    new_markdown_cell(
        "## 5. The 1/sqrt(d) scale\n"
        "Random Gaussian q, k and real ones (MiniLM layer 3, heads concatenated): without the scale, "
        "entropy and gradients collapse as d grows."
    ),
    new_code_cell(
        "sw = scale.scale_sweep(minilm)\n"
        "scale.scale_figure(sw); plt.show()\n"
        "scale.scale_rows('minilm', sw)[['quantity', 'value', 'tolerance', 'passed', 'detail']]"
    ),
    new_markdown_cell("## 6. The models were never changed"),
    new_code_cell("assert all(torch.equal(v, snapshot[k]) for k, v in minilm.state_dict().items())\n'unchanged'"),
]

write(cells, "03_invariances.ipynb")
