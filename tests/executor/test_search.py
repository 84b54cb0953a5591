"""`moetrace search`: bounds that never beat a simulation, the same best as an exhaustive sweep
with fewer simulations, results reused, constraints, outputs, engines (issue 23, item 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.search import (
    BASE,
    ResultStore,
    evaluate,
    expand,
    model_fingerprint,
    pareto_front,
    search,
)
from moetrace.executor.search_bound import estimate

SPACE: dict[str, list[Any]] = dict(  # compute-bound enough for the bounds to prune
    ranks=[8, 16],
    tokens=[4096],
    schedule=["sequential", "chunked", "tile"],
    chunks=[2, 4],
    tile_rows=[128, 256],
)


def _res(row: Any) -> dict[str, Any]:
    """A row's result (there must be one)."""
    assert row.result is not None
    return dict(row.result)


class Memo:
    """An in-process evaluator that simulates each configuration once and counts calls; two
    in flight, finished in reverse order (results need not come back in submission order)."""

    capacity = 2

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.queue: list[tuple[int, dict[str, Any]]] = []

    def submit(self, tag: int, cfg: dict[str, Any]) -> None:
        self.calls += 1
        self.queue.append((tag, cfg))

    def next_result(self) -> tuple[int, dict[str, Any]]:
        tag, cfg = self.queue.pop()
        key = json.dumps(cfg, sort_keys=True, default=str)
        if key not in self.results:
            self.results[key] = evaluate(cfg)
        return tag, self.results[key]


@pytest.fixture(scope="module")
def space() -> list[dict[str, Any]]:
    return expand(BASE, SPACE)


@pytest.fixture(scope="module")
def memo() -> Memo:
    return Memo()


def test_expand_drops_options_a_schedule_ignores(space: list[dict[str, Any]]) -> None:
    # chunks matters to chunked only: 2 ranks x 2 tile_rows x (sequential, chunked x2/x4, tile)
    assert len(space) == 16
    assert all(c["chunks"] == 1 for c in space if c["schedule"] != "chunked")
    glob = expand(BASE, dict(ranks=[4, 8, 16], schedule=["tile"]), global_tokens=1024)
    assert [(c["ranks"], c["tokens"]) for c in glob] == [(4, 256), (8, 128), (16, 64)]
    with pytest.raises(ExecutorInputError, match="not both"):
        expand(BASE, dict(tokens=[1]), global_tokens=8)


@pytest.mark.parametrize(
    "extra",
    [
        dict(ranks=4, tokens=512, schedule="sequential"),
        dict(ranks=8, tokens=256, schedule="chunked", chunks=2),
        dict(ranks=8, tokens=1024, schedule="chunked", chunks=4),
        dict(ranks=8, tokens=512, schedule="tile"),
        dict(ranks=8, tokens=512, schedule="tile", routing="zipf:1.2"),
        dict(ranks=8, tokens=512, schedule="sequential", routing="zipf:1.2"),
        dict(ranks=4, tokens=256, schedule="tile", tile_rows=64, hw_overrides={"link_bw": 2e10}),
        dict(ranks=4, tokens=256, schedule="sequential", shared_expert=True),
        dict(ranks=8, tokens=512, schedule="chunked", chunks=4, routing="zipf:1.2"),
        dict(ranks=8, tokens=512, schedule="tile", routing="zipf:0.8", placement="balanced"),
        dict(ranks=8, tokens=512, schedule="sequential", dispatch_dtype="fp8"),
        dict(ranks=8, tokens=1024, schedule="tile", n_tile=256, tile_rows=256),
        dict(ranks=8, tokens=512, schedule="tile", dynamic=True),
        # the tile planner keeps a chunked (operator-level) plan here
        dict(ranks=4, tokens=128, schedule="tile", hw_overrides={"link_bw": 2e9}),
    ],
)
def test_the_lower_bound_never_beats_the_simulation(extra: dict[str, Any]) -> None:
    cfg = {**BASE, **extra}
    est = estimate(cfg)
    result = evaluate(cfg)
    assert est.feasible
    assert est.lower_bound_ns <= result["makespan_ns"]
    # not a trivial bound: at least the executor's own link floor (same bytes, same rates)
    assert est.lower_bound_ns >= result["floors_ns"]["link"] * (1 - 1e-9)
    assert result["mfu"] <= est.flops / (est.peak_flops * est.lower_bound_ns * 1e-9)


@pytest.mark.parametrize("objective", ["makespan", "tokens_per_s", "mfu"])
def test_search_finds_what_the_exhaustive_sweep_finds(
    space: list[dict[str, Any]], memo: Memo, objective: str
) -> None:
    full = search(space, memo, objective, top=3, exhaustive=True)
    assert full.simulated == len(space)
    memo.calls = 0
    fast = search(space, memo, objective, top=3)
    assert memo.calls == fast.simulated < len(space)  # pruned by the bounds
    assert fast.pruned == len(space) - fast.simulated
    col = {"makespan": "makespan_ns", "tokens_per_s": "tokens_per_s", "mfu": "mfu"}[objective]
    assert [_res(r)[col] for r in fast.best] == [_res(r)[col] for r in full.best]
    # the best configuration itself, and the Pareto front (objective vs ranks)
    assert fast.best[0].config == full.best[0].config
    assert [r.config for r in fast.pareto] == [r.config for r in full.pareto]
    # the front by hand: the best per EP degree, kept while it improves on smaller EPs
    sign = 1 if objective == "makespan" else -1
    best_per = {
        ranks: min(
            (r for r in full.rows if r.config["ranks"] == ranks),
            key=lambda r: sign * _res(r)[col],
        )
        for ranks in (8, 16)
    }
    expect = [best_per[8]] + (
        [best_per[16]] if sign * _res(best_per[16])[col] < sign * _res(best_per[8])[col] else []
    )
    assert [_res(r)[col] for r in fast.pareto] == [_res(r)[col] for r in expect]


def test_budget_stops_early_and_says_so(space: list[dict[str, Any]], memo: Memo) -> None:
    out = search(space, memo, "makespan", budget=2)
    assert out.simulated == 2 and not out.proven and out.best


def test_pareto_front_keeps_only_improvements() -> None:
    from moetrace.executor.search import Row
    from moetrace.executor.search_bound import Estimate

    est = Estimate(True, "", 1.0, 0.0, 1.0, 1.0, 1.0)

    def row(ranks: int, ms: float) -> Row:
        return Row({"ranks": ranks}, est, {"makespan_ns": ms}, "simulated")

    rows = [row(64, 5.0), row(64, 4.0), row(128, 4.5), row(256, 3.0)]
    assert [_res(r)["makespan_ns"] for r in pareto_front(rows, "makespan")] == [4.0, 3.0]


def test_results_are_reused_and_stored_atomically(
    space: list[dict[str, Any]], memo: Memo, tmp_path: Path
) -> None:
    path = tmp_path / "results.jsonl"
    store = ResultStore(path)
    fp = model_fingerprint()
    first = search(
        space[:6],
        memo,
        "makespan",
        fingerprint=fp,
        known=store.entries,
        on_result=store.add,
        exhaustive=True,
    )
    store.save()
    assert first.simulated == 6 and len(path.read_text().splitlines()) == 6
    again = ResultStore(path)
    memo.calls = 0
    second = search(
        space[:6], memo, "makespan", fingerprint=fp, known=again.entries, exhaustive=True
    )
    assert memo.calls == 0 and second.reused == 6
    assert second.best[0].result == first.best[0].result
    # another model version reuses nothing
    third = search(space[:2], memo, "makespan", fingerprint="other", known=again.entries)
    assert third.reused == 0
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ExecutorInputError, match=r"results.jsonl:7: not a search result"):
        ResultStore(path)


def test_constraints_mark_candidates_infeasible(space: list[dict[str, Any]], memo: Memo) -> None:
    small = [c for c in space if c["schedule"] == "tile" and c["tile_rows"] == 128]
    need = {c["ranks"]: estimate(c).hbm_need_bytes for c in small}
    limit = (min(need.values()) + max(need.values())) / 2
    out = search(small, memo, "makespan", max_hbm_per_rank=limit, exhaustive=True)
    bad = [r for r in out.rows if r.status == "infeasible"]
    assert bad and all(r.estimate.hbm_need_bytes > limit for r in bad)
    assert all("HBM" in r.estimate.reason for r in bad)
    linked = search(small, memo, "makespan", max_link_bw=1e9, exhaustive=True)
    assert linked.infeasible == len(small) and not linked.best


def _cli(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


SMALL_CLI = ["search", "--ranks", "4,8", "--tokens", "128", "--schedule", "sequential,tile",
             "--jobs", "1", "--quiet"]  # fmt: skip


def test_cli_prints_best_and_front_and_writes_json_and_csv(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    out = tmp_path / "best.json"
    code, stdout, _ = _cli([*SMALL_CLI, "--results", str(results), "-o", str(out)])
    assert code == 0, stdout
    assert "best by tokens_per_s" in stdout and "Pareto front" in stdout
    data = json.loads(out.read_text())
    assert data["simulated"] + data["pruned"] == 4 and data["best"]
    assert data["best"][0]["tokens_per_s"] == max(
        r["tokens_per_s"] for r in data["rows"] if r["tokens_per_s"] is not None
    )
    csv = tmp_path / "best.csv"
    code, stdout, _ = _cli([*SMALL_CLI, "--results", str(results), "-o", str(csv)])
    assert code == 0 and "0 simulated" in stdout  # every result reused
    header = csv.read_text().splitlines()[0].split(",")
    assert {"ranks", "schedule", "status", "makespan_ns", "lower_bound_ns"} <= set(header)
    code, _, err = _cli([*SMALL_CLI, "--results", str(results), "-o", str(csv)])
    assert code == 2 and len(err.strip().splitlines()) == 1  # no overwrite without --force


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--objective", "speed"], "Invalid value"),
        (["--hw", "bogus=1,2"], "unknown hardware key"),
        (["--hw", "hbm_bw=fast"], "not a number"),
        (["--ranks", "x"], "expected an integer"),
        (["--global-tokens", "100"], "--tokens and --global-tokens"),
        (["--max-hbm-per-rank", "-1"], "must be > 0"),
        (["--preset", "gpt5"], "unknown preset"),
        (["--routing", "uniformish"], "unknown routing"),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    code, _, err = _cli([*SMALL_CLI, "--no-reuse", *args])
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1


def test_engine_ray_without_ray_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code, _, err = _cli([*SMALL_CLI, "--no-reuse", "--engine", "ray"])
    assert code == 2 and "needs Ray" in err and len(err.strip().splitlines()) == 1


def test_engine_ray_gives_the_local_result(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    args = ["search", "--ranks", "4", "--tokens", "128", "--schedule", "sequential,tile",
            "--quiet", "--no-reuse", "--exhaustive"]  # fmt: skip
    code, local, _ = _cli([*args, "--jobs", "1"])
    assert code == 0
    code, remote, _ = _cli([*args, "--engine", "ray", "--jobs", "1"])
    assert code == 0 and remote == local


def test_cli_hw_ranges_are_searched(tmp_path: Path) -> None:
    out = tmp_path / "hw.json"
    code, _, _ = _cli(["search", "--ranks", "4", "--tokens", "128", "--schedule", "tile",
                       "--hw", "link_bw=2e9,8e10", "--objective", "makespan", "--jobs", "1",
                       "--quiet", "--no-reuse", "--exhaustive", "-o", str(out)])  # fmt: skip
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert sorted(r["hw.link_bw"] for r in rows) == ["2e9", "8e10"]
    fast = min(rows, key=lambda r: r["makespan_ns"])
    assert fast["hw.link_bw"] == "8e10"  # 40x the link bandwidth: faster (link-bound at 2 GB/s)


def test_the_model_fingerprint_covers_the_schedule_plugins() -> None:
    """A change to a schedule module (executor/schedules/) is a change of the model: stored
    search results must not be reused across it (the fingerprint once read executor/*.py only)."""
    from moetrace.executor.search import model_files

    names = {p.relative_to(p.parents[1]).as_posix() for p in model_files()}
    assert {"schedules/tile.py", "schedules/sequential.py", "schedules/timing.py"} <= names
    assert "search_bound.py" in {p.name for p in model_files()}
