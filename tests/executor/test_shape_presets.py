"""MoE layer shapes are sourced data files: the values of the models' own configs, schema
checked (a broken file is one clear error naming it), shipped with the package."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.shape_presets import SHAPE_DIR, load_shape
from moetrace.executor.workload import DEFAULT_DISPATCH, SHAPES, get_shape, make_workload

# From the models' published configs (hidden_size, moe_intermediate_size or intermediate_size,
# routed experts, experts per token, shared experts), written out here by hand.
CONFIGS = {
    "deepseek-v3": (7168, 2048, 256, 8, 1),
    "pangu-ultra-moe": (7680, 2048, 256, 8, 1),
    "mixtral-8x7b": (4096, 14336, 8, 2, 0),
    "qwen3-235b": (4096, 1536, 128, 8, 0),
}


def test_shapes_are_the_models_configs_and_are_shipped() -> None:
    got = {
        name: (s.hidden, s.intermediate, s.experts, s.top_k, s.shared_experts)
        for name, s in SHAPES.items()
    }
    assert got == CONFIGS
    assert DEFAULT_DISPATCH == {
        "deepseek-v3": "int8",  # DeepEP's 8-bit dispatch
        "pangu-ultra-moe": "bf16",
        "mixtral-8x7b": "bf16",
        "qwen3-235b": "bf16",
    }
    assert make_workload("deepseek-v3", 8, 16).dispatch_dtype == "int8"
    assert make_workload("qwen3-235b", 8, 16).dispatch_dtype == "bf16"
    assert "executor/shapes/*.toml" in (Path(__file__).parents[2] / "pyproject.toml").read_text()
    for path in SHAPE_DIR.glob("*.toml"):
        preset = load_shape(path)
        assert path.stem == preset.shape.name
        assert all(unit and source for unit, source in preset.fields.values())
    with pytest.raises(ExecutorInputError, match="unknown preset 'gpt-5'"):
        get_shape("gpt-5")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda s: s.replace("[fields.top_k]", "[fields.k]"), "missing ['top_k']"),
        (lambda s: s.replace('unit = "experts"', 'unit = ""', 1), "non-empty unit"),
        (lambda s: s.replace("value = 256", "value = 0", 1), "experts must be an integer >= 1"),
        (lambda s: s.replace("value = 8\n", "value = 8.5\n", 1), "top_k must be an integer"),
        (lambda s: s.replace('value = "int8"', 'value = "int4"'), "dispatch_dtype 'int4'"),
        (lambda s: s.replace("[fields.hidden]\n", "[fields.hidden]\nx = 1\n"), "exactly"),
        (lambda s: s.replace('source = "sim.md', 'sources = "sim.md'), "needs name"),
    ],
)
def test_a_broken_shape_file_is_refused_naming_it(
    edit: Callable[[str], str], needle: str, tmp_path: Path
) -> None:
    text = (SHAPE_DIR / "deepseek-v3.toml").read_text("utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(edit(text), "utf-8")
    assert bad.read_text("utf-8") != text  # the edit applied
    with pytest.raises(ExecutorInputError, match=r"bad\.toml") as info:
        load_shape(bad)
    assert needle in str(info.value)
