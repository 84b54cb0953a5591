"""What-if placements: an expert -> rank file and EPLB, replayed through relabelling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from moetrace.whatif.extract import LayerWorkload, WhatIfInputError
from moetrace.whatif.placement import as_round_robin, eplb, read_placement, what_if_layer


def _layer(rows: list[int], ranks: int) -> LayerWorkload:
    e = len(rows)
    return LayerWorkload(
        ranks, 64, 256, 384, e, 2, "bf16", rows, [x % ranks for x in range(e)],
        "sequential", 1, 128, 512, False, 1000, "executor",
    )  # fmt: skip


def _rank_rows(wl: LayerWorkload) -> list[int]:
    """Rows each rank receives under round-robin (expert e on rank e mod ranks)."""
    per = np.zeros(wl.ranks, dtype=np.int64)
    np.add.at(per, np.arange(wl.experts) % wl.ranks, wl.expert_rows)
    return per.tolist()


def test_a_file_map_puts_its_experts_rows_on_its_ranks(tmp_path: Path) -> None:
    wl = _layer([50, 10, 20, 5, 7, 8], 2)
    path = tmp_path / "map.txt"
    path.write_text("# expert -> rank\n1, 1, 0\n0 1 0\n")
    mapping = read_placement(str(path), 6, 2)
    assert mapping == [1, 1, 0, 0, 1, 0]
    out = as_round_robin(wl, mapping)
    assert _rank_rows(out) == [20 + 5 + 8, 50 + 10 + 7]  # by hand from the map
    assert sorted(out.expert_rows) == sorted(wl.expert_rows)
    changed, placement, label = what_if_layer(wl, str(path))
    assert placement == "round-robin" and label == "file map.txt" and changed == out


def test_eplb_replicates_the_heaviest_and_packs_by_hand() -> None:
    # rows [8,4,2,2] on 2 ranks, 2 redundant: expert 0 gets both copies (8/2=4 ties 4, first
    # wins), loads per copy 8/3; packing heaviest first onto the least loaded rank with a free
    # slot gives rank 0 {e1, e0c, e3} and rank 1 {e0, e0b, e2}; e0's 8 rows split 4/2/2
    out = eplb(_layer([8, 4, 2, 2], 2), 2)
    assert out.experts == 6 and sum(out.expert_rows) == 16
    assert _rank_rows(out) == [8, 8]
    assert sorted(out.expert_rows) == [2, 2, 2, 2, 4, 4]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("eplb:1", "must be a multiple of the 2 ranks"),
        ("eplb:x", "expected eplb or eplb:R"),
        ("nowhere.txt", "not round-robin, balanced, eplb[:R] or an existing file"),
    ],
)
def test_bad_placements_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(WhatIfInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        what_if_layer(_layer([8, 4, 2, 2], 2), spec)


def test_a_file_with_unequal_ranks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "map.txt"
    path.write_text("0 0 0 1\n")
    with pytest.raises(WhatIfInputError, match="same number of experts"):
        what_if_layer(_layer([8, 4, 2, 2], 2), str(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00binary", "cannot read placement: not text"),
        ("0 1 \u00b2 1".encode(), "is not a rank in 0..1"),
        (b"0 1 0", "3 ranks given, the layer has 4 experts"),
    ],
)
def test_a_bad_placement_file_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "map.txt"
    path.write_bytes(content)
    with pytest.raises(WhatIfInputError, match=message):
        what_if_layer(_layer([8, 4, 2, 2], 2), str(path))
