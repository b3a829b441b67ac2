"""Writes notebooks/02_head_roles.ipynb (run: python notebooks/make_02.py). Small n so that it runs
top to bottom in well under a minute and a half on 2 CPU cores; raise N for real work."""

from nbformat.v4 import new_code_cell, new_markdown_cell
from nbwrite import write

cells = [
    new_markdown_cell(
        "# Head roles: which attention heads do what, with numbers you can defend\n\n"
        "`analyses.heads.probe_heads` classifies every head of a model into roles (`local`, `subject_verb`, "
        "`anaphora`, `delimiter`, and finer ones: `previous_token`, `next_token`, `self_token`, "
        "`attention_sink`, `sep_eos`, `punctuation`, `broad`, `induction`, `duplicate_token`). Each score "
        "comes with a baseline (best fixed offset, nearest noun, uniform attention), a 95% bootstrap "
        "interval over sentences, the same head's score in a randomly initialised model, and a "
        "Holm-adjusted p-value. This notebook uses a small N so it runs fast: the CLI "
        "(`interp probe --model minilm --out DIR`) uses more sentences and writes the full report."
    ),
    new_code_cell(
        "import pandas as pd\n"
        "from IPython.display import Image, display\n"
        "import models\n"
        "from analyses import heads\n"
        "from analyses.data import load_items\n"
        "from analyses.heads import report\n"
        "pd.set_option('display.width', 160)\n"
        "pd.set_option('display.precision', 4)  # 4 decimals: the last bits of a float sum are not stable\n"
        "N = 12  # items per relation; small for speed (the CLI default is 100)\n"
        "OPTS = dict(n_boot=40, null_n=12, batch_size=36)"
    ),
    new_markdown_cell("## The encoder: MiniLM (BERT, bidirectional)"),
    new_code_cell(
        "minilm = models.load('minilm')\n"
        "items = load_items(n=N, seed=0)\n"
        "df_enc = heads.probe_items(minilm, items, n_repeat=12, seed=0, **OPTS)\n"
        "cols = ['layer', 'head', 'role', 'direction', 'source', 'subset', 'score', 'ci_low', 'ci_high', 'baseline',\n"
        "        'baseline_kind', 'null_score', 'p_adjusted']\n"
        "df_enc[df_enc.label].sort_values('score', ascending=False)[cols].head(15)"
    ),
    new_markdown_cell(
        "The map: every head's primary role (its labelled roles ranked by (score - baseline) / margin), "
        "then the secondary ones. `heads.headline(df)` keeps one row per head, role and direction (all "
        "sources pooled, Clark et al.'s special-token convention)."
    ),
    new_code_cell(
        "display(Image(report.role_map_figure(heads.role_map(df_enc), title='minilm')))\n"
        "heads.role_map(df_enc).head(12)"
    ),
    new_markdown_cell(
        "The head explorer (the same one as in the report page `interp probe` writes): click a head for its "
        "scores per role with baselines and intervals, and its attention on a few example sentences, by "
        "attention weight and by the norm lens (hover a row of the matrix to highlight it). A code host that "
        "does not run JavaScript still shows the grid."
    ),
    new_code_cell("from analyses.report.page import HeadExplorer\nHeadExplorer.build(df_enc, minilm)"),
    new_markdown_cell(
        "Subject-verb and anaphora are scored in both directions on a bidirectional model. With this few "
        "sentences the Holm correction over all tests is demanding; the best heads and their baselines:"
    ),
    new_code_cell(
        "ling = heads.headline(df_enc)\n"
        "ling = ling[ling.role.isin(['subject_verb', 'anaphora'])]\n"
        "ling.sort_values('score', ascending=False).groupby(['role', 'direction']).head(1)[cols + ['label']]"
    ),
    new_code_cell("display(Image(report.heatmap_figure(heads.headline(df_enc), title='minilm')))"),
    new_markdown_cell(
        'Attention patterns of the top heads: the row of *sleeps* in "the cat sleeps", a pronoun\'s row, a delimiter head.'
    ),
    new_code_cell(
        "for ex in heads.example_patterns(minilm, df_enc, roles=['subject_verb', 'anaphora', 'delimiter']):\n"
        "    display(Image(report.pattern_figure(ex)))"
    ),
    new_markdown_cell("## The causal LM: SmolLM2-135M (Llama, causal; the upper triangle is masked)"),
    new_code_cell(
        "smol = models.load('smollm2')\n"
        "df_lm = heads.probe_items(smol, items[::2], n_repeat=6, seed=0, **OPTS)\n"
        "df_lm[df_lm.label].sort_values('score', ascending=False)[cols].head(15)"
    ),
    new_code_cell(
        "ex = heads.example_patterns(smol, df_lm, roles=['subject_verb'])[0]\ndisplay(Image(report.pattern_figure(ex)))"
    ),
    new_markdown_cell("## Where the roles live: encoder vs causal LM"),
    new_code_cell(
        "import tempfile, pathlib\n"
        "out = pathlib.Path(tempfile.mkdtemp())\n"
        "print(report.write_comparison({'minilm': df_enc, 'smollm2': df_lm}, out).read_text())"
    ),
    new_markdown_cell(
        "## Adding a role of your own\n\n"
        "A role is a per-sentence score computed from a pattern `[batch, head, query, key]`, a per-sentence "
        "baseline, and a test. Here: *attends to the last token*, against a uniform head, reduced in a "
        "hook with the same streaming reducer and statistics the probe uses."
    ),
    new_code_cell(
        "import torch\n"
        "from interp.reducers import PairedReducer, PoissonBootstrap\n"
        "from interp import stats\n"
        "cfg = minilm.cfg\n"
        "red = PairedReducer((cfg.n_layers, cfg.n_heads), n_boot=100)\n"
        "boot = PoissonBootstrap(100, seed=0)\n"
        "sentences = [list(it.words) for it in items]\n"
        "for i in range(0, len(sentences), 16):\n"
        "    batch = minilm.tokenizer.words(sentences[i:i + 16])\n"
        "    mask = batch.attention_mask.bool()\n"
        "    last = mask.sum(-1) - 1                      # index of the last real token ([SEP])\n"
        "    n_real = mask.sum(-1).float()\n"
        "    baseline = 1.0 / n_real                       # a uniform head (bidirectional)\n"
        "    w = boot.weights(len(batch))\n"
        "    def hook(pattern, hook):\n"
        "        layer = int(hook.name.split('.')[1])\n"
        "        to_last = pattern[torch.arange(len(last)), :, :, last]           # [batch, head, query]\n"
        "        score = (to_last * mask[:, None]).sum(-1) / n_real[:, None]      # mean over real rows\n"
        "        red.update(layer, score, baseline[:, None], torch.ones(len(last), 1, dtype=torch.bool), w)\n"
        "    minilm.run_with_hooks(batch.input_ids, attention_mask=batch.attention_mask, return_type=None,\n"
        "                          fwd_hooks=[(lambda n: n.endswith('attn.hook_pattern'), hook)])\n"
        "s = red.summary()\n"
        "p = stats.holm(stats.one_sided_p_from_sums(s.n, s.mean_diff, s.sd_diff, margin=0.1))\n"
        "lo, hi = s.ci()\n"
        "mine = pd.DataFrame({'layer': [l for l in range(cfg.n_layers) for h in range(cfg.n_heads)],\n"
        "                     'head': list(range(cfg.n_heads)) * cfg.n_layers, 'score': s.score.ravel(),\n"
        "                     'ci_low': lo.ravel(), 'baseline': s.baseline.ravel(), 'p_holm': p.ravel()})\n"
        "mine['label'] = (mine.p_holm <= 0.05) & (mine.ci_low > mine.baseline)\n"
        "mine.sort_values('score', ascending=False).head(5)"
    ),
]

write(cells, "02_head_roles.ipynb")
