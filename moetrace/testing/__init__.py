"""A testing kit for moetrace and for code built on it: traces to test with, and references.

- `builders`: seeded trace builders (random multi-rank traces, an ASAP-scheduled task graph,
  executor- and Kineto-shaped traces); `synthetic`: a regular grid of lanes at any size.
- `strategies`: hypothesis strategies drawing traces and Chrome JSON inputs. It imports
  hypothesis, which only the dev extra installs (`pip install moetrace[dev]`), so it is not
  imported here: `from moetrace.testing.strategies import traces`.
- `compare`: `assert_trace_equal` and `trace_diff`, frame by frame, with the readers' row order.
- `reference` and `nesting`: slow, obviously correct plain-Python versions of the metrics
  (docs/metrics.md) and of nesting depth and overflow lanes, to check the vectorised code.
- `dense_moe`: the executor's functional proof (its task graph on numpy buffers, in simulated
  time order, against a dense MoE layer).
- `pftrace_packets`: hand-built Perfetto TrackEvent descriptors for reader tests;
  `pftrace_official`: the official `StreamingTraceProtoBuilder` writer, the oracle the
  production `.pftrace` encoder must match byte for byte.
"""

from __future__ import annotations

from moetrace.testing.builders import asap_trace, executor_like, kineto_like, random_trace
from moetrace.testing.compare import assert_trace_equal, canonical_order, trace_diff
from moetrace.testing.synthetic import synthetic_trace

__all__ = [
    "asap_trace",
    "assert_trace_equal",
    "canonical_order",
    "executor_like",
    "kineto_like",
    "random_trace",
    "synthetic_trace",
    "trace_diff",
]
