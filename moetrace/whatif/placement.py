"""What-if placements of a measured layer: an expert -> rank map from a file, or EPLB.

The executor places experts round-robin or balanced; any other map with the same number of
experts on every rank is the round-robin one after relabelling the experts (rank r's s-th
expert becomes expert s·ranks + r, its measured rows with it), so the ranks receive exactly
the rows the map gives them.

`eplb[:R]` is the global policy of DeepSeek's EPLB as vLLM ships it
(vllm/distributed/eplb/rebalance_algo.py, adapted from github.com/deepseek-ai/EPLB):
`replicate_experts` adds R redundant physical experts one at a time, each a copy of the
logical expert with the largest load per copy, then `balanced_packing` puts the physical
experts (load = the logical expert's rows / its copies) heaviest first onto the least loaded
rank that still has a free slot. A replica is a physical expert with its own weights (as in
EPLB), so the replayed layer has E + R experts and reads every copy's weights.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from moetrace.whatif.extract import LayerWorkload, WhatIfInputError

BUILTIN = ("round-robin", "balanced")


def as_round_robin(wl: LayerWorkload, expert_rank: list[int]) -> LayerWorkload:
    """`wl` with its experts relabelled so that round-robin puts on every rank the experts
    (and rows) `expert_rank` puts there; every rank must hold the same number of experts."""
    ranks = wl.ranks
    counts = np.bincount(np.asarray(expert_rank, dtype=np.int64), minlength=ranks)
    if counts.size != ranks or len(set(counts.tolist())) != 1:
        raise WhatIfInputError(
            f"placement: every rank must hold the same number of experts (got {counts.tolist()})"
        )
    rows = [0] * len(expert_rank)
    slot = [0] * ranks
    for e, r in enumerate(expert_rank):  # E <= a few hundred: a loop over experts
        rows[slot[r] * ranks + r] = wl.expert_rows[e]
        slot[r] += 1
    return dataclasses.replace(
        wl,
        experts=len(expert_rank),
        expert_rows=rows,
        expert_rank=[e % ranks for e in range(len(expert_rank))],
    )


def read_placement(path: str, experts: int, ranks: int) -> list[int]:
    """An expert -> rank map from a text file: one rank per expert, in expert order, separated
    by spaces, commas or newlines ('#' starts a comment)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not text"
        raise WhatIfInputError(f"{path}: cannot read placement: {why}") from None
    words = " ".join(line.split("#", 1)[0] for line in text.splitlines()).replace(",", " ")
    out = []
    for i, word in enumerate(words.split()):
        if not re.fullmatch(r"[0-9]+", word) or int(word) >= ranks:
            raise WhatIfInputError(f"{path}: expert {i}: {word!r} is not a rank in 0..{ranks - 1}")
        out.append(int(word))
    if len(out) != experts:
        raise WhatIfInputError(f"{path}: {len(out)} ranks given, the layer has {experts} experts")
    return out


def eplb(wl: LayerWorkload, redundant: int) -> LayerWorkload:
    """The layer under EPLB's global policy with `redundant` extra physical experts."""
    ranks, experts = wl.ranks, wl.experts
    if redundant < 0 or (experts + redundant) % ranks:
        raise WhatIfInputError(
            f"--placement eplb:{redundant}: experts + redundant ({experts + redundant}) must be "
            f"a multiple of the {ranks} ranks"
        )
    load = np.asarray(wl.expert_rows, dtype=np.float64)
    copies = np.ones(experts, dtype=np.int64)
    phy2log = list(range(experts))
    for _ in range(redundant):  # replicate_experts: the largest load per copy gets one more
        e = int(np.argmax(load / copies))
        phy2log.append(e)
        copies[e] += 1
    phy = np.asarray(phy2log)
    weight = load[phy] / copies[phy]
    per = len(phy) // ranks
    rank_load = np.zeros(ranks)
    slots = np.full(ranks, per)
    phy_rank = np.empty(len(phy), dtype=np.int64)
    for p in np.argsort(-weight, kind="stable"):  # balanced_packing
        free = np.flatnonzero(slots > 0)
        target = int(free[np.argmin(rank_load[free])])
        phy_rank[p] = target
        rank_load[target] += weight[p]
        slots[target] -= 1
    # each copy gets its share of the logical expert's rows (whole rows, the rest to the first)
    rows = np.zeros(len(phy), dtype=np.int64)
    for e in range(experts):
        idx = np.flatnonzero(phy == e)
        share, rest = divmod(int(wl.expert_rows[e]), idx.size)
        rows[idx] = share
        rows[idx[0]] += rest
    spread = dataclasses.replace(wl, experts=len(phy), expert_rows=rows.tolist())
    return as_round_robin(spread, phy_rank.tolist())


def what_if_layer(wl: LayerWorkload, spec: str | None) -> tuple[LayerWorkload, str | None, str]:
    """(the layer to simulate, the executor placement to ask for, the placement's label) of a
    `--placement` value: round-robin | balanced (the executor's), eplb[:R], or a file."""
    if spec is None or spec in BUILTIN:
        return wl, spec, spec or ""
    if spec == "eplb" or spec.startswith("eplb:"):
        tail = spec.partition(":")[2] or "0"
        if not re.fullmatch(r"[0-9]+", tail):
            raise WhatIfInputError(f"--placement {spec}: expected eplb or eplb:R (R redundant)")
        return eplb(wl, int(tail)), "round-robin", f"eplb ({int(tail)} redundant)"
    if not Path(spec).exists():
        raise WhatIfInputError(
            f"--placement {spec}: not round-robin, balanced, eplb[:R] or an existing file"
        )
    mapped = as_round_robin(wl, read_placement(spec, wl.experts, wl.ranks))
    return mapped, "round-robin", f"file {Path(spec).name}"
