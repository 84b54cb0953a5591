"""Resource floors of a run: the time each resource needs at full rate for the busiest rank.

No schedule can beat them, so they are what anyone can check a simulated makespan against:
- compute: the busiest rank's cube FLOPs at the peak of all its AIC (efficiency 1), or its
  vector FLOPs at the peak of all its AIV, whichever is longer;
- hbm: the busiest rank's HBM bytes (compute tiles' HBM reads and writes plus the link DMA
  reads on the sender and writes on the receiver) at `hbm_bw`;
- link: the busiest port's remote bytes (TX on the sender, RX on the receiver) at the
  measured per-rank link rate of that direction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules import Timed
from moetrace.executor.taskgraph import T


def floors(t: Timed, hw: Hardware, ep: int) -> dict[str, Any]:
    """`floors_ns` (compute, hbm, link), total `flops`, `peak_flops` (all ranks), `hbm_bytes`
    of a timed run on `ep` ranks."""
    g = slice(0, t.n_graph)
    rank, typ = t.rank[g], t.type[g]
    flops = t.flops[g]
    aic = t.is_aic[g]
    aic_flops = np.bincount(rank[aic], weights=flops[aic], minlength=ep)
    vec_flops = np.bincount(rank[~aic], weights=flops[~aic], minlength=ep)
    compute_s = np.maximum(aic_flops / hw.peak_flops, vec_flops / (hw.vector_core_flops * hw.n_aiv))
    hbm = np.bincount(rank, weights=t.traffic_bytes[g], minlength=ep)
    remote = t.remote[g]
    # sum per port over both directions' transfers (one port carries dispatch then combine)
    tx = np.zeros(ep)
    rx = np.zeros(ep)
    for what in ("dispatch", "combine"):
        rate = hw.link_rate(what, ep)
        for name, acc in ((f"{what}_tx", tx), (f"{what}_rx", rx)):
            sel = remote & (typ == T[name])
            acc += np.bincount(rank[sel], weights=t.traffic_bytes[g][sel], minlength=ep) / rate
    link_s = np.maximum(tx, rx)
    return {
        "floors_ns": {
            "compute": float(compute_s.max() * 1e9),
            "hbm": float(hbm.max() / hw.hbm_bw * 1e9),
            "link": float(link_s.max() * 1e9),
        },
        "flops": float(flops[aic].sum()),
        "peak_flops": float(hw.peak_flops * ep),
        "hbm_bytes": float(hbm.sum()),
        "hbm_bytes_busiest_rank": float(hbm.max()),
    }


def mfu_over_makespan(t: Timed, hw: Hardware, ep: int, makespan_ns: float) -> float:
    """MFU over the layer's makespan on every rank: all ranks' GEMM FLOPs / (peak × makespan)."""
    f = floors(t, hw, ep)
    return float(f["flops"] / (f["peak_flops"] * makespan_ns * 1e-9))
