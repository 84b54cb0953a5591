"""The one classification stage: what each event is, from the name rules (moetrace/rules/*.toml).

Every command reads these labels instead of matching names itself: `role` (compute, comm,
memory, sync, host), `rule_stage` (the MoE stage its own name gives, null when no rule
names it), `comm_family` (nccl, deepep, hccl...), `collective` (all_to_all, all_reduce...),
`short_name` (a demangled C++ name without template arguments and parameters) and `rule`
(`file:index` of the rule that matched, null when none did). Precedence: a rule that matches
the event's own name first; then the reader's kind; Kineto's `Collective name` arg wins over
names for the collective kind. Stages inherited from enclosing ops are moe.categorize's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

from moetrace.analysis.classify import (
    DEFAULT_DEVICE_COMM_PATTERNS,
    DEVICE_UNITS,
    collective_expr,
    comm_name_expr,
)
from moetrace.analysis.moe_rules import Rules, default_rules

LABEL_COLUMNS = ("role", "rule_stage", "comm_family", "collective", "short_name", "rule")
"""Columns `with_labels` adds."""

UNCLASSIFIED_WARN_SHARE = 0.10
"""Above this share of device time without a rule, the commands warn and name the top kernels."""

_TEMPLATE_MARK = "\u0001"
_MAX_TEMPLATE_DEPTH = 12


def short_name_expr(col: str = "name") -> pl.Expr:
    """A readable short form of a demangled C++ name: no return type, template arguments
    elided to `<…>`, no parameter list; `(anonymous namespace)` kept as `{anon}`. Names that
    are not C++ signatures come back unchanged (trimmed)."""
    e = pl.col(col).str.replace_all("(anonymous namespace)", "{anon}", literal=True)
    for _ in range(_MAX_TEMPLATE_DEPTH):  # innermost template argument lists first
        e = e.str.replace_all(r"<[^<>]*>", _TEMPLATE_MARK)
    for _ in range(4):  # parameter lists (innermost first)
        e = e.str.replace_all(r"\([^()]*\)", "")
    e = e.str.strip_chars().str.replace(r"\s+const$", "")
    # the return type: keep the last space-separated token that holds the name
    e = e.str.extract(r"([^\s]+)\s*$", 1)
    e = e.str.replace_all(_TEMPLATE_MARK, "<…>", literal=True)
    return (
        pl.when(pl.col(col).str.contains(r"[<(]|^void |::"))
        .then(e)
        .otherwise(pl.col(col).str.strip_chars())
    )


def name_labels(names: pl.Series, rules: Rules) -> pl.DataFrame:
    """Per unique name: rule_stage, rule_role, comm_family, rule_collective, rule (first rule
    whose pattern matches the name, in the rules' order) and short_name."""
    info = rules.details()
    uniq = pl.DataFrame({"name": names.unique().cast(pl.String)})
    idx: pl.Expr = pl.lit(None, pl.Int64)
    for i in reversed(range(len(info))):
        idx = pl.when(pl.col("name").str.contains(info[i].pattern)).then(pl.lit(i)).otherwise(idx)
    table = pl.DataFrame(
        {
            "_r": list(range(len(info))),
            "rule_stage": [r.category for r in info],
            "rule_role": [r.role for r in info],
            "comm_family": [r.family for r in info],
            "rule_collective": [r.collective for r in info],
            "rule": [r.name for r in info],
        },
        schema={
            "_r": pl.Int64,
            "rule_stage": pl.String,
            "rule_role": pl.String,
            "comm_family": pl.String,
            "rule_collective": pl.String,
            "rule": pl.String,
        },
    )
    return (
        uniq.with_columns(idx.alias("_r"), short_name_expr().alias("short_name"))
        .join(table, on="_r", how="left")
        .drop("_r")
    )


def join_labels(ev: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """`ev` with the name_labels columns (rule_stage, rule_role, comm_family, rule_collective,
    rule, short_name), row order kept."""
    by_name = name_labels(ev["name"], rules)
    drop = [c for c in by_name.columns if c != "name" and c in ev.columns]
    return ev.drop(drop).join(by_name, on="name", how="left", maintain_order="left")


def rule_kind_expr(device: pl.Expr, comm_patterns: Sequence[str] = ()) -> pl.Expr:
    """The kind as the analysis sees it (needs rule_role): a kernel rule's role `comm` or
    `compute` wins over the reader's compute/comm/other on device tracks; without one, the
    default comm name patterns (and the user's) make device compute/other comm."""
    rule_role = pl.col("rule_role")
    readable = device & pl.col("kind").is_in(["compute", "comm", "other"])
    by_default = comm_name_expr([*DEFAULT_DEVICE_COMM_PATTERNS])
    by_user = comm_name_expr(list(comm_patterns))
    return (
        pl.when(readable & by_user)
        .then(pl.lit("comm"))
        .when(readable & (rule_role == "comm"))
        .then(pl.lit("comm"))
        .when(readable & (rule_role == "compute"))
        .then(pl.lit("compute"))
        .when(
            readable & rule_role.is_null() & pl.col("kind").is_in(["compute", "other"]) & by_default
        )
        .then(pl.lit("comm"))
        .otherwise(pl.col("kind").cast(pl.String))
    )


def role_expr(wait_pattern: str) -> pl.Expr:
    """Role from the analysed kind (after rule_kind_expr): compute, comm, memory, sync (device
    waits), host; markers and the rest null."""
    kind = pl.col("kind").cast(pl.String)
    return (
        pl.when(kind.is_in(["compute", "comm", "memory"]))
        .then(kind)
        .when((kind == "other") & pl.col("name").str.contains(wait_pattern).fill_null(False))
        .then(pl.lit("sync"))
        .when((kind == "host") | (pl.col("unit").cast(pl.String) == "cpu"))
        .then(pl.lit("host"))
        .otherwise(pl.lit(None, pl.String))
    )


def collective_label_expr() -> pl.Expr:
    """Collective kind of an event taken as comm (needs rule_collective): Kineto's
    `Collective name` arg first, then the rule's kind, then the name patterns ("other")."""
    coll_arg = pl.col("args").str.extract(r'"Collective name"\s*:\s*"([^"]*)"', 1)
    return (
        pl.when(coll_arg.is_not_null())
        .then(collective_expr())
        .otherwise(pl.coalesce(pl.col("rule_collective"), collective_expr()))
    )


def labelled_collective_expr() -> pl.Expr:
    """Collective kind of comm events (`collective_label_expr`); null for events that are
    not comm."""
    return (
        pl.when(pl.col("kind") != "comm")
        .then(pl.lit(None, pl.String))
        .otherwise(collective_label_expr())
    )


def with_comm_labels(ev: pl.DataFrame, rules: Rules | None = None) -> pl.DataFrame:
    """`ev` (an event frame with unit) with the labels the collectives read: the name_labels
    columns and `kind` as the analysis sees it on device tracks (rule_kind_expr) when the
    frame has no labels yet (a `categorize`d frame keeps its own), and `label_collective`
    (`collective_label_expr`, for every event)."""
    if "rule_collective" not in ev.columns:
        ev = join_labels(ev, rules if rules is not None else default_rules())
        device = pl.col("unit").is_in(list(DEVICE_UNITS))
        ev = ev.with_columns(rule_kind_expr(device).cast(ev["kind"].dtype).alias("kind"))
    return ev.with_columns(collective_label_expr().alias("label_collective"))


def unclassified(ev: pl.DataFrame, top: int = 5) -> tuple[float, list[tuple[str, int]]]:
    """Share of device work time (sum of durations, work events) that no rule names, and the
    `top` such short names by time (ns). Needs `work`, `rule`, `short_name`, `ts`, `end`."""
    work = ev.filter(pl.col("work") & pl.col("device") & (pl.col("kind") != "marker"))
    total = int((work["end"] - work["ts"]).sum() or 0) if work.height else 0
    if total == 0:
        return 0.0, []
    none = work.filter(pl.col("rule").is_null())
    by = (
        none.group_by("short_name")
        .agg((pl.col("end") - pl.col("ts")).sum().alias("ns"))
        .sort(["ns", "short_name"], descending=[True, False])
        .head(top)
    )
    share = float((none["end"] - none["ts"]).sum() or 0) / total
    return share, [(str(n), int(t)) for n, t in by.iter_rows()]


def unclassified_warning(share: float, top: list[tuple[str, int]]) -> str | None:
    """The warning line when more than UNCLASSIFIED_WARN_SHARE of device time has no rule."""
    if share <= UNCLASSIFIED_WARN_SHARE:
        return None
    names = ", ".join(f"{n} ({t / 1e6:.3f} ms)" for n, t in top)
    return (
        f"{share:.1%} of device time matches no name rule (stage 'other', role from the "
        f"reader): top kernels {names}; `moetrace classify --write-rules FILE` starts a rules file"
    )


def classify_table(ev: pl.DataFrame, top: int | None = None) -> pl.DataFrame:
    """Per kernel name of device work (`work` rows of a prepared frame), by total time: short
    name, role, stage (the rule's, else "other"), comm family, collective, rule (null = none
    matched), count, total_ns, share of device time; the `top` longest when given."""
    work = ev.filter(pl.col("work") & pl.col("device") & (pl.col("kind") != "marker"))
    total = float((work["end"] - work["ts"]).sum() or 0) if work.height else 0.0
    out = (
        work.group_by("name")
        .agg(
            pl.col("short_name").first(),
            pl.col("role").first(),
            pl.col("rule_stage").first().fill_null("other").alias("stage"),
            pl.col("comm_family").first(),
            pl.col("collective").first(),
            pl.col("rule").first(),
            pl.len().alias("count"),
            (pl.col("end") - pl.col("ts")).sum().alias("total_ns"),
        )
        .with_columns((pl.col("total_ns") / max(total, 1.0)).alias("share"))
        .sort(["total_ns", "name"], descending=[True, False])
    )
    return out.head(top) if top is not None else out


def starter_rules(table: pl.DataFrame, framework: str = "mine") -> str:
    """A rules file (moe_rules schema) with one commented `[[rule]]` per unclassified kernel of
    `table` (classify_table), stage `other`, pattern = the escaped short name's function part:
    edit the category (and role) and pass it with `--rules FILE`."""
    lines = [
        "# Started by `moetrace classify --write-rules`: one rule per kernel no rule named.",
        "# Set each category (attention, router, topk_permute, dispatch, expert_gemm, activation,",
        "# combine, shared_expert, norm, comm, other), optionally role / family / collective,",
        "# and cite where the name comes from in `source`.",
        f'framework = "{framework}"',
        "",
    ]
    for name, short, ns in (
        table.filter(pl.col("rule").is_null()).select("name", "short_name", "total_ns").iter_rows()
    ):
        base = str(short or name).split("<", 1)[0]
        pattern = re.escape(base).replace("'", "\\x27")
        lines += [
            f"# {ns / 1e6:.3f} ms: {str(name)[:120]!r}".replace("\n", " "),
            "[[rule]]",
            'category = "other"',
            f"patterns = ['{pattern}']",
            'source = ""',
            "",
        ]
    return "\n".join(lines)


def short_names(names: pl.Series) -> pl.Series:
    """`short_name_expr` of every name that is a demangled C++ signature (starts `void ` or
    holds `::`), in order; other names unchanged (`stream 7 (overlap 2)` stays whole).
    Computed once per distinct name: a million events with a few hundred kernel names cost a
    few hundred regex passes."""
    names = names.cast(pl.String)
    cxx = pl.col("name").str.contains(r"^void |::")
    uniq = pl.DataFrame({"name": names.unique()}).with_columns(
        pl.when(cxx).then(short_name_expr()).otherwise(pl.col("name")).alias("short")
    )
    return names.replace_strict(uniq["name"], uniq["short"], return_dtype=pl.String).alias(
        names.name
    )
