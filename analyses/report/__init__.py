"""Pages that combine several analyses: ``page`` (one model's report.html and index.html, from the
jinja2 templates in ``templates/`` through ``analyses.html``), ``summary`` (the main job's one-page
summary) and ``tour`` (the model, its hooks and shapes, one pattern)."""
