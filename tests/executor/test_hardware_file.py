"""A hardware preset TOML (e.g. `moetrace calibrate -o`) works wherever a hardware name does."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from click.testing import CliRunner

from moetrace.cli import main
from moetrace.executor.hardware import (
    PRESET_DIR,
    get_hardware,
    load_overrides_file,
    load_preset,
)


def _copy(tmp_path: Path) -> Path:
    text = (PRESET_DIR / "h100.toml").read_text().replace('name = "h100"', 'name = "mine"')
    text = text.replace("[fields.link_bw]\nvalue = ", "[fields.link_bw]\nvalue = 1.5e11 #", 1)
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def test_get_hardware_and_hw_file_read_a_preset_file(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    hw = get_hardware(str(path))
    assert hw.name == "mine" and hw.link_bw == 1.5e11
    assert dataclasses.replace(hw, name="h100", link_bw=0.0) == get_hardware("h100")
    overrides = load_overrides_file(path)
    assert get_hardware("ascend-a3", overrides) == dataclasses.replace(hw, name="ascend-a3")
    assert load_preset(path)[0] == hw


def test_run_accepts_the_file_as_hardware_and_hw_file(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    args = ["run", "--preset", "mixtral-8x7b", "--ranks", "4", "--tokens", "64", "--json"]
    runner = CliRunner()
    a = runner.invoke(main, [*args, "--hardware", str(path)])
    b = runner.invoke(main, [*args, "--hardware", "h100", "--hw", "link_bw=1.5e11"])
    c = runner.invoke(main, [*args, "--hw-file", str(path)])
    assert a.exit_code == b.exit_code == c.exit_code == 0, (a.output, c.output)
    key = '"makespan_ns"'
    pick = [next(line for line in r.output.splitlines() if key in line) for r in (a, b, c)]
    assert pick[0] == pick[1] == pick[2]


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--hardware", str(tmp_path / "no.toml")])
    assert result.exit_code == 2
    assert "cannot read hardware preset" in result.output and "Traceback" not in result.output
