"""The executor's routing as it was first written (whole-matrix Gumbel top-k), kept as the
reference that `executor.workload.route` must reproduce bit for bit (tests/executor/
test_route.py): every token's k experts are the top-k of log(weight) + Gumbel noise drawn in one
`Generator.gumbel` call over [ranks, tokens, experts], selected by one `np.argpartition`. The
weights (`routing_log_weights`) and balanced routing (no draws) are shared with `route`."""

from __future__ import annotations

import numpy as np

from moetrace.executor.workload import Workload, route, routing_log_weights


def route_reference(wl: Workload) -> np.ndarray:
    """Expert ids chosen by every token: int32 [ranks, tokens, top_k], k distinct per token."""
    ep, t, k, e = wl.ranks, wl.tokens, wl.shape.top_k, wl.shape.experts
    if wl.routing == "balanced":  # no draws: the same in both
        return route(wl)
    rng = np.random.default_rng(wl.seed)
    logw = routing_log_weights(wl, rng)
    gumbel = rng.gumbel(size=(ep, t, e))
    scores = logw[None, None, :] + gumbel
    top = np.argpartition(-scores, k - 1, axis=2)[:, :, :k]
    return np.sort(top, axis=2).astype(np.int32)
