"""Deeply nested JSON: retry a decode on a thread with a big stack instead of failing.

msgspec (like Python's json) recurses once per nesting level and stops at Python's recursion
limit (~1000 levels). Valid traces can nest deeper (args holding a deep structure), so a
RecursionError is retried once on a thread with a `STACK_BYTES` stack and a recursion limit
of `MAX_DEPTH` levels; only input nested deeper than that is refused, with a message naming
the limit and the byte where the nesting passes it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np

T = TypeVar("T")

MAX_DEPTH = 1_000_000
"""Deepest JSON nesting moetrace reads (levels). msgspec uses < 360 bytes of C stack a level."""

STACK_BYTES = 1 << 30
"""Stack of the retry thread (virtual memory; only the pages used are committed)."""

_LOCK = threading.Lock()


class TooDeep(Exception):
    """The data is nested deeper than MAX_DEPTH levels even on the big stack."""


def call_deep(func: Callable[[], T]) -> T:
    """`func()`; when it hits the recursion limit, once more on a big-stack thread with a
    recursion limit of MAX_DEPTH levels. Raises `TooDeep` if that is not enough."""
    try:
        return func()
    except RecursionError:
        pass
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(func())
        except BaseException as exc:  # handed to the calling thread
            failure.append(exc)

    with _LOCK:  # the recursion limit and the stack size are process-wide settings
        old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            sys.setrecursionlimit(MAX_DEPTH + 10_000)
            worker = threading.Thread(target=run, name="moetrace-deep-json", daemon=True)
            worker.start()
            worker.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if failure:
        if isinstance(failure[0], RecursionError):
            raise TooDeep() from None
        raise failure[0]
    return result[0]


def first_too_deep(blocks: Callable[[], bytes], limit: int = MAX_DEPTH) -> int | None:
    """Byte offset where JSON nesting ([ and { outside strings) first exceeds `limit`, read
    block by block from `blocks()` (b"" at the end); None if it never does. Vectorised per
    block: quotes preceded by an even run of backslashes toggle the in-string state."""
    depth = 0
    in_string = False
    backslashes = 0  # run of backslashes at the end of the previous block
    offset = 0
    while True:
        block = blocks()
        if not block:
            return None
        data = np.frombuffer(block, dtype=np.uint8)
        n = len(data)
        is_bs = data == 0x5C
        # length of the backslash run ending just before each byte
        idx = np.arange(n)
        last_non_bs = np.maximum.accumulate(np.where(~is_bs, idx, -1))
        prev_non_bs = np.concatenate(([-1], last_non_bs[:-1]))
        run_before = idx - 1 - prev_non_bs
        run_before = np.where(prev_non_bs < 0, run_before + backslashes, run_before)
        quote = (data == 0x22) & (run_before % 2 == 0)
        toggles = np.cumsum(quote)
        inside = (toggles % 2 == 1) ^ in_string  # a quote itself counts as inside when opening
        outside = ~inside & ~quote
        opens = ((data == 0x5B) | (data == 0x7B)) & outside
        closes = ((data == 0x5D) | (data == 0x7D)) & outside
        levels = depth + np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
        over = np.flatnonzero(levels > limit)
        if len(over):
            return offset + int(over[0])
        depth = int(levels[-1]) if n else depth
        in_string = bool((int(toggles[-1]) % 2 == 1) ^ in_string) if n else in_string
        tail_run = n - 1 - int(last_non_bs[-1]) if n else 0
        backslashes = tail_run + (backslashes if tail_run == n else 0)
        offset += n
