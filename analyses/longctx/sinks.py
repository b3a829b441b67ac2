"""The attention sink and the previous-token / induction roles by context length (issue 26, part 2;
docs/long_context_sinks.md): the analysis' face, as every analysis package gives it
(``analyses.contract``).

- ``run(model, lengths, n_windows, seed=0, ...) -> SinksResult``: every head scored on windows of
  real text at each length (``analyses.longctx.sinks_measure``: the pattern reducer, the inputs, the
  tables; its docstring has the definitions);
- ``OUTPUTS`` and ``write(result, folder, force=False)``: the output set (the tables as CSV, sinks.md,
  sinks.png; ``analyses.longctx.sinks_report``, through ``interp.io.write_set``);
- ``result.heads``: the per-head table (model, layer, head, role, length, score, ...), ``result.info``.

Renamed (the old names still work, with a DeprecationWarning): ``measure`` -> ``run``, ``SinkRun`` ->
``SinksResult``.
"""

from __future__ import annotations

from analyses.longctx.deprecated import renamed_getattr
from analyses.longctx.sinks_measure import (
    INPUTS,
    LEARNED_SINK,
    LENGTHS,
    MASS_MARGIN,
    N_WINDOWS,
    POSITION_BINS,
    ROLE_INPUT,
    ROLES,
    PatternReducer,
    SinksResult,
    check_arguments,
    combine,
    has_learned_sinks,
    head_table,
    layer_table,
    length_summary,
    main_rows,
    persistence,
    position_table,
    repeated_window,
    run,
    sequence_plan,
)
from analyses.longctx.sinks_report import OUTPUTS, ROLE_TITLES, figure, report, tables, write

__all__ = [
    "LENGTHS",
    "N_WINDOWS",
    "ROLES",
    "LEARNED_SINK",
    "has_learned_sinks",
    "ROLE_INPUT",
    "INPUTS",
    "MASS_MARGIN",
    "POSITION_BINS",
    "ROLE_TITLES",
    "OUTPUTS",
    "PatternReducer",
    "sequence_plan",
    "repeated_window",
    "SinksResult",
    "run",
    "check_arguments",
    "write",
    "combine",
    "main_rows",
    "head_table",
    "layer_table",
    "length_summary",
    "persistence",
    "position_table",
    "tables",
    "figure",
    "report",
]

__getattr__ = renamed_getattr(__name__, {"measure": "run", "SinkRun": "SinksResult"}, globals())
