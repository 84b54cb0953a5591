"""Write `torch.save` files without torch, for tests of the dump readers (routing_dumps).

The layout is torch's zip serialization (torch/serialization.py `_save`): an archive folder
holding `data.pkl` (pickle protocol 2; each tensor is `torch._utils._rebuild_tensor_v2(storage,
offset, size, stride, requires_grad, backward_hooks)`, each storage a persistent id
`("storage", torch.<Type>Storage, key, location, numel)`), `data/<key>` (the storage's raw
little-endian bytes), `byteorder` and `version`. Stand-in `torch` modules are put in
`sys.modules` only while pickling, so the pickle names torch's real globals.
"""

from __future__ import annotations

import collections
import io
import pickle
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

_STORAGE_NAMES = {
    np.dtype("<f4"): "FloatStorage", np.dtype("<f8"): "DoubleStorage",
    np.dtype("<i8"): "LongStorage", np.dtype("<i4"): "IntStorage", np.dtype("<i2"): "ShortStorage",
    np.dtype("u1"): "ByteStorage", np.dtype("?"): "BoolStorage",
}  # fmt: skip


class _Tensor:
    def __init__(self, array: np.ndarray, key: str, storage_type: type):
        self.array, self.key, self.storage_type = array, key, storage_type


def write_torch_save(path: Path, obj: Any, archive: str = "archive") -> Path:
    """Write `obj` (dicts, lists, numbers, numpy arrays as tensors) as torch.save would."""
    saved = {m: sys.modules.get(m) for m in ("torch", "torch._utils")}
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args: Any) -> None:  # named like torch's; never called here
        raise AssertionError(args)

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2  # type: ignore[attr-defined]
    for name in _STORAGE_NAMES.values():
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    torch._utils = utils  # type: ignore[attr-defined]
    storages: dict[str, bytes] = {}

    def convert(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            key = str(len(storages))
            storages[key] = arr.tobytes()
            return _Tensor(arr, key, getattr(torch, _STORAGE_NAMES[arr.dtype]))
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(convert(v) for v in value)
        return value

    class Pickler(pickle.Pickler):
        def persistent_id(self, value: Any) -> Any:
            if isinstance(value, _StorageRef):
                return ("storage", value.tensor.storage_type, value.tensor.key, "cpu",
                        value.tensor.array.size)  # fmt: skip
            return None

        def reducer_override(self, value: Any) -> Any:
            if isinstance(value, _Tensor):
                a = value.array
                stride = tuple(s // a.itemsize for s in a.strides)
                hooks: collections.OrderedDict[str, Any] = collections.OrderedDict()
                args = (_StorageRef(value), 0, a.shape, stride, False, hooks)
                return _rebuild_tensor_v2, args
            return NotImplemented

    try:
        sys.modules["torch"], sys.modules["torch._utils"] = torch, utils
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(convert(obj))
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{archive}/data.pkl", buf.getvalue())
        zf.writestr(f"{archive}/byteorder", "little")
        for key, raw in storages.items():
            zf.writestr(f"{archive}/data/{key}", raw)
        zf.writestr(f"{archive}/version", "3\n")
    return path


class _StorageRef:
    def __init__(self, tensor: _Tensor):
        self.tensor = tensor
