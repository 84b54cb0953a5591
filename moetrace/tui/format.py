"""How numbers look on screen: durations with units, percentages. Formatting only."""

from __future__ import annotations

import math
import re

from rich.cells import cell_len, set_cell_size


def fmt_ns(ns: float | None, digits: int = 3) -> str:
    """A duration or time in ns as text with a unit (ns, µs, ms, s)."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.{digits}g} µs"
    if a < 1e9:
        return f"{ns / 1e6:.{digits}g} ms"
    return f"{ns / 1e9:.{digits}g} s"


def fmt_pct(ratio: float | None) -> str:
    """A ratio 0..1 as a percentage, '–' when unknown."""
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return "–"
    return f"{100 * ratio:.1f}%"


def nice_step(span: float, cells: int, min_cells: int = 14) -> float:
    """A 1/2/5×10^k tick step (ns) so ticks are at least `min_cells` cells apart."""
    if span <= 0 or cells <= 0:
        return 1.0
    raw = span * min_cells / cells
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if base * m >= raw:
            return float(base * m)
    return float(base * 10)


def tick_label(t: float, step: float) -> str:
    """A ruler tick's time with as many decimals as the tick step needs to tell neighbours
    apart (6.741 ms, 6.742 ms at a 1 µs step, where `fmt_ns` would say 6.74 ms twice);
    trailing zeros dropped (2 ms, not 2.000 ms)."""
    a = abs(t)
    unit, scale = next(
        (u, f) for u, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0)) if a >= f or f == 1.0
    )
    decimals = max(0, math.ceil(-math.log10(step / scale) - 1e-9)) if step > 0 else 0
    text = f"{t / scale + 0.0:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{'0' if text in ('-0', '') else text} {unit}"


TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def parse_time(text: str) -> float | None:
    """'1.5ms', '200 us', '3s' or a bare number of ns -> ns; None if it is not a time."""
    s = text.replace(" ", "")
    for unit in sorted(TIME_UNITS, key=len, reverse=True):
        if s.endswith(unit):
            s, scale = s[: -len(unit)], TIME_UNITS[unit]
            break
    else:
        scale = 1.0
    try:
        value = float(s) * scale
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def fit_cells(name: str, cells: int) -> list[str]:
    """`name` laid out on exactly `cells` terminal cells, one string per cell: centred if it
    fits, else cut with '…'. A wide character (CJK, emoji) takes its two cells, the second
    holding "" so that joining any run of cells gives its true width; zero-width marks stay
    on the character before them; a wide character cut in half becomes a space."""
    out: list[str] = []
    for ch in name:
        w = cell_len(ch)
        if w == 0 and out:
            out[-1] += ch
        elif w == 2:
            out.extend((ch, ""))
        elif w == 1:
            out.append(ch)
    if len(out) > cells:
        out = out[: max(cells - 1, 0)]
        if out and cell_len(out[-1]) == 2:  # its second cell was cut off
            out[-1] = " "
        out += ["…"] if cells > 0 else []
    pad = cells - len(out)
    left = pad // 2 + (pad & cells & 1)  # the split str.center makes
    return [" "] * left + out + [" "] * (pad - left)


def fit_label(text: str, width: int, note: str = "") -> str:
    """A gutter label and its `note` (` idle 5%`) in exactly `width` cells: `width - 1` cells
    of text (wide characters counted as two), then one space of gap. When the label itself
    is too long it keeps its distinguishing tail (`label_tails`: `…lane 3`, `…(overlap 2)`,
    `…AIV 12`) and cuts the middle, the note left out; else the note is cut at its end."""
    if width <= 0:
        return ""
    room = width - 1
    if cell_len(text) > room:
        for head, tail in label_tails(text):
            head_cells = room - cell_len(tail) - 1
            if head_cells >= 1 and head[:head_cells].strip():
                return set_cell_size(head, head_cells) + "…" + tail + " "
    return set_cell_size(text + note, room) + " "


def label_tails(text: str) -> list[tuple[str, str]]:
    """(head, tail) pairs a cut label may keep, most kept first: the tail from the word
    before its last word holding a digit (`lane 3`, `(overlap 2)`, `AIV 12`), then from that
    word alone (`4339 (python)`), then those two without what follows the digits (`4339`
    of `thread 4339 (python)`); none when no word holds a digit."""
    words = list(re.finditer(r"\S+", text))
    last = next((i for i in range(len(words) - 1, -1, -1) if re.search(r"\d", words[i][0])), None)
    if last is None:
        return []
    starts = [words[last].start()]
    if last > 0 and not re.search(r"\d", words[last - 1][0]):
        starts.insert(0, words[last - 1].start())
    ends = list(dict.fromkeys([len(text), words[last].end()]))
    return [(text[:a], text[a:b]) for b in ends for a in starts if a > 0]


def count_text(n: int, noun: str) -> str:
    """'1 rank', '4 ranks', 'no rank ids' (a trace whose tracks carry no rank says so,
    rather than '0 ranks')."""
    if n == 0:
        return f"no {noun} ids"
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def where_text(rank: object, step: object) -> str:
    """Where a (rank, step) row is, for labels: 'r3 s1', 'r3', 's1', or 'whole trace' when
    the trace has neither (never 'rNone sNone')."""
    parts = [f"{k}{v}" for k, v in (("r", rank), ("s", step)) if v is not None]
    return " ".join(parts) if parts else "whole trace"
