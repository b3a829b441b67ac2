"""Pages that combine several analyses: ``page`` (one model's report.html and index.html, from the
jinja2 templates in ``templates/`` through ``analyses.html``), ``summary`` (the main job's one-page
summary), ``tour`` (the model, its hooks and shapes, one pattern) and ``compose`` (analyses composed:
retrieval heads on the head report's role map, the cross-model comparison)."""
