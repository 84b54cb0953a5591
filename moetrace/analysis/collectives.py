"""Collectives matched across ranks: one row per rank's part of a collective, then one per instance.

What is a collective, of which kind and family, is the classification stage's (labels.py:
comm_family, the collective label), never a name pattern here. Sources (each vectorised with
Polars string expressions over `args`, no loop per event):
- Kineto GPU kernels with a `Collective name` arg (process group, msg nelems, dtype, splits);
- comm kernels of a known family without args (NCCL/RCCL, DeepEP, ...): one group per
  family and collective kind;
- gloo (CPU-only PyTorch): `gloo` work on the gloo threads, split sizes from `c10d` calls;
- Ascend HCCL ops (`hcom_*`, family `hccl`) on the "Group N Communication" lanes;
- the executor's own transfers (`<phase>_tx` / `<phase>_rx` with src/dst in args).

Within a rank, the n-th call of a (group) is instance `seq` = n of that group on every rank:
collectives of one process group run in the same order on all its ranks (NCCL and gloo both
require it). Times here are each rank's own clock; `clocks.py` aligns them.
"""

from __future__ import annotations

import polars as pl

from moetrace.analysis.classify import STEP_PATTERN
from moetrace.analysis.labels import with_comm_labels
from moetrace.trace.model import Trace

OPS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "group": pl.String(),  # process group / communicator name
    "collective": pl.String(),  # all_to_all, all_reduce, all_gather, reduce_scatter, ...
    "seq": pl.Int64(),  # n-th call of the group on this rank (0-based)
    "event_id": pl.Int64(),
    "arrival_ns": pl.Int64(),  # when the rank entered the collective (its clock)
    "end_ns": pl.Int64(),  # when its part ended (its clock)
    "bytes": pl.Float64(),  # bytes this rank sends (input message)
    "row_bytes": pl.Float64(),  # bytes per row of the split sizes (all-to-all-v)
    "in_splits": pl.List(pl.Int64()),  # rows sent to each peer (all-to-all-v)
    "out_splits": pl.List(pl.Int64()),  # rows received from each peer
    "group_ranks": pl.List(pl.Int64()),  # the group's ranks when the trace says
    "algorithm": pl.String(),
    "step": pl.Int64(),
    "call_event_id": pl.Int64(),  # the host call that issued it (gloo: the c10d:: op)
}

BUS_FACTOR = {
    "all_reduce": "2(n-1)/n",
    "all_gather": "(n-1)/n",
    "reduce_scatter": "(n-1)/n",
    "all_to_all": "(n-1)/n",
    "broadcast": "1",
    "reduce": "1",
    "send_recv": "1",
}
"""NCCL-tests bus-bandwidth factors per collective (busbw = algbw x factor; n = group size)."""

DTYPE_BYTES = {
    "float": 4, "float32": 4, "fp32": 4, "int": 4, "int32": 4, "int64": 8, "long": 8,
    "long int": 8, "double": 8, "float64": 8, "half": 2, "float16": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2, "c10::half": 2, "c10::bfloat16": 2, "byte": 1, "char": 1,
    "int8": 1, "uint8": 1, "bool": 1, "unsigned char": 1, "signed char": 1, "short": 2,
    "int16": 2,
}  # fmt: skip
"""Element sizes in bytes of the dtype names Kineto, gloo and HCCL write (lower case)."""


def _arg_str(key: str) -> pl.Expr:
    return pl.col("args").str.extract(rf'"{key}"\s*:\s*"([^"]*)"', 1)


def _arg_num(key: str) -> pl.Expr:
    return pl.col("args").str.extract(rf'"{key}"\s*:\s*(-?\d+)', 1).cast(pl.Int64, strict=False)


def _int_list(text: pl.Expr) -> pl.Expr:
    """'1, 2, 3' -> [1, 2, 3]; '' -> []."""
    return (
        text.str.replace_all(r"[\[\]\s]", "")
        .str.split(",")
        .list.eval(pl.element().filter(pl.element() != "").cast(pl.Int64, strict=False))
    )


def _dtype_bytes(name: pl.Expr) -> pl.Expr:
    return name.str.to_lowercase().replace_strict(
        DTYPE_BYTES, default=None, return_dtype=pl.Float64
    )


def _kineto_kernels(ev: pl.DataFrame) -> pl.DataFrame:
    """GPU collective kernels, as the classification stage labels them (labels.py): comm
    kernels with Kineto's collective args or a comm family (HCCL's are `_hccl`'s); the
    collective kind is the label's (args first, then the rule's); without args the group is
    family:collective."""
    has_args = _arg_str("Collective name").is_not_null()
    dev = ev.filter(
        (pl.col("kind") == "comm")
        & (pl.col("unit") == "stream")
        & (has_args | pl.col("comm_family").is_not_null())
        & (pl.col("comm_family") != "hccl").fill_null(True)  # HCCL ops: `_hccl`
    )
    if dev.height == 0:
        return _empty()
    return dev.select(
        pl.col("rank").cast(pl.Int64),
        pl.when(has_args)
        .then(pl.lit("pg:") + pl.coalesce(_arg_str("Process Group Name"), pl.lit("?")))
        .otherwise(pl.col("comm_family") + pl.lit(":") + pl.col("label_collective"))
        .alias("group"),
        pl.col("label_collective").alias("collective"),
        pl.col("id").cast(pl.Int64).alias("event_id"),
        pl.col("ts").alias("arrival_ns"),
        pl.col("end").alias("end_ns"),
        (_arg_num("In msg nelems") * _dtype_bytes(_arg_str("dtype"))).alias("bytes"),
        # split sizes count dim-0 rows: bytes per row = message bytes / rows sent
        (
            _arg_num("In msg nelems")
            * _dtype_bytes(_arg_str("dtype"))
            / _int_list(_arg_str("In split size")).list.sum()
        ).alias("row_bytes"),
        _int_list(_arg_str("In split size")).alias("in_splits"),
        _int_list(_arg_str("Out split size")).alias("out_splits"),
        _int_list(_arg_str("Process Group Ranks")).alias("group_ranks"),
        pl.col("name")
        .str.extract(r"_(RING|TREE|NVLS|NVLSTREE|COLLNET\w*|PAT)_", 1)
        .alias("algorithm"),
    )


def _first_dims_bytes() -> tuple[pl.Expr, pl.Expr]:
    """(bytes of the first input tensor, bytes of one row of it) from `Input Dims`/`Input type`."""
    dims = _int_list(pl.col("args").str.extract(r'"Input Dims"\s*:\s*\[\s*\[([^\]]*)\]', 1))
    dtype = pl.col("args").str.extract(r'"Input type"\s*:\s*\[\s*"([^"]*)"', 1)
    size = _dtype_bytes(dtype)
    total = dims.list.eval(pl.element().cast(pl.Float64).product()).list.first() * size
    row = dims.list.slice(1).list.eval(pl.element().cast(pl.Float64).product()).list.first() * size
    return total, row


def _gloo(ev: pl.DataFrame) -> pl.DataFrame:
    """gloo work ranges (comm family `gloo`: arrival = start of the work on the gloo thread,
    end = its end), with the split sizes of the rank's n-th `c10d` collective call (family
    `c10d`, a known collective kind: not wait / recv_any_source) joined to its n-th gloo op."""
    work = ev.filter(pl.col("comm_family") == "gloo")
    if work.height == 0:
        return _empty()
    total, row = _first_dims_bytes()
    ops = (
        work.sort("rank", "ts", "id")
        .select(
            pl.col("rank").cast(pl.Int64),
            pl.lit("gloo").alias("group"),
            pl.col("label_collective").alias("collective"),
            pl.col("id").cast(pl.Int64).alias("event_id"),
            pl.col("ts").alias("arrival_ns"),
            pl.col("end").alias("end_ns"),
            total.alias("bytes"),
            row.alias("row_bytes"),
        )
        .with_columns(pl.int_range(pl.len()).over("rank").alias("nth"))
    )
    calls = ev.filter(
        (pl.col("comm_family") == "c10d")
        & (pl.col("kind") == "comm")
        & (pl.col("label_collective") != "other")
    ).sort("rank", "ts", "id")
    conc = pl.col("args").str.extract(r'"Concrete Inputs"\s*:\s*\[(.*?)\]\s*,\s*"Input type"', 1)
    # alltoall_base_(output, input, pg, output_split_sizes, input_split_sizes, ...)
    lists = conc.str.extract_all(r'"\[[^\]]*\]"|""')
    calls = calls.select(
        pl.col("rank").cast(pl.Int64),
        pl.int_range(pl.len()).over("rank").alias("nth"),
        pl.col("id").cast(pl.Int64).alias("call_event_id"),
        _int_list(lists.list.get(3, null_on_oob=True).str.strip_chars('"')).alias("out_splits"),
        _int_list(lists.list.get(4, null_on_oob=True).str.strip_chars('"')).alias("in_splits"),
    )
    per_rank = (
        ops.group_by("rank")
        .len()
        .join(calls.group_by("rank").len(), on="rank", how="left", suffix="_calls")
    )
    same = per_rank.filter(pl.col("len") == pl.col("len_calls"))["rank"]
    ops = ops.join(
        calls.filter(pl.col("rank").is_in(same.implode())), on=["rank", "nth"], how="left"
    )
    return ops.with_columns(
        pl.lit(None, pl.List(pl.Int64)).alias("group_ranks"),
        pl.lit(None, pl.String).alias("algorithm"),
    )


def _hccl(ev: pl.DataFrame) -> pl.DataFrame:
    """Ascend HCCL collective ops (comm family `hccl`: `hcom_<op>_...`) on the top level of
    the comm lanes."""
    ops = ev.filter(
        (pl.col("kind") == "comm") & (pl.col("depth") == 0) & (pl.col("comm_family") == "hccl")
    )
    if ops.height == 0:
        return _empty()
    size = _dtype_bytes(
        _arg_str("data_type").str.replace(r"(?i)^fp32$", "float").str.replace(r"(?i)^fp16$", "half")
    )
    return ops.select(
        pl.col("rank").cast(pl.Int64),
        (pl.lit("hccl:") + pl.coalesce(pl.col("thread_name"), pl.lit("?"))).alias("group"),
        pl.col("label_collective").alias("collective"),
        pl.col("id").cast(pl.Int64).alias("event_id"),
        pl.col("ts").alias("arrival_ns"),
        pl.col("end").alias("end_ns"),
        (_arg_num("count") * size).alias("bytes"),
        size.alias("row_bytes"),
        pl.lit(None, pl.List(pl.Int64)).alias("in_splits"),
        pl.lit(None, pl.List(pl.Int64)).alias("out_splits"),
        pl.lit(None, pl.List(pl.Int64)).alias("group_ranks"),
        _arg_str("alg_type").alias("algorithm"),
    )


def executor_transfers(ev: pl.DataFrame) -> pl.DataFrame:
    """The executor's transfer tasks: rank, phase (dispatch/combine), src, dst, bytes, ts, end."""
    tx = ev.filter(
        (pl.col("kind") == "comm")
        & pl.col("name").str.contains(r"^[a-z0-9]+_(tx|rx)$")
        & pl.col("args").str.contains('"src"')
    )
    return tx.select(
        pl.col("rank").cast(pl.Int64),
        pl.col("id").cast(pl.Int64).alias("event_id"),
        pl.col("name").str.extract(r"^([a-z0-9]+)_", 1).alias("phase"),
        pl.col("name").str.ends_with("_tx").alias("is_tx"),
        _arg_num("src").alias("src"),
        _arg_num("dst").alias("dst"),
        pl.col("bytes").fill_null(0.0),
        "ts",
        "end",
        "step",
    )


def _executor(ev: pl.DataFrame) -> pl.DataFrame:
    """Each phase of each step is one all-to-all: a rank arrives with its first send and
    leaves with its last receive."""
    tr = executor_transfers(ev)
    if tr.height == 0:
        return _empty()
    return (
        tr.group_by("rank", "step", "phase")
        .agg(
            pl.col("event_id").filter("is_tx").sort_by(pl.col("ts").filter("is_tx")).first(),
            pl.col("ts").filter("is_tx").min().alias("arrival_ns"),
            pl.col("end").filter(~pl.col("is_tx")).max().alias("end_ns"),
            pl.col("bytes").filter("is_tx").sum().alias("bytes"),
        )
        .filter(pl.col("arrival_ns").is_not_null() & pl.col("end_ns").is_not_null())
        .select(
            "rank",
            (pl.lit("executor:") + pl.col("phase")).alias("group"),
            pl.lit("all_to_all").alias("collective"),
            pl.col("event_id").cast(pl.Int64),
            "arrival_ns",
            "end_ns",
            "bytes",
            pl.lit(None, pl.Float64).alias("row_bytes"),
            pl.lit(None, pl.List(pl.Int64)).alias("in_splits"),
            pl.lit(None, pl.List(pl.Int64)).alias("out_splits"),
            pl.lit(None, pl.List(pl.Int64)).alias("group_ranks"),
            pl.lit(None, pl.String).alias("algorithm"),
        )
    )


def _empty() -> pl.DataFrame:
    skip = ("seq", "step", "call_event_id")
    return pl.DataFrame(schema={k: v for k, v in OPS_SCHEMA.items() if k not in skip})


def event_frame(trace: Trace) -> pl.DataFrame:
    """Events with rank, unit, thread name, end and step (from step markers on the same rank)."""
    ev = trace.events_with_tracks().with_columns(
        (pl.col("ts") + pl.col("dur")).alias("end"), pl.col("rank").cast(pl.Int64)
    )
    return ev.with_columns(step_of(ev))


def step_of(ev: pl.DataFrame) -> pl.Series:
    """Step number of each event: the `ProfilerStep#N` / `step N` marker of its rank that
    contains its start (markers without a rank apply to every rank); null when none does."""
    marks = (
        ev.filter((pl.col("kind") == "marker") & pl.col("name").str.contains(STEP_PATTERN))
        .select(
            "rank",
            pl.col("name").str.extract(STEP_PATTERN, 1).cast(pl.Int64).alias("step"),
            pl.col("ts").alias("m_lo"),
            pl.col("end").alias("m_hi"),
        )
        .sort("m_lo")
    )
    if marks.height == 0:
        return pl.Series("step", [None] * ev.height, dtype=pl.Int64)
    probe = ev.select(pl.int_range(pl.len()).alias("_i"), "rank", "ts").sort("ts")
    own = probe.filter(pl.col("rank").is_not_null()).join_asof(
        marks.filter(pl.col("rank").is_not_null()),
        left_on="ts",
        right_on="m_lo",
        by="rank",
        check_sortedness=False,
    )
    shared_marks = marks.filter(pl.col("rank").is_null()).drop("rank")
    if shared_marks.height:
        shared = probe.join_asof(shared_marks, left_on="ts", right_on="m_lo")
        own = pl.concat([own, shared], how="diagonal_relaxed").sort("_i", "m_lo", nulls_last=False)
        own = own.unique("_i", keep="last")
    hit = (pl.col("ts") < pl.col("m_hi")) | (pl.col("ts") == pl.col("m_lo"))
    out = probe.join(own.select("_i", pl.when(hit).then("step").alias("step")), on="_i", how="left")
    return out.sort("_i")["step"].alias("step")


def collective_ops(trace: Trace, ev: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every rank's part of every collective (`OPS_SCHEMA`), with `seq` numbered per
    (rank, group) in the order the rank entered them."""
    ev = with_comm_labels(event_frame(trace) if ev is None else ev)
    ev = ev.filter(pl.col("rank").is_not_null())
    parts = [_kineto_kernels(ev), _gloo(ev), _hccl(ev), _executor(ev)]
    ops = pl.concat([p for p in parts if p.height] or [_empty()], how="diagonal_relaxed")
    steps = ev.select(pl.col("id").cast(pl.Int64).alias("event_id"), "step")
    ops = ops.join(steps, on="event_id", how="left")
    ops = ops.sort("rank", "group", "arrival_ns", "event_id").with_columns(
        pl.int_range(pl.len()).over("rank", "group").cast(pl.Int64).alias("seq")
    )
    missing = [pl.lit(None, v).alias(k) for k, v in OPS_SCHEMA.items() if k not in ops.columns]
    return ops.with_columns(missing).select([pl.col(k).cast(v) for k, v in OPS_SCHEMA.items()])


def world_size(trace: Trace) -> int | None:
    """World size the trace states (Kineto `distributedInfo.world_size`, the executor's
    workload ranks), else None."""
    top = trace.meta.get("top")
    info = top.get("distributedInfo") if isinstance(top, dict) else None
    size = info.get("world_size") if isinstance(info, dict) else None
    executor = trace.meta.get("executor")
    if size is None and isinstance(executor, dict):
        workload = executor.get("workload")
        size = workload.get("ranks") if isinstance(workload, dict) else None
    return int(size) if isinstance(size, int | float) and size > 0 else None


def bus_factor(collective: pl.Expr, n: pl.Expr) -> pl.Expr:
    """The NCCL-tests bus-bandwidth factor of `collective` with `n` ranks (null if unknown)."""
    nf = n.cast(pl.Float64)
    return (
        pl.when(collective == "all_reduce")
        .then(2.0 * (nf - 1) / nf)
        .when(collective.is_in(["all_gather", "reduce_scatter", "all_to_all"]))
        .then((nf - 1) / nf)
        .when(collective.is_in(["broadcast", "reduce", "send_recv"]))
        .then(pl.lit(1.0))
        .otherwise(None)
    )


INSTANCE_SCHEMA: dict[str, pl.DataType] = {
    "group": pl.String(),
    "seq": pl.Int64(),
    "collective": pl.String(),
    "step": pl.Int64(),
    "bytes": pl.Float64(),
    "ranks": pl.List(pl.Int64()),
    "missing_ranks": pl.List(pl.Int64()),
    "first_arrival_ns": pl.Int64(),
    "last_arrival_ns": pl.Int64(),
    "last_rank": pl.Int64(),
    "end_ns": pl.Int64(),
    "skew_ns": pl.Int64(),
    "transfer_ns": pl.Int64(),
    "algbw_gbps": pl.Float64(),
    "busbw_gbps": pl.Float64(),
    "algorithm": pl.String(),
}


def match(ops: pl.DataFrame, *, expected_ranks: list[int] | None = None) -> pl.DataFrame:
    """One row per collective instance (`INSTANCE_SCHEMA`), from ops whose times are already on
    one clock (`clocks.align`). bytes = the largest message a rank of it sends;
    transfer_ns = last end − last arrival; algbw = bytes / transfer_ns (GB/s = bytes/ns);
    busbw = algbw × the NCCL-tests factor for the group size (the stated group, else the
    ranks seen). missing_ranks: ranks of the group (stated, else `expected_ranks`) absent here.
    """
    if ops.height == 0:
        return pl.DataFrame(schema=INSTANCE_SCHEMA)
    inst = (
        ops.sort("arrival_ns", "rank")
        .group_by("group", "seq")
        .agg(
            pl.col("collective").first(),
            pl.col("step").drop_nulls().min().alias("step"),
            pl.col("bytes").max(),
            pl.col("rank").sort().alias("ranks"),
            pl.col("arrival_ns").min().alias("first_arrival_ns"),
            pl.col("arrival_ns").max().alias("last_arrival_ns"),
            pl.col("rank").last().alias("last_rank"),
            pl.col("end_ns").max().alias("end_ns"),
            pl.col("group_ranks").drop_nulls().first().alias("group_ranks"),
            pl.col("algorithm").drop_nulls().first().alias("algorithm"),
        )
    )
    expected = pl.lit(expected_ranks or [], dtype=pl.List(pl.Int64))
    stated = pl.when(pl.col("group_ranks").list.len() > 0).then("group_ranks")
    members = stated.otherwise(
        pl.when(pl.lit(bool(expected_ranks))).then(expected).otherwise("ranks")
    )
    inst = (
        inst.with_columns(
            members.list.set_difference("ranks").list.sort().alias("missing_ranks"),
            members.list.len().alias("_n"),
            (pl.col("last_arrival_ns") - pl.col("first_arrival_ns")).alias("skew_ns"),
            (pl.col("end_ns") - pl.col("last_arrival_ns")).alias("transfer_ns"),
        )
        .with_columns(
            pl.when(pl.col("transfer_ns") > 0)
            .then(pl.col("bytes") / pl.col("transfer_ns"))
            .alias("algbw_gbps"),
        )
        .with_columns(
            (pl.col("algbw_gbps") * bus_factor(pl.col("collective"), pl.col("_n"))).alias(
                "busbw_gbps"
            )
        )
    )
    return inst.sort("first_arrival_ns", "group", "seq").select(
        [pl.col(k).cast(v) for k, v in INSTANCE_SCHEMA.items()]
    )
