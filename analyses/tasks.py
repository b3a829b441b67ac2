"""The contrastive-pair tasks, in one place: the list (``TASKS``) and its check (``check_task``),
which the prompt generator (``analyses.validation.prompts.contrastive_pairs``), the circuits
(``analyses.circuits.tasks``) and ``interp circuit``'s help read. Imports nothing (the command line
builds its help from it without loading torch)."""

from __future__ import annotations

__all__ = ["TASKS", "check_task"]

TASKS = ("subject_verb", "pronoun_gender", "ioi", "induction")


def check_task(task: str) -> str:
    """``task`` if it is a known task name, else a ValueError listing the known ones."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    return task
