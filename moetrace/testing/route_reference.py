"""The executor's routing as it was first written (whole-matrix Gumbel top-k), kept as the
reference that `executor.workload.route` must reproduce bit for bit (tests/executor/
test_route.py): every token's k experts are the top-k of log(weight) + Gumbel noise drawn in one
`Generator.gumbel` call over [ranks, tokens, experts], selected by one `np.argpartition`."""

from __future__ import annotations

import numpy as np

from moetrace.executor.workload import Workload, parse_routing


def route_reference(wl: Workload) -> np.ndarray:
    """Expert ids chosen by every token: int32 [ranks, tokens, top_k], k distinct per token."""
    ep, t, k, e = wl.ranks, wl.tokens, wl.shape.top_k, wl.shape.experts
    kind, param = parse_routing(wl.routing, e)
    if kind == "balanced":
        base = (np.arange(t, dtype=np.int64)[:, None] * k + np.arange(k)[None, :]) % e
        return np.broadcast_to(base.astype(np.int32), (ep, t, k))
    rng = np.random.default_rng(wl.seed)
    if kind == "zipf":
        popularity = np.arange(1, e + 1, dtype=np.float64) ** -float(param)  # type: ignore[arg-type]
        weights = popularity[rng.permutation(e)]
    else:
        weights = np.asarray(param, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logw = np.log(weights / weights.sum())
    gumbel = rng.gumbel(size=(ep, t, e))
    scores = logw[None, None, :] + gumbel
    top = np.argpartition(-scores, k - 1, axis=2)[:, :, :k]
    return np.sort(top, axis=2).astype(np.int32)
