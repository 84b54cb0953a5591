"""`view` on the SQLite readers' traces (msprof database, nsys export): the viewer draws
their lanes, with the device streams and host threads the readers laid out."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_helpers import running

from moetrace.trace.io import load
from moetrace.tui.app import MoetraceApp

FILES = {
    "ascend-db": "ascend_db/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
    "ascend_pytorch_profiler_0.db",
    "nsys": "nsys/cloverleaf/perlmutter-cloverleaf-cuda.sqlite",
}


@pytest.mark.parametrize("name", list(FILES))
async def test_view_draws_the_lanes(real_traces: Path, name: str) -> None:
    trace = load(real_traces / FILES[name], cache=False)
    app = MoetraceApp(trace)
    async with running(app, size=(120, 30)) as pilot:
        await pilot.press("j", "j", "+", "-")
        await pilot.pause()
        tl = app.timeline
        assert tl.rows
        for y in range(min(len(tl.rows) + 2, 10)):
            assert tl.render_line(y).cell_length == tl.label_width + tl.lanes_width
        labels = " ".join(tl.render_line(tl.row_y(i)).text for i in range(len(tl.rows)))
        assert "Stream" in labels
