"""The order `make test` hands modules to its two workers (tests/conftest.py, decisions 0333 and 0337)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

REPO = Path(__file__).resolve().parent.parent


def test_each_prefix_of_the_longest_tests_names_a_module_or_a_test_that_exists() -> None:
    """A module renamed or a test removed would drop out of the list unseen: its tests would run in their class."""
    for prefix in LONGEST_FIRST:
        module, _, test = prefix.partition("::")
        assert (REPO / module).is_file(), prefix
        assert not test or f"def {test}" in (REPO / module).read_text(), prefix


def test_the_longest_tests_are_listed_once() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert not [a for a in LONGEST_FIRST for b in LONGEST_FIRST if a != b and a.startswith(b)]
