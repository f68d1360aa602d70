"""Saving a buffer to one ``.npz`` file that loads without pickle (so loading runs no code).

Layout: ``__header__`` is a JSON document (ring position, RNG state, column kinds,
middleware types and their JSON state); every array lives under its own name. Only stored
items are written (their slots are saved too, so the ring comes back exactly).

Column kinds: ``typed`` (a numeric column), ``str`` (Python strings), ``ragged`` (numeric
arrays of one dtype and rank but varying shape, e.g. whole episodes: concatenated, with
their shapes), ``tensors`` (the same for torch tensors kept as objects, e.g. tensors pushed
as whole items). A column pushed as tensors is saved as numpy with ``"torch": true`` in its
header entry and is read back as tensors after loading. Anything else (lists, dicts,
arbitrary objects) would need pickle, so saving it fails with a ValueError naming the field.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from rlpipe.data.buffer.base import BufferMiddleware, SavableBuffer
from rlpipe.data.buffer.table import Table, take_rows
from rlpipe.errors import RlpipeError, first_line

FORMAT = "rlpipe.buffer/1"


class BufferFileError(RlpipeError, ValueError):
    """A saved buffer file is damaged, truncated, of another format, or does not fit this buffer."""


def _encode_column(name: str, values: np.ndarray, arrays: dict[str, np.ndarray]) -> str:
    """Put a column's values into ``arrays`` under ``name``; returns the column kind."""
    if values.dtype != object:
        arrays[name] = values
        return "typed"
    items = values.tolist() if values.ndim == 1 else list(values)
    if all(isinstance(item, str) for item in items):
        arrays[name] = np.array(items, dtype=str)
        return "str"
    kind = "ragged"
    if items and all(isinstance(item, torch.Tensor) for item in items):
        try:
            items = [item.numpy(force=True) for item in items]
            kind = "tensors"
        except (TypeError, RuntimeError):  # a dtype numpy lacks: reported below
            pass
    if all(isinstance(item, np.ndarray) and item.dtype.kind in "biufc" for item in items):
        dtypes = {item.dtype for item in items}
        ranks = {item.ndim for item in items}
        if len(dtypes) <= 1 and len(ranks) <= 1:
            rank = ranks.pop() if ranks else 0
            arrays[name] = np.concatenate([item.reshape(-1) for item in items]) if items else np.zeros(0)
            arrays[name + ".shapes"] = np.array([item.shape for item in items], dtype=np.int64).reshape(
                -1, rank
            )
            return kind
    kinds = sorted({type(item).__name__ for item in items})
    table, field = name.split("/", 1)
    raise ValueError(
        f"cannot save {table} field '{field}' safely: it holds {', '.join(kinds)} values, "
        "which would need pickle (store numeric arrays, numbers or strings instead)"
    )


def _decode_column(name: str, kind: str, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    values = arrays[name]
    if kind == "typed":
        return values
    out = np.empty(len(values) if kind == "str" else len(arrays[name + ".shapes"]), dtype=object)
    if kind == "str":
        for i, value in enumerate(values.tolist()):
            out[i] = value
        return out
    offset = 0
    for i, shape in enumerate(arrays[name + ".shapes"].tolist()):
        size = int(np.prod(shape, dtype=np.int64))
        item = values[offset : offset + size].reshape(shape).copy()
        out[i] = torch.from_numpy(item) if kind == "tensors" else item
        offset += size
    return out


def _save_table(
    prefix: str, table: Table, slots: np.ndarray, arrays: dict[str, np.ndarray]
) -> dict[str, Any]:
    spec = {}
    for key, col in table.columns.items():
        mask = table.present.get(key)
        have = slots if mask is None else slots[mask[slots]]
        name = f"{prefix}/{key}"
        spec[key] = {
            "kind": _encode_column(name, take_rows(col, have), arrays),
            "sparse": mask is not None,
            "torch": key in table.torch_fields,
        }
        if mask is not None:
            arrays[name + ".present"] = mask[slots]
    return spec


def _load_table(prefix: str, table: Table, spec: Mapping[str, Any], slots: np.ndarray, arrays: Any) -> None:
    fields = {}
    for key, info in spec.items():
        name = f"{prefix}/{key}"
        have = slots[arrays[name + ".present"]] if info["sparse"] else slots
        fields[key] = (_decode_column(name, info["kind"], arrays), have, bool(info["sparse"]))
    torch_fields = [key for key, info in spec.items() if info.get("torch", False)]  # absent in older files
    table.restore(fields, written=len(slots) > 0, torch_fields=torch_fields)


def _stateful(buffer: SavableBuffer) -> list[tuple[int, BufferMiddleware]]:
    return [(i, mw) for i, mw in enumerate(buffer.middleware) if isinstance(mw, BufferMiddleware)]


def save_buffer(buffer: SavableBuffer, file_name: str) -> None:
    """Write ``buffer`` to ``file_name`` atomically (a temp file, then a rename)."""
    st = buffer.storage
    slots = st.ordered_slots()
    arrays: dict[str, np.ndarray] = {"ring/slots": slots, "ring/ids": st.ids[slots]}
    header: dict[str, Any] = {
        "format": FORMAT,
        "capacity": st.capacity,
        "base": st.base,
        "next_id": st.next_id,
        "rng": buffer.rng.bit_generator.state,
        "data": _save_table("data", st.data, slots, arrays),
        "meta": _save_table("meta", st.meta, slots, arrays),
        "middleware": [],
    }
    for i, mw in _stateful(buffer):
        json_state = {}
        for key, value in mw.state_dict().items():
            if isinstance(value, np.ndarray):
                arrays[f"middleware{i}/{key}"] = value
            else:
                json_state[key] = value
        header["middleware"].append({"position": i, "type": type(mw).__name__, "state": json_state})
    arrays["__header__"] = np.array(json.dumps(header))
    write_npz(file_name, arrays)


def write_npz(file_name: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as an ``.npz`` file atomically (a temp file beside it, then a rename)."""
    directory = os.path.dirname(os.path.abspath(file_name))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, file_name)
    except BaseException:
        if os.path.exists(tmp):  # not when the rename was done (then a signal came right after it)
            os.unlink(tmp)
        raise


def _read_buffer_file(buffer: SavableBuffer, file_name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and every array of a saved buffer, checked against ``buffer``."""
    with np.load(file_name, allow_pickle=False) as npz:
        if "__header__" not in npz.files:
            raise BufferFileError(f"{file_name} is not a saved rlpipe buffer (no __header__)")
        header = json.loads(str(npz["__header__"]))
        if header.get("format") != FORMAT:
            raise BufferFileError(f"{file_name} has format {header.get('format')!r}, expected {FORMAT!r}")
        if header["capacity"] != buffer.storage.capacity:
            raise BufferFileError(
                f"{file_name} holds a buffer of size {header['capacity']}, this one has {buffer.storage.capacity}"
            )
        saved_types = [(m["position"], m["type"]) for m in header["middleware"]]
        if saved_types != [(i, type(mw).__name__) for i, mw in _stateful(buffer)]:
            raise BufferFileError(
                f"{file_name} was saved with middleware {saved_types}, this buffer has different ones"
            )
        return header, {name: npz[name] for name in npz.files}


def load_buffer(buffer: SavableBuffer, file_name: str) -> None:
    """Restore ``buffer`` from a file written by :func:`save_buffer` (same size and middleware);
    a damaged, truncated or foreign file is a one-line :class:`BufferFileError`."""
    try:
        header, arrays = _read_buffer_file(buffer, file_name)
        _restore(buffer, header, arrays)
    except BufferFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as err:
        reason = first_line(err)
        raise BufferFileError(f"buffer file {file_name} is damaged or not an rlpipe buffer ({reason[:160]})") from None


def _restore(buffer: SavableBuffer, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    st = buffer.storage
    slots = arrays["ring/slots"]
    st.ids[:] = -1
    st.ids[slots] = arrays["ring/ids"]
    st.base, st.next_id, st.count = header["base"], header["next_id"], len(slots)
    _load_table("data", st.data, header["data"], slots, arrays)
    _load_table("meta", st.meta, header["meta"], slots, arrays)
    st.version += 1
    buffer.rng.bit_generator.state = header["rng"]
    for (i, mw), saved in zip(_stateful(buffer), header["middleware"], strict=True):
        state = dict(saved["state"])
        prefix = f"middleware{i}/"
        state.update(
            {name[len(prefix) :]: value for name, value in arrays.items() if name.startswith(prefix)}
        )
        mw.load_state_dict(state)
