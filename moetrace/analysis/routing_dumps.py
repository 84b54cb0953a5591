"""Expert-distribution dumps written by the routers themselves (`moe --routing-from FILE`).

Formats, as their writers define them (tokens = token slots: a token routed to k experts
counts once for each):

- **SGLang CSV**, `expert_distribution_rank{R}_timestamp{T}.csv` (sgl-project/sglang
  python/sglang/srt/managers/expert_distribution.py, `ExpertDistributionRecorder.dump_record`
  @001c034f): header `layer_id,expert_id,count`, the experts chosen by rank R's tokens; files
  of several ranks add up.
- **SGLang stat dump**, `expert_distribution_recorder_{time}.pt` (python/sglang/srt/eplb/
  expert_distribution.py, `_StatAccumulator.dump` @02295fe5): `torch.save` of a dict with
  `logical_count`, int tensor (buffered forward passes, layers, logical experts), all-reduced
  over ranks; each forward pass is a `step`.
- **vLLM EPLB state** (vllm/distributed/eplb/eplb_state.py, `EplbState` @0014ec6c): vLLM
  keeps the load in memory and writes no file of it; a `torch.save` of its fields is read:
  `expert_load_window` (window, layers, physical experts: each window slot a `step`) or
  `expert_load_pass` (layers, physical experts), with `physical_to_logical_map` (layers,
  physical experts) when there are redundant experts; physical expert p runs on rank
  p // (physical experts / ranks), vLLM's layout. A dict with an int `rank` holds that rank's
  local physical experts.
- **Megatron router trace**, `router_trace_rank{R}.jsonl` (NVIDIA/Megatron-LM
  megatron/core/transformer/moe/router_trace.py @059f0f5c, `--moe-routing-trace-path`): one
  JSON record per (step, block, layer) with `top_indices` [tokens][topk] (decoder blocks are
  read; MTP records are skipped).

`.pt` files are read without torch: a zip holding `*/data.pkl` and `*/data/<key>`, unpickled
with only tensor rebuilding allowed (any other class is refused: a pickle runs no code here).
"""

from __future__ import annotations

import collections
import io
import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.moe_load import LOAD_SCHEMA, empty_load
from moetrace.errors import MoetraceError


class RoutingError(MoetraceError, ValueError):
    """An expert-distribution dump that cannot be read: names the file, place and problem."""

    def __init__(self, path: str | Path, message: str, position: str | None = None):
        self.path = str(path)
        self.position = position
        where = f"{path}: {position}: " if position else f"{path}: "
        super().__init__(where + message)


_STORAGE_DTYPES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "LongStorage": "<i8",
    "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1",
    "BoolStorage": "?", "BFloat16Storage": "<u2",
}  # fmt: skip
"""torch's typed storage names (as a pickle names them) -> numpy dtypes; bfloat16 is widened."""


class _Storage:
    """A storage type named in the pickle (torch.IntStorage...)."""

    def __init__(self, name: str):
        self.name = name


def _rebuild_tensor(
    storage: tuple[str, np.ndarray], offset: int, size: tuple[int, ...], stride: tuple[int, ...],
    *_: Any,
) -> np.ndarray:  # fmt: skip
    """torch._utils._rebuild_tensor_v2 as numpy: a strided view of the storage, copied."""
    name, data = storage
    if name == "BFloat16Storage":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    item = data.itemsize
    view = np.lib.stride_tricks.as_strided(
        data[offset:], shape=tuple(size), strides=tuple(s * item for s in stride)
    )
    return np.array(view)


class _TensorUnpickler(pickle.Unpickler):
    """Unpickles a torch.save archive's data.pkl allowing tensors, dicts and lists only."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, path: Path):
        super().__init__(io.BytesIO(data))
        self._zip, self._prefix, self._path = archive, prefix, path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _Storage(name)
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        raise RoutingError(self._path, f"holds a {module}.{name}, not a tensor dump")

    def persistent_load(self, pid: Any) -> tuple[str, np.ndarray]:
        if not (isinstance(pid, tuple) and len(pid) >= 3 and isinstance(pid[1], _Storage)):
            raise RoutingError(self._path, f"unknown storage reference {pid!r:.60}")
        name, key = pid[1].name, str(pid[2])
        try:
            raw = self._zip.read(f"{self._prefix}/data/{key}")
        except KeyError:
            raise RoutingError(self._path, f"storage {key} is missing from the archive") from None
        return name, np.frombuffer(raw, dtype=_STORAGE_DTYPES[name])


def read_torch_save(path: Path) -> Any:
    """The object a `torch.save` file holds, tensors as numpy arrays (no torch needed)."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise RoutingError(path, f"not a torch.save zip archive ({exc})") from None
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise RoutingError(path, "no data.pkl in the archive: not a torch.save file")
        prefix = pkl[0].rsplit("/", 1)[0] if "/" in pkl[0] else ""
        try:
            return _TensorUnpickler(archive.read(pkl[0]), archive, prefix, path).load()
        except RoutingError:
            raise
        except Exception as exc:  # a truncated or foreign pickle: one line, not a traceback
            raise RoutingError(path, f"data.pkl: {type(exc).__name__}: {exc}") from None


def _frame(rows: dict[str, Any], source: str) -> pl.DataFrame:
    n = len(rows["tokens"])
    cols = {k: rows.get(k, [None] * n) for k in LOAD_SCHEMA if k != "source"}
    return pl.DataFrame({"source": [source] * n, **cols}, schema=LOAD_SCHEMA)


def _grid(counts: np.ndarray, source: str, experts: np.ndarray | None = None,
          ranks: np.ndarray | None = None) -> pl.DataFrame:  # fmt: skip
    """(steps, layers, experts) counts -> one row per (step, layer, expert); `experts` /
    `ranks`: per (layer, column) the logical expert and the rank, else the column index."""
    s, lay, e = np.indices(counts.shape).reshape(3, -1)
    expert = e if experts is None else experts[lay, e]
    rank = None if ranks is None else ranks[lay, e]
    rows: dict[str, Any] = {
        "step": s, "layer": lay, "expert": expert, "tokens": counts.reshape(-1).astype(float),
    }  # fmt: skip
    if rank is not None:
        rows["rank"] = rank
    return _frame(rows, source)


def _sglang_csv(path: Path) -> pl.DataFrame:
    try:
        frame = pl.read_csv(path, schema_overrides={"layer_id": pl.Int64, "expert_id": pl.Int64,
                                                    "count": pl.Float64})  # fmt: skip
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise RoutingError(path, f"not SGLang's layer_id,expert_id,count CSV ({exc})") from None
    if frame.columns != ["layer_id", "expert_id", "count"]:
        raise RoutingError(
            path, f"header {','.join(frame.columns)!r}: expected layer_id,expert_id,count", "line 1"
        )
    bad = frame.with_row_index("line").filter(
        pl.any_horizontal(pl.all().exclude("line").is_null()) | (pl.col("count") < 0)
    )
    if bad.height:
        raise RoutingError(path, "empty or negative value", f"line {int(bad['line'][0]) + 2}")
    return _frame(
        {"layer": frame["layer_id"], "expert": frame["expert_id"], "tokens": frame["count"]},
        "sglang",
    )


def _megatron_jsonl(path: Path) -> pl.DataFrame:
    per: dict[tuple[int, int], np.ndarray] = {}
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if rec.get("block", "decoder") != "decoder" or "mtp_idx" in rec:
                    continue
                top = np.asarray(rec["top_indices"], dtype=np.int64).reshape(-1)
                key = (int(rec["step"]), int(rec["layer"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise RoutingError(
                    path, f"not a router-trace record ({exc})", f"line {n}"
                ) from None
            if top.size and top.min() < 0:
                raise RoutingError(path, "negative expert index in top_indices", f"line {n}")
            counts = np.bincount(top, minlength=len(per.get(key, ())))
            old = per.get(key)
            if old is not None:
                counts[: len(old)] += old
            per[key] = counts
    if not per:
        return empty_load()
    frames = [
        _frame(
            {
                "step": [s] * len(c),
                "layer": [lay] * len(c),
                "expert": np.arange(len(c)),
                "tokens": c.astype(float),
            },
            "megatron",
        )
        for (s, lay), c in sorted(per.items())
    ]
    return pl.concat(frames)


def _int_tensor(obj: Any, key: str, path: Path, dims: tuple[int, ...]) -> np.ndarray | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None:
        return None
    if not isinstance(value, np.ndarray) or value.ndim not in dims:
        raise RoutingError(path, f"{key} is not a tensor of {' or '.join(map(str, dims))} dims")
    return value


def _vllm(obj: dict[str, Any], path: Path, ranks: int) -> pl.DataFrame:
    window = _int_tensor(obj, "expert_load_window", path, (3,))
    single = _int_tensor(obj, "expert_load_pass", path, (2,))
    counts = window if window is not None else single[None] if single is not None else None
    if counts is None:
        raise RoutingError(path, "no expert_load_window or expert_load_pass tensor")
    _, layers, physical = counts.shape
    rank_key = obj.get("rank")
    offset = int(rank_key) * physical if isinstance(rank_key, int) else 0
    phys = np.broadcast_to(np.arange(physical) + offset, (layers, physical))
    mapping = _int_tensor(obj, "physical_to_logical_map", path, (1, 2))
    logical = phys
    if mapping is not None:
        mapping = np.broadcast_to(mapping, (layers, mapping.shape[-1]))
        if mapping.shape[-1] < phys.max() + 1:
            raise RoutingError(path, "physical_to_logical_map has fewer experts than the load")
        logical = np.take_along_axis(mapping, phys, axis=1)
    total = physical * (ranks if isinstance(rank_key, int) else 1)
    rank = None
    if isinstance(rank_key, int):
        rank = np.full((layers, physical), rank_key)
    elif ranks > 0 and total % ranks == 0:
        rank = phys // (total // ranks)
    return _grid(counts, "vllm_eplb", logical, rank)


def read_routing(path: str | Path, ranks: int = 0) -> pl.DataFrame:
    """Tokens per (step, layer, expert[, rank]) from one dump (`LOAD_SCHEMA`); `ranks`: the
    job's EP size, for the rank of vLLM's physical experts."""
    p = Path(path)
    if not p.is_file():
        raise RoutingError(p, "no such file")
    with p.open("rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK"):
        obj = read_torch_save(p)
        if isinstance(obj, dict) and "logical_count" in obj:
            counts = _int_tensor(obj, "logical_count", p, (2, 3))
            assert counts is not None
            return _grid(counts if counts.ndim == 3 else counts[None], "sglang")
        if isinstance(obj, dict) and ({"expert_load_window", "expert_load_pass"} & set(obj)):
            return _vllm(obj, p, ranks)
        keys = ", ".join(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise RoutingError(p, f"a torch.save of {keys!r:.80}: expected SGLang's logical_count "
                              "or vLLM's expert_load_window / expert_load_pass")  # fmt: skip
    if p.suffix == ".jsonl" or re.search(r"router_trace", p.name):
        return _megatron_jsonl(p)
    return _sglang_csv(p)
