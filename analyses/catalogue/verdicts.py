"""The catalogue's verdict rule: a head's pattern (its labelled roles that a task needs) joined
with its causal effect on that task (patching, at the position where the role acts).

**The causal state** of a head on a task, from the effect's 95% interval over pairs and the
minimum effect that counts (``min_effect`` = ``REL_MIN_EFFECT`` x the mean clean score: the constant
``interp validate --powered`` uses, ``analyses.validation.metrics``):

* ``effect``: the interval clears the minimum effect, ``ci_low >= min_effect`` (the head carries
  the behaviour) or ``ci_high <= -min_effect`` (it works against it: ``sign`` -1);
* ``no effect``: the whole interval lies inside ``(-min_effect, +min_effect)`` (equivalence);
* ``under-powered``: neither (more pairs would narrow the interval).

**The verdicts** (``VERDICTS``), per head and task:

* ``mechanism``: a pattern role the task needs and an effect;
* ``pattern, no effect``: the role, and the interval inside the equivalence band;
* ``inconclusive``: the role, and an under-powered interval;
* ``effect, no named pattern``: an effect and no role that explains it (the heads a pattern report
  misses; its other labels, if any, are listed beside it);
* ``idle``: a no-op sink on the map (``primary`` "no-op sink" / "idle (sink)") without an effect;
* ``quiet``: no role for the task and no effect shown (the interval does not clear the minimum);
* ``no causal test``: a row of its own (``task`` "-") for a head's roles that no solved task
  exercises (local, delimiter, self-token, a retrospective reading, or a role whose task the model
  does not solve).

**The role-to-task map** (``ROLE_TASKS``) on a causal LM: a predictive reading acts at the answer
position, which is where the task reads its answer, so ``subject_verb (predictive)`` ->
subject_verb and ``anaphora (predictive)`` -> pronoun_gender; the retrospective readings act on the
verb's (or pronoun's) own row, which the task's prompt does not contain (the answer *is* that
word), so no task tests them. ``ioi (predictive)`` -> ioi; ``induction`` -> induction and ioi (Wang
et al. 2022's circuit has induction heads); ``duplicate_token`` -> ioi, measured at every position
(``ALL_POSITION_ROLES``: it acts at the repeated name, which the ABC corruption replaces), and so are
induction heads on ioi (``ELSEWHERE``: in Wang et al.'s circuit they act at the repeated name, not at
the final token); induction heads on the induction task act at the answer position.

**Previous-token heads have no task here**, and duplicate-token heads none but IOI: patching can only
show what differs between the two prompts of a pair, and these corruptions leave what those heads
write, where it is read, the same. The induction pair changes the copied token x[k] of the first copy;
the key the induction head looks up is at x[k]'s own position, whose previous token x[k-1] is the same
in both prompts (the previous-token head writes the same thing there), and the prompt holds no second
x[k] for a duplicate-token head. In IOI the corruption changes the repeated name S2, not the token
before S1 + 1. Measured on SmolLM2 (the best 4 heads of each role, patched at every position on 32
pairs): every previous-token head's effect lay within +-0.05 on both tasks (min effect 0.21 and 0.65),
and every duplicate-token head's within +-0.03 on induction: "pattern, no effect" would have been a
claim the pairs cannot make. On an encoder the tasks are ``interp validate``'s probes
(``ENCODER_TASKS``: a linear probe's log-odds of the subject's number at the verb, and of the
antecedent at the pronoun), ablated at every position.
"""

from __future__ import annotations

import math

__all__ = [
    "VERDICTS",
    "STATES",
    "ROLE_TASKS",
    "ENCODER_TASKS",
    "ALL_POSITION_ROLES",
    "ELSEWHERE",
    "NO_TASK",
    "acts_elsewhere",
    "causal_state",
    "decide",
    "tasks_of",
]

VERDICTS = (
    "mechanism",
    "pattern, no effect",
    "inconclusive",
    "effect, no named pattern",
    "idle",
    "quiet",
    "no causal test",
)
STATES = ("effect", "no effect", "under-powered", "not measured")
ROLE_TASKS = {
    "subject_verb (predictive)": ("subject_verb",),
    "anaphora (predictive)": ("pronoun_gender",),
    "ioi (predictive)": ("ioi",),
    "induction": ("induction", "ioi"),
    "duplicate_token": ("ioi",),
}
# the encoder's tasks: interp validate's probe metrics, named by what they read
ENCODER_TASKS = {"sv_probe": "subject_verb (probe)", "anaphora_probe": "anaphora (probe)"}
ALL_POSITION_ROLES = ("previous_token", "duplicate_token")
# (role, task) pairs where a role acts before the answer position on that task: in IOI, induction heads
# act at the repeated name S2 (with duplicate-token heads, Wang et al. 2022), not at the final token
ELSEWHERE = {("induction", "ioi")}
NO_TASK = "-"
IDLE_PRIMARIES = ("no-op sink", "idle (sink)")


def acts_elsewhere(role: str, task: str) -> bool:
    """Whether ``role`` acts on ``task`` at positions before the answer, so that its heads are patched at
    every position there (``ALL_POSITION_ROLES`` on any task, and ``ELSEWHERE``'s pairs)."""
    return role in ALL_POSITION_ROLES or (role, task) in ELSEWHERE


def tasks_of(role: str, encoder: bool = False, role_tasks: dict | None = None) -> tuple[str, ...]:
    """The tasks a labelled role (a label name, e.g. "subject_verb (predictive)") is tested on:
    ``role_tasks`` (default ``ROLE_TASKS``; a caller with pairs of their own says what they test),
    ``ENCODER_TASKS`` on an encoder."""
    if encoder:
        from analyses.validation.metrics import role_metric

        metric = role_metric(role, causal=False)
        return (ENCODER_TASKS[metric],) if metric in ENCODER_TASKS else ()
    return (ROLE_TASKS if role_tasks is None else role_tasks).get(role, ())


def causal_state(effect: float, ci_low: float, ci_high: float, min_effect: float) -> tuple[str, int]:
    """(state, sign): ``STATES``' first three by the rule in the module docstring, "not measured"
    for a NaN; sign +1 (carries the behaviour), -1 (works against it), 0 (no effect shown)."""
    if not all(math.isfinite(v) for v in (effect, ci_low, ci_high, min_effect)):
        return "not measured", 0
    if ci_low >= min_effect:
        return "effect", 1
    if ci_high <= -min_effect:
        return "effect", -1
    if -min_effect < ci_low and ci_high < min_effect:
        return "no effect", 0
    return "under-powered", 0


def decide(pattern: bool, state: str, primary: str = "", sign: int = 1) -> tuple[str, str]:
    """(verdict, reason) of one head on one task: ``pattern`` (it has a role the task needs),
    ``state`` and ``sign`` (``causal_state``; a head that works against the behaviour, e.g. a negative
    name mover, is a mechanism too, and its reason says so), ``primary`` (its primary role on the map:
    an idle sink's is "no-op sink" or "idle (sink)")."""
    if state not in STATES:
        raise ValueError(f"unknown causal state {state!r}; one of {', '.join(STATES)}")
    if state == "not measured":
        return "no causal test", "not measured at the position where its role acts (not among the heads patched there)"
    against = " the other way (it works against the behaviour)" if sign < 0 else ""
    if pattern:
        if state == "effect":
            return "mechanism", f"the pattern the task needs, and patching it moves the answer{against}"
        if state == "no effect":
            return "pattern, no effect", "the pattern, but the whole interval lies inside +-min_effect"
        return "inconclusive", "the pattern; the interval neither clears min_effect nor lies inside the band"
    if state == "effect":
        return "effect, no named pattern", f"patching it moves the answer{against}; no label for this task explains it"
    if primary in IDLE_PRIMARIES:
        return "idle", "a no-op sink head (norm lens) without an effect on this task"
    return "quiet", "no label for this task and no effect that clears min_effect"
