"""Routing: the vectorised `workload.route` picks, for every token, exactly the experts of the
reference (`moetrace.testing.route_reference`: one Gumbel draw per (token, expert) over the
whole matrix, one argpartition), on random shapes, skews, count files and seeds; and on the
paths that are rare with real inputs (rows redone one by one, whole chunks redone, a zero
uniform draw), forced here."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import moetrace.executor.workload as workload
from moetrace.executor.workload import SHAPES, make_workload, route
from moetrace.testing.route_reference import route_reference


def _workload(rng: np.random.Generator, routing: str, experts: int, top_k: int) -> Any:
    shape = dataclasses.replace(SHAPES["deepseek-v3"], experts=experts, top_k=top_k)
    divisors = [r for r in (1, 2, 4, 8, 16) if experts % r == 0]
    ranks = int(rng.choice(divisors))
    tokens = int(rng.integers(1, 700))
    return make_workload(shape, ranks, tokens, routing=routing, seed=int(rng.integers(1 << 31)))


@pytest.mark.parametrize("case", range(24))
def test_route_equals_reference_on_random_zipf(case: int) -> None:
    rng = np.random.default_rng(1000 + case)
    experts = int(rng.choice([8, 16, 60, 64, 128, 256, 384]))
    top_k = int(rng.integers(1, min(experts, 12) + 1))
    skew = float(rng.choice([0.0, 0.2, 0.5, 1.0, 1.2, 2.0, 4.0]))
    wl = _workload(rng, f"zipf:{skew}", experts, top_k)
    got, want = route(wl), route_reference(wl)
    assert got.shape == (wl.ranks, wl.tokens, top_k) and got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", range(10))
def test_route_equals_reference_on_random_counts(case: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(2000 + case)
    experts = int(rng.choice([16, 64, 256]))
    top_k = int(rng.integers(1, 9))
    counts = rng.integers(0, 1000, experts).astype(float)
    # some experts never chosen; in a few cases k or fewer are left (every row is redone)
    zero = rng.permutation(experts)[: int(rng.integers(0, experts - 1))]
    counts[zero] = 0.0
    if counts.sum() == 0:
        counts[0] = 1.0
    path = tmp_path / "counts.txt"
    path.write_text(" ".join(f"{c:g}" for c in counts))
    wl = _workload(rng, f"counts:{path}", experts, top_k)
    np.testing.assert_array_equal(route(wl), route_reference(wl))


def test_route_equals_reference_at_full_size_and_small_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wl = make_workload("deepseek-v3", 16, 4096, routing="zipf:1.0", seed=11)
    want = route_reference(wl)
    np.testing.assert_array_equal(route(wl), want)
    monkeypatch.setattr(workload, "_CHUNK_DRAWS", 3 * 256 + 5)  # chunks of 3 rows
    np.testing.assert_array_equal(route(wl), want)


@pytest.mark.parametrize("redo_rows", [0, 10**9])
def test_rows_redone_exactly(monkeypatch: pytest.MonkeyPatch, redo_rows: int) -> None:
    """A huge tie margin sends every row to the exact path: chunk by chunk (redo_rows=0) or
    row by row (redo_rows huge); the answer must not change."""
    wl = make_workload("deepseek-v3", 2, 40, routing="zipf:0.5", seed=5)
    monkeypatch.setattr(workload, "_TIE", 1e9)
    monkeypatch.setattr(workload, "_REDO_ROWS", redo_rows)
    monkeypatch.setattr(workload, "_CHUNK_DRAWS", 7 * 256)
    np.testing.assert_array_equal(route(wl), route_reference(wl))


class _ZeroAt(np.random.Generator):
    """A generator whose `random` returns a 0.0 at one flat position of its `nth` call (numpy's
    gumbel would redraw there): the code must then take the rest from `gumbel` itself."""

    def __init__(self, seed: int, nth: int, at: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.calls, self.nth, self.at = 0, nth, at

    def random(self, *args: Any, **kwargs: Any) -> Any:
        out = super().random(*args, **kwargs)
        if self.calls == self.nth:
            out.reshape(-1)[self.at] = 0.0
        self.calls += 1
        return out


def test_zero_draw_hands_the_rest_to_gumbel(monkeypatch: pytest.MonkeyPatch) -> None:
    experts, k, rows, chunk_rows = 64, 6, 50, 8
    monkeypatch.setattr(workload, "_CHUNK_DRAWS", chunk_rows * experts)
    logw = np.log(np.arange(1, experts + 1, dtype=np.float64) ** -1.0 / 4.0)
    got = workload._gumbel_top_k(_ZeroAt(3, nth=2, at=77), logw, rows, k)
    plain = np.random.Generator(np.random.PCG64(3))
    before = plain.gumbel(size=(2 * chunk_rows, experts))  # chunks 0 and 1 as drawn
    rest = plain.gumbel(size=(rows - 2 * chunk_rows, experts))  # chunk 2 on, from gumbel
    scores = logw[None, :] + np.concatenate([before, rest])
    want = np.sort(np.argpartition(-scores, k - 1, axis=1)[:, :k], axis=1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("experts", "top_k"), [(8, 8), (16, 15), (64, 40), (256, 1)])
def test_route_equals_reference_at_extreme_top_k(experts: int, top_k: int) -> None:
    shape = dataclasses.replace(SHAPES["deepseek-v3"], experts=experts, top_k=top_k)
    for routing in ("zipf:0.0", "zipf:1.5"):
        wl = make_workload(shape, 2, 300, routing=routing, seed=experts + top_k)
        np.testing.assert_array_equal(route(wl), route_reference(wl))
