"""Names are data: one rule for showing any user-supplied text (event names, paths, messages).

Control characters (C0 incl. newline and ESC, DEL, C1), line/paragraph separators and the
bidirectional overrides are shown as escapes (\\x1b, \\u202e), so a name can neither move the
cursor, change colours, break a one-line message nor reorder what is printed around it.
Printable non-ASCII stays as it is ("träce.json" is printed as "träce.json").
"""

from __future__ import annotations

import re

HIDDEN_CHARACTERS: tuple[str, ...] = tuple(
    chr(c)
    for c in (
        *range(0x00, 0x09),
        *range(0x0A, 0x20),
        *range(0x7F, 0xA0),
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
)
"""Every character `visible` escapes: C0 controls but tab, DEL, C1, U+2028/2029, the bidi
embeddings, overrides and isolates (one by one, also for vectorised replacing, e.g. Polars'
`str.replace_many(HIDDEN_CHARACTERS, [escape(c) for c in HIDDEN_CHARACTERS])`)."""

_HIDDEN = re.compile("[" + re.escape("".join(HIDDEN_CHARACTERS)) + "]")


def escape(char: str) -> str:
    """The escape `visible` shows for one hidden character: \\x1b, \\u202e."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape(match: re.Match[str]) -> str:
    return escape(match.group())


def visible(text: object) -> str:
    """`text` with every character that could act on the terminal shown as an escape."""
    s = str(text)
    return _HIDDEN.sub(_escape, s) if _HIDDEN.search(s) else s


def human_bytes(n: float | None) -> str:
    """Bytes for people in binary units, as NCCL-tests prints sizes: '2.0 MiB', '128 B'."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
