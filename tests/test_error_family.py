"""The error family is closed: the user-facing errors of the rules files and the what-if
inputs are `MoetraceError`s (one line, exit 2, caught once at the CLI), and still
`ValueError`s so existing `except ValueError` callers keep working."""

from __future__ import annotations

import pytest

from moetrace.analysis.moe_rules import RulesError, parse_rules
from moetrace.errors import MoetraceError
from moetrace.whatif.extract import WhatIfInputError, parse_sets


@pytest.mark.parametrize("cls", [RulesError, WhatIfInputError])
def test_user_facing_errors_join_the_family(cls: type[Exception]) -> None:
    """Both classes derive from MoetraceError and keep ValueError as a base."""
    assert issubclass(cls, MoetraceError)
    assert issubclass(cls, ValueError)


def test_bad_rules_file_is_caught_as_moetrace_error() -> None:
    """A schema break raised by parse_rules is caught by `except MoetraceError`, one line."""
    with pytest.raises(MoetraceError) as err:
        parse_rules('framwork = "x"\n', "mine.toml")
    assert str(err.value).startswith("mine.toml: unknown key")
    assert "\n" not in str(err.value)


def test_bad_whatif_set_is_caught_as_moetrace_error() -> None:
    """An unknown --set key is caught by `except MoetraceError`, one line naming the pair."""
    with pytest.raises(MoetraceError) as err:
        parse_sets(["nope=1"])
    assert str(err.value).startswith("--set 'nope=1'")
    assert "\n" not in str(err.value)
