"""One test per defect of the third hostile campaign (issue 27): inputs overwritten through -o,
garbage read whole before it is refused, crashes instead of one line, SQL reaching files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hostile_cli import one_error_line, run_cli

from moetrace.trace.io import load


def _rank(path: Path, rank: int, n: int) -> Path:
    events: list[dict[str, Any]] = [
        {"ph": "X", "name": f"k{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5} for i in range(n)
    ]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": rank}}))
    return path


@pytest.fixture
def job(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    _rank(folder / "r0.json", 0, 9)
    _rank(folder / "r1.json", 1, 9)
    return folder


def _spellings(job: Path) -> list[tuple[list[str], str]]:
    r1 = job / "r1.json"
    link = job.parent / "link.json"
    link.symlink_to(r1)
    hard = job.parent / "hard.json"
    os.link(r1, hard)
    other = str(job / ".." / job.name / "." / "r1.json")
    return [
        ([str(job)], str(r1)),  # the folder input contains the target
        ([str(r1)], other),  # another spelling
        ([str(r1)], str(link)),  # a symlink to the input
        ([str(r1)], str(hard)),  # a hard link to the input
        ([str(job / "r0.json"), str(link)], str(r1)),  # the input is the symlink
        ([str(job)], str(hard)),  # a hard link to a file of the folder
    ]


@pytest.mark.parametrize("force", [False, True])
def test_convert_job_into_its_own_rank_file_is_refused(job: Path, force: bool) -> None:
    """The campaign's case: `convert job/ -o job/r1.json --force` replaced rank 1's file."""
    before = {p.name: p.read_bytes() for p in job.iterdir()}
    code, _, err = run_cli(
        ["convert", str(job), "-o", str(job / "r1.json"), *(["--force"] * force)]
    )
    assert code == 2, err
    assert "input" in one_error_line(err)
    assert {p.name: p.read_bytes() for p in job.iterdir()} == before
    assert load(str(job)).events.height == 18


def test_every_spelling_is_refused(job: Path) -> None:
    before = {p.name: p.read_bytes() for p in job.iterdir()}
    for inputs, target in _spellings(job):
        code, _, err = run_cli(["convert", *inputs, "-o", target, "--force"])
        assert code == 2, (inputs, target, err)
        assert "input" in one_error_line(err)
    assert {p.name: p.read_bytes() for p in job.iterdir()} == before
    assert load(str(job)).events.height == 18


def test_a_new_output_beside_the_inputs_is_written(job: Path, tmp_path: Path) -> None:
    code, _, err = run_cli(["convert", str(job), "-o", str(tmp_path / "merged.json")])
    assert code == 0, err
    assert load(str(tmp_path / "merged.json")).events.height == 18


def test_sweep_and_run_do_not_overwrite_their_hw_file(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text("link_bw = 4e11\n")
    before = hw.read_bytes()
    small = ["--ranks", "4", "--tokens", "128", "--hw-file", str(hw)]
    for args in (["sweep", *small, "-o", str(hw)], ["run", *small, "-o", str(hw)]):
        code, _, err = run_cli([*args, "--force"])
        assert code == 2, err
        one_error_line(err)
    assert hw.read_bytes() == before


def test_calibrate_does_not_overwrite_its_trace(job: Path) -> None:
    r0 = job / "r0.json"
    before = r0.read_bytes()
    code, _, err = run_cli(["calibrate", str(r0), "-o", str(r0), "--force"])
    assert code == 2, err
    assert "input" in one_error_line(err)
    assert r0.read_bytes() == before


@pytest.mark.parametrize("command", ["moe", "classify"])
def test_non_utf8_rules_file_is_one_line(job: Path, tmp_path: Path, command: str) -> None:
    rules = tmp_path / "rules.toml"
    data = b'[[rule]]\nname = "caf\xe9"\n'
    rules.write_bytes(data)
    code, _, err = run_cli([command, str(job), "--rules", str(rules)])
    assert code == 2
    line = one_error_line(err)
    assert f"rules.toml: not UTF-8 text (byte 0xe9 at offset {data.index(0xE9)})" in line, line


@pytest.mark.parametrize("value", ["8:nan", "8:inf,64:1e9", "nan:1e9", "8:1e9,64:-inf"])
def test_nan_inside_a_compound_hw_value_is_one_line(value: str) -> None:
    code, _, err = run_cli(
        ["run", "--ranks", "4", "--tokens", "128", "--hw", f"dispatch_bw={value}"]
    )
    assert code == 2
    assert "is not a finite number" in one_error_line(err)


def test_whatif_checks_its_hw_change_too(job: Path) -> None:
    """whatif's --hw went to the executor unchecked (parse_overrides only)."""
    code, _, err = run_cli(["whatif", str(job / "r0.json"), "--hw", "dispatch_bw=8:nan"])
    assert code == 2
    assert "'nan' is not a finite number" in one_error_line(err)


class PanicException(BaseException):
    """Stands for pyo3's PanicException, which derives from BaseException."""


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (MemoryError(), "out of memory"),
        (RuntimeError("can't start new thread"), "ran out of threads"),
        (
            ImportError("libopenblas.so: failed to map segment from shared object"),
            "ran out of memory (address space)",
        ),
        (PanicException("failed to spawn thread: Resource temporarily unavailable"), "threads"),
        (KeyboardInterrupt(), "interrupted"),
    ],
)
def test_resource_exhaustion_is_one_line(
    job: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException, expected: str
) -> None:
    import moetrace.trace.io as io

    def boom(*_a: Any, **_k: Any) -> Any:
        raise raised

    monkeypatch.setattr(io, "load", boom)
    code, _, err = run_cli(["info", str(job)])
    assert code == (130 if isinstance(raised, KeyboardInterrupt) else 2)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], err


def test_other_runtime_errors_are_not_hidden(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only resource exhaustion becomes a line: a real bug still shows its traceback."""
    import moetrace.trace.io as io

    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(io, "load", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli(["info", str(job)])


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM read_csv('{secret}')", "read_csv() is not allowed"),
        ("select * from READ_PARQUET ('{secret}')", "READ_PARQUET() is not allowed"),
        ("SELECT * FROM events JOIN read_json('{secret}') ON true", "read_json() is not allowed"),
        ("DROP TABLE events", "only SELECT queries are allowed (got 'DROP')"),
        ("TRUNCATE events", "only SELECT queries are allowed (got 'TRUNCATE')"),
        ("CREATE TABLE x AS SELECT 1 AS a", "only SELECT queries are allowed"),
        ("COPY events TO '{secret}'", "only SELECT queries are allowed (got 'COPY')"),
        ("ATTACH '{secret}' AS other", "only SELECT queries are allowed (got 'ATTACH')"),
        ("SELECT 1 AS a; DROP TABLE events", "one statement only"),
        ("SELECT " + "+".join(["dur"] * 20_000) + " AS s FROM events", "query too long"),
        ("SELECT " + "+".join(["1"] * 5_000) + " AS s FROM events", "query too large"),
        ("SELECT " + "(" * 100 + "1" + ")" * 100 + " AS s", "nested deeper than 64"),
    ],
)
def test_query_sees_only_the_trace(job: Path, tmp_path: Path, sql: str, expected: str) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    code, out, err = run_cli(["query", str(job), sql.format(secret=secret), "--csv"])
    assert code == 2
    assert expected in one_error_line(err)
    assert "hunter2" not in out
    assert secret.read_text() == "password\nhunter2\n"


def test_query_still_answers_selects(job: Path) -> None:
    sql = "SELECT replace(name, 'k', 'z') AS r, count(*) AS n FROM events GROUP BY r ORDER BY r"
    code, out, err = run_cli(["query", str(job), sql, "--csv"])
    assert code == 0, err
    rows = out.strip().splitlines()
    assert rows[0] == "r,n" and rows[1] == "z0,2" and len(rows) == 10


def test_a_query_past_its_timeout_is_stopped_with_one_line() -> None:
    """Deterministic: the work waits on an event nobody sets, so only the timeout ends it."""
    import subprocess
    import sys

    code = (
        "import threading\n"
        "from moetrace.commands.query_sandbox import run_bounded\n"
        "run_bounded(threading.Event().wait, 0.05)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "moetrace: error: SQL: query ran longer than --timeout 0.05 s"


SMALL = ["--ranks", "4", "--tokens", "128"]


def test_seeds_beyond_the_limit_need_yes(tmp_path: Path) -> None:
    from moetrace.commands.executor_common import MAX_RUNS

    code, _, err = run_cli(["run", *SMALL, "--seeds", "100000"])
    assert code == 2
    line = one_error_line(err)
    assert "100,000 runs requested" in line and "--yes" in line
    code, _, err = run_cli(["run", *SMALL, "--seeds", str(MAX_RUNS + 1)])
    assert code == 2 and f"{MAX_RUNS + 1:,} runs" in one_error_line(err)


def test_sweep_grid_beyond_the_limit_needs_yes_and_says_how_many(tmp_path: Path) -> None:
    out = tmp_path / "grid.csv"
    tokens = ",".join(str(128 + i) for i in range(15))
    seeds = ",".join(str(i) for i in range(14))
    code, _, err = run_cli(
        ["sweep", "--ranks", "4", "--tokens", tokens, "--seed", seeds, "-o", str(out)]
    )
    assert code == 2
    assert f"{15 * 14} runs requested" in one_error_line(err)
    assert not out.exists()


@pytest.mark.parametrize("option", ["--ranks", "--tokens", "--schedule", "--seed"])
@pytest.mark.parametrize("value", ["", ",", " , "])
def test_sweep_refuses_an_empty_list(tmp_path: Path, option: str, value: str) -> None:
    out = tmp_path / "grid.csv"
    code, _, err = run_cli(["sweep", *SMALL, option, value, "-o", str(out)])
    assert code == 2
    assert "expected one or more comma-separated values" in one_error_line(err)
    assert not out.exists()


@pytest.mark.parametrize("skew", ["nan", "inf", "-inf"])
def test_zipf_non_finite_is_refused_for_that_reason(skew: str) -> None:
    code, _, err = run_cli(["run", *SMALL, "--routing", f"zipf:{skew}"])
    assert code == 2
    assert one_error_line(err).endswith("S must be a finite number")


@pytest.mark.parametrize("pair", ["hidden=0", "tokens=0", "experts=-3"])
def test_calibrate_set_zero_is_refused(job: Path, pair: str) -> None:
    code, _, err = run_cli(["calibrate", str(job / "r0.json"), "--set", pair])
    assert code == 2
    assert one_error_line(err).endswith(f"--set {pair}: must be a whole number >= 1")


def test_symlink_loop_is_named(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    code, _, err = run_cli(["info", str(a)])
    assert code == 2
    assert one_error_line(err).endswith(
        "a.json: symbolic link loop (too many levels of symbolic links)"
    )
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "gone.json")
    code, _, err = run_cli(["info", str(dangling)])
    assert "which does not exist" in one_error_line(err)


def test_demo_says_where_it_writes_and_how_much(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    code, stdout, err = run_cli(
        ["demo", "--ranks", "4", "--tokens", "128", "--no-view", "--jobs", "1", "--out", str(out)]
    )
    assert code == 0, err
    assert f"into {out.resolve()}/" in err.splitlines()[0]
    total = sum(p.stat().st_size for p in out.glob("*.pftrace"))
    assert f"traces ({total / 1e6:,.1f} MB in {out})" in stdout


def test_engine_ray_leaves_no_session_folder(job: Path, tmp_path: Path) -> None:
    """A local Ray cluster started for one command keeps its session in a folder of its own,
    removed when the command ends (Ray's default, /tmp/ray/session_*, stayed behind)."""
    import subprocess
    import sys

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'moetrace[ray]')")
    import shutil
    import tempfile

    temp = Path(tempfile.mkdtemp(prefix="mt", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "TMPDIR": str(temp), "RAY_TMPDIR": str(temp)}  # Ray's default too
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from moetrace.cli import main; main()",
            "info",
            "--json",
            "--no-cache",
            "--engine",
            "ray",
            str(job / "r0.json"),
            str(job / "r1.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["events"] == 18
    left = sorted(p.name for p in temp.iterdir())
    shutil.rmtree(temp, ignore_errors=True)
    assert left == []


def test_ctrl_c_outside_a_commands_handler_exits_130(
    job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+C while the loading options are built (outside `handle_errors`): click's own
    handler printed "Aborted!" and exited 1."""
    import moetrace.trace.options as options

    def interrupted(*_a: Any, **_k: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(options, "LoadOptions", interrupted)
    code, _, err = run_cli(["metrics", str(job)])
    assert code == 130
    assert err.strip() == "moetrace: interrupted"
