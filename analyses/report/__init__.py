"""Pages that combine several analyses: ``summary`` (the main job's one-page summary) and ``tour``
(the model, its hooks and shapes, one pattern)."""
