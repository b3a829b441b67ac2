"""Head roles (``interp probe``). The analysis face (``analyses.contract``): ``run(model, ...) ->
ProbeResult`` (``.heads``: heads.csv's table, model, layer and head first; ``.info``), ``OUTPUTS`` and
``write(result, folder)``; ``DEFAULTS``, the one record of the probe's defaults.

The modules, lowest first: ``roles`` (names and table columns), ``scoring`` (scorers on tensors),
``defaults``, ``adapter`` (what the probe needs from a model), ``design`` (tests, strata, noun
heuristics, baselines), ``engine`` (the batched hook pass), ``labels`` (the table, Holm, the gates,
the role map), ``summaries``, ``probe`` (``probe_items``, ``probe_heads``), ``examples`` (every
head's patterns on a few sentences), ``pipeline`` (``run``, ``write``); ``report`` (heads.csv,
report.md) and ``figures`` (the PNGs) are used as modules. Every name in the ``__all__`` of every
other module is re-exported here by name (a test holds this).

>>> import models
>>> from analyses import heads
>>> df = heads.probe_heads(models.load("minilm"), n=200, seed=0)   # the same defaults as `interp probe`
>>> res = heads.run("minilm"); heads.write(res, "runs/minilm")
"""

from analyses.heads.adapter import SINK_TOKENS, Adapter, adapt, model_input, sink_tokenizer
from analyses.heads.defaults import DEFAULTS, ProbeDefaults, n_repeat_for
from analyses.heads.design import (
    CONTROL_SUBSET,
    LABEL_SUBSET,
    SUBSETS,
    in_stratum,
    is_real_source,
    noun_heuristics,
    source_of,
)
from analyses.heads.engine import check_sentences, cluster_order
from analyses.heads.examples import (
    EXAMPLE_SENTENCES,
    EXAMPLES,
    ExamplePatterns,
    Sentence,
    as_sentences,
    dequantise,
    example_patterns,
    readable_sentences,
)
from analyses.heads.labels import (
    CONTROL_GATES,
    LABEL_GATES,
    MAP_NORMALISATIONS,
    PAIR_SHARE_MIN,
    REAL_TEXT_GATE,
    REAL_TEXT_RELATIONS,
    has_norm_rows,
    headline,
    label_names,
    labelled_roles,
    map_sensitivity,
    readings,
    real_text_note,
    real_text_status,
    role_map,
)
from analyses.heads.pipeline import OUTPUTS, ProbeResult, ProbeRun, run, run_probe, write
from analyses.heads.probe import probe_heads, probe_items
from analyses.heads.roles import (
    BROAD_REFERENCE,
    CEILINGS,
    COLUMNS,
    DESCRIPTIVE_ROLES,
    IDLE,
    IDLE_PRIMARIES,
    LABEL_NAMES,
    LINGUISTIC_ROLES,
    MAP_PRIMARY,
    MAP_ROLES,
    NOOP_IDLE,
    NORM_LABEL_ROLES,
    OFFSET_ROLES,
    PREDICTIVE,
    READING_ROLES,
    READINGS,
    RELATIONS,
    RETRIEVAL_THRESHOLD,
    ROLES,
    SET_ROLES,
    SINK_EXCLUDED_ROLES,
    SINK_ROLES,
    SINK_WRITER,
    SPECIALS,
    WEIGHTINGS,
    decision_low,
    label_name,
    reading_of,
    with_reading,
    with_real_text,
)
from analyses.heads.scoring import (
    RelationPlan,
    TokenPlan,
    broad_reference,
    duplicate_detection,
    norm_weighted,
    relation_columns,
    relation_finish,
    relation_scores,
    special_columns,
    tl_detection_score,
    token_plan,
    token_role_scores,
    value_norms,
    visible_keys,
    word_columns,
)
from analyses.heads.summaries import (
    detectable_effect,
    head_summary,
    heuristic_table,
    no_label_bound,
    real_text,
    real_text_heads,
    top_head,
)

__all__ = [
    # the analysis face
    "run",
    "write",
    "OUTPUTS",
    "ProbeResult",
    "DEFAULTS",
    "ProbeDefaults",
    "n_repeat_for",
    "ProbeRun",  # deprecated: ProbeResult
    "run_probe",  # deprecated: run
    # probe
    "probe_heads",
    "probe_items",
    # adapter
    "Adapter",
    "adapt",
    "sink_tokenizer",
    "model_input",
    "SINK_TOKENS",
    # design
    "source_of",
    "noun_heuristics",
    "in_stratum",
    "SUBSETS",
    "LABEL_SUBSET",
    "CONTROL_SUBSET",
    "is_real_source",
    # engine
    "check_sentences",
    "cluster_order",
    # labels
    "has_norm_rows",
    "headline",
    "labelled_roles",
    "readings",
    "label_names",
    "role_map",
    "map_sensitivity",
    "MAP_NORMALISATIONS",
    "CONTROL_GATES",
    "LABEL_GATES",
    "PAIR_SHARE_MIN",
    "REAL_TEXT_RELATIONS",
    "real_text_status",
    "real_text_note",
    # summaries
    "real_text_heads",
    "detectable_effect",
    "real_text",
    "heuristic_table",
    "no_label_bound",
    "head_summary",
    "top_head",
    # examples
    "Sentence",
    "EXAMPLE_SENTENCES",
    "EXAMPLES",
    "ExamplePatterns",
    "example_patterns",
    "dequantise",
    "readable_sentences",
    "as_sentences",
    # roles
    "ROLES",
    "LINGUISTIC_ROLES",
    "RELATIONS",
    "COLUMNS",
    "SET_ROLES",
    "OFFSET_ROLES",
    "BROAD_REFERENCE",
    "DESCRIPTIVE_ROLES",
    "SPECIALS",
    "WEIGHTINGS",
    "NORM_LABEL_ROLES",
    "MAP_ROLES",
    "SINK_ROLES",
    "IDLE",
    "SINK_WRITER",
    "NOOP_IDLE",
    "IDLE_PRIMARIES",
    "LABEL_NAMES",
    "MAP_PRIMARY",
    "CEILINGS",
    "SINK_EXCLUDED_ROLES",
    "RETRIEVAL_THRESHOLD",
    "READINGS",
    "READING_ROLES",
    "PREDICTIVE",
    "reading_of",
    "with_reading",
    "decision_low",
    "with_real_text",
    "REAL_TEXT_GATE",
    "label_name",
    # scoring
    "visible_keys",
    "TokenPlan",
    "token_plan",
    "broad_reference",
    "tl_detection_score",
    "token_role_scores",
    "duplicate_detection",
    "RelationPlan",
    "relation_scores",
    "relation_columns",
    "relation_finish",
    "word_columns",
    "special_columns",
    "value_norms",
    "norm_weighted",
]
