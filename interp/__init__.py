"""Model-agnostic core: hooks, hook names, token-to-word alignment, streaming reducers, statistics,
interventions, the model view and the toolkit's file writing, one module each:

- ``interp.hooks``: ``HookPoint``, ``HookedModule`` (run_with_hooks, run_with_cache, hooks()),
  ``ActivationCache``, ``UnknownHookError``, ``check_hook_names``, ``near_names``;
- ``interp.names``: ``act_name``, ``layer_of``; ``interp.view``: ``ModelView``, ``view``;
- ``interp.alignment``: ``split_words``, ``join_words``, ``token_to_word``, ``word_attention``,
  ``word_matrix``; ``interp.display``: how a token is shown;
- ``interp.reducers``, ``interp.stats``, ``interp.interventions``, ``interp.distributed``;
- ``interp.io``: the one atomic writer, output sets, locks.

Imports nothing from ``models`` or ``analyses``. The package re-exports nothing: import a name
from its module (``from interp.hooks import HookPoint``), so that ``import interp`` and the light
modules (``interp.io``, ``interp.names``, which the command line uses on its error path) import
neither torch nor TransformerLens.
"""

__all__ = []
