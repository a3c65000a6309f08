"""Minimal safetensors reader and writer (no dependency on the safetensors package).

File layout: an 8-byte little-endian header length N, N bytes of JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
then the raw little-endian tensor data; offsets are relative to the end of the header.
"""

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, bytes per element)
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_NAMES = {v[0]: k for k, v in _DTYPES.items()}


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def _tensor_from_bytes(buf, dtype_name, shape):
    tdtype, size = _DTYPES[dtype_name]
    n = int(np.prod(shape)) if len(shape) else 1
    if len(buf) != n * size:
        raise ValueError(f"tensor byte size {len(buf)} does not match {dtype_name} {shape}")
    if tdtype == torch.bfloat16:
        arr = np.frombuffer(buf, dtype="<i2").copy()
        return torch.from_numpy(arr).view(torch.bfloat16).reshape(shape)
    np_dtype = torch.empty(0, dtype=tdtype).numpy().dtype.newbyteorder("<")
    arr = np.frombuffer(buf, dtype=np_dtype).astype(np_dtype.newbyteorder("="))
    return torch.from_numpy(arr.copy()).reshape(shape)


def save_file(tensors, path, metadata=None):
    """Write {name: torch.Tensor} to `path` (tensors keep their dtype)."""
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _NAMES:
            raise ValueError(f"unsupported dtype {t.dtype} for {name}")
        b = _tensor_bytes(t)
        header[name] = {
            "dtype": _NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(b)],
        }
        offset += len(b)
        blobs.append(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)  # align the data start to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def load_file(path):
    """Read a safetensors file into {name: torch.Tensor} (dtype as stored)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = _tensor_from_bytes(data[base + b : base + e], info["dtype"], info["shape"])
    return out


def load_dir(model_dir):
    """Load all tensors of an HF model directory (single file or sharded with an index)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out = {}
        for shard in sorted(set(weight_map.values())):
            out.update(load_file(os.path.join(model_dir, shard)))
        missing = set(weight_map) - set(out)
        if missing:
            raise ValueError(f"tensors listed in the index but absent: {sorted(missing)[:5]}")
        return out
    return load_file(os.path.join(model_dir, "model.safetensors"))


def save_dir(tensors, model_dir, shards=1, metadata=None):
    """Write tensors as model.safetensors, or as `shards` files plus model.safetensors.index.json."""
    os.makedirs(model_dir, exist_ok=True)
    meta = {"format": "pt"}
    meta.update(metadata or {})
    if shards <= 1:
        save_file(tensors, os.path.join(model_dir, "model.safetensors"), meta)
        return
    names = sorted(tensors)
    groups = [names[i::shards] for i in range(shards)]
    weight_map = {}
    total = 0
    for i, group in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in group}, os.path.join(model_dir, fname), meta)
        for n in group:
            weight_map[n] = fname
            total += tensors[n].numel() * tensors[n].element_size()
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
