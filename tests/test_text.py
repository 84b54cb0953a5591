"""The one sanitiser for names, paths and messages shown to people."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from moetrace.text import visible


def test_escapes_what_acts_on_a_terminal_and_keeps_readable_text() -> None:
    assert visible("träce.json") == "träce.json"
    assert visible("gemm\x1b[31mred") == "gemm\\x1b[31mred"
    assert visible("a\nb\rc") == "a\\x0ab\\x0dc"
    assert visible("x\x9by") == "x\\x9by"  # C1 CSI
    assert visible("abc\u202edcba") == "abc\\u202edcba"  # right-to-left override
    assert visible("[bold]not markup[/]") == "[bold]not markup[/]"  # markup is Rich's job
    assert visible("tab\tkept") == "tab\tkept"
    assert visible(12) == "12"


@given(st.text())
def test_output_is_one_line_without_escape_sequences(text: str) -> None:
    out = visible(text)
    assert "\n" not in out and "\r" not in out and "\x1b" not in out and "\x9b" not in out
    assert not any(0x7F <= ord(c) < 0xA0 or (ord(c) < 32 and c != "\t") for c in out)
    # nothing printable is lost: removing the escapes' effect gives back a printable text
    if text.isprintable():
        assert out == text or any(ord(c) in range(0x2028, 0x206A) for c in text)


def test_cli_error_keeps_non_ascii_path_readable(tmp_path: object) -> None:
    from click.testing import CliRunner

    from moetrace.cli import main

    result = CliRunner().invoke(main, ["metrics", "träce.json"])
    assert result.exit_code == 2
    assert "träce.json" in result.output and "\\xe4" not in result.output
