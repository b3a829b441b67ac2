"""Retrieval heads at long context (Wu et al. 2024) on a needle-in-a-haystack task over real text
(docs/long_context.md): the analysis' face, as every analysis package gives it (``analyses.contract``).

- ``run(model, lengths, n=None, ...) -> RetrievalResult``: the accuracy by length and depth, every
  head's retrieval score and the masking check (``analyses.longctx.retrieval_measure``: the decoding
  engine and the study; its docstring has the definitions);
- ``OUTPUTS`` and ``write(result, folder, force=False)``: the output set (retrieval.csv and the other
  tables, retrieval.md, retrieval.png, retrieval.json; ``analyses.longctx.retrieval_report``, through
  ``interp.io.write_set``); ``read_retrieval`` reads retrieval.csv back;
- ``result.heads``: the per-head table (model, layer, head, retrieval, hits, ...), ``result.info``.

Renamed (the old names still work, with a DeprecationWarning): ``run_study`` -> ``run``, ``Study`` ->
``RetrievalResult``, ``write_outputs`` -> ``write``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from analyses.longctx.deprecated import renamed_getattr
from analyses.longctx.retrieval_measure import (
    Decoded,
    RetrievalResult,
    RetrievalScores,
    accuracy_table,
    bootstrap_drop,
    branch,
    check_ranking,
    decode,
    default_counts,
    mask_hooks,
    masking_table,
    pool_scores,
    prefill,
    random_same_layer,
    run,
    run_trial,
    score_step,
    solved_lengths,
    top_heads,
)
from analyses.longctx.retrieval_report import (
    NEEDLE_TEXT,
    OUTPUTS,
    PREFIX_TEXT,
    figure,
    read_retrieval,
    report_markdown,
    write,
)

__all__ = [
    "OUTPUTS",
    "NEEDLE_TEXT",
    "PREFIX_TEXT",
    "Decoded",
    "RetrievalResult",
    "RetrievalScores",
    "accuracy_table",
    "bootstrap_drop",
    "branch",
    "check_ranking",
    "decode",
    "default_counts",
    "figure",
    "mask_hooks",
    "masking_table",
    "pool_scores",
    "prefill",
    "random_same_layer",
    "read_retrieval",
    "report_markdown",
    "run",
    "run_trial",
    "score_step",
    "solved_lengths",
    "top_heads",
    "write",
    "write_outputs",
]


def write_outputs(study: RetrievalResult, out_dir) -> dict[str, Path]:
    """Deprecated: ``write`` (which returns the folder); this returns {name: path} as it did."""
    warnings.warn(f"{__name__}.write_outputs is deprecated; use {__name__}.write", DeprecationWarning, stacklevel=2)
    folder = write(study, out_dir)
    return {name: folder / name for name in OUTPUTS}


__getattr__ = renamed_getattr(__name__, {"run_study": "run", "Study": "RetrievalResult"}, globals())
