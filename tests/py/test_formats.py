#!/usr/bin/env python3
"""GGUF and safetensors files written here by independent Python code are read back by
`cachet inspect`: metadata, shapes and values (bit-exact float32), and hostile files fail
cleanly with the path in the message."""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


# ---- independent writers ------------------------------------------------------------------


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
    if vtype == 8:
        return gguf_str(v)
    if vtype == 9:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        for it in items:
            out += gguf_value(etype, it)
        return out
    return struct.pack(fmt[vtype], v)


def write_gguf(path, kvs, tensors, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, shape_row_major, bytes)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        head += gguf_str(key) + struct.pack("<I", vtype) + gguf_value(vtype, v)
    data = b""
    for name, gtype, shape, raw in tensors:
        off = (len(data) + align - 1) // align * align
        data += b"\0" * (off - len(data))
        head += gguf_str(name) + struct.pack("<I", len(shape))
        for d in reversed(shape):
            head += struct.pack("<Q", d)
        head += struct.pack("<IQ", gtype, off)
        data += raw
    head += b"\0" * ((align - len(head) % align) % align)
    with open(path, "wb") as f:
        f.write(head + data)


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype_name, shape, bytes)]"""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors))


# ---- helpers --------------------------------------------------------------------------------


def run(cachet, *args):
    return subprocess.run([cachet, *args], capture_output=True, text=True)


def values(cachet, path, name):
    r = run(cachet, "inspect", path, "--tensor", name, "--values")
    if r.returncode != 0:
        check(False, f"inspect --values {name} failed: {r.stderr.strip()}")
        return None

    def no_bare_constant(c):
        raise ValueError(f"bare {c} is not JSON")

    # Strict JSON: NaN and the infinities come as strings, never as bare tokens
    obj = json.loads(r.stdout, parse_constant=no_bare_constant)
    check(obj["name"] == name, f"{name}: name in output")
    return obj


def same_f32(got, want, what):
    named = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
    g = np.array([named[v] if isinstance(v, str) else v for v in got],
                 dtype=np.float64).astype(np.float32)
    w = np.asarray(want, dtype=np.float32).reshape(-1)
    ok = g.shape == w.shape and np.array_equal(g.view(np.uint32), w.view(np.uint32))
    if not ok and g.shape == w.shape:
        bad = np.nonzero(g.view(np.uint32) != w.view(np.uint32))[0][:5]
        print(f"  {what}: first differences at {bad}: got {g[bad]} want {w[bad]}")
    check(ok, f"{what}: values bit-exact")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    cachet = a.cachet
    rng = np.random.default_rng(7)

    # ---- safetensors: float and integer dtypes ----
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    f32[0, 0] = np.inf
    f32[0, 1] = -np.inf
    f32[0, 2] = np.nan
    f32[0, 3] = -0.0
    f32[0, 4] = 1e-42  # subnormal
    f16 = rng.standard_normal((4, 2)).astype(np.float16)
    bf16 = torch.randn(2, 3, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    bf16_bits = bf16.view(torch.int16).numpy().astype("<i2")
    i32 = np.array([[-5, 7, 2**24 + 1]], dtype="<i4")  # 2**24 + 1 has no f32
    u8 = np.array([0, 255, 3], dtype=np.uint8)
    f64 = np.array([0.1, -2.5, 1 + 2**-40], dtype="<f8")  # 1 + 2**-40 has no f32
    i64 = np.array([2**62 + 1, -(2**62) - 3], dtype="<i8")
    u64 = np.array([2**64 - 1], dtype="<u8")
    st = os.path.join(a.workdir, "model.safetensors")
    write_safetensors(st, [("f32", "F32", f32.shape, f32.tobytes()),
                           ("f16", "F16", f16.shape, f16.tobytes()),
                           ("bf16", "BF16", tuple(bf16.shape), bf16_bits.tobytes()),
                           ("i32", "I32", i32.shape, i32.tobytes()),
                           ("u8", "U8", u8.shape, u8.tobytes()),
                           ("f64", "F64", f64.shape, f64.tobytes()),
                           ("i64", "I64", i64.shape, i64.tobytes()),
                           ("u64", "U64", u64.shape, u64.tobytes())],
                      metadata={"format": "pt"})
    o = values(cachet, st, "f32")
    if o:
        check(o["type"] == "F32" and o["shape"] == [3, 5], "f32 type/shape")
        same_f32(o["values"], f32, "safetensors F32 (with inf/nan/-0/subnormal)")
    o = values(cachet, st, "f16")
    if o:
        same_f32(o["values"], f16.astype(np.float32), "safetensors F16")
    o = values(cachet, st, "bf16")
    if o:
        same_f32(o["values"], bf16.float().numpy(), "safetensors BF16")
    o = values(cachet, st, "i32")
    if o:
        check(o["values"] == i32.reshape(-1).tolist(), f"safetensors I32 exact: {o['values']}")
    o = values(cachet, st, "u8")
    if o:
        same_f32(o["values"], u8.astype(np.float32), "safetensors U8")
    o = values(cachet, st, "f64")
    if o:
        check(o["values"] == f64.tolist(), f"safetensors F64 exact: {o['values']}")
    for name, arr in (("i64", i64), ("u64", u64)):
        o = values(cachet, st, name)
        if o:
            check(o["values"] == arr.tolist(), f"safetensors {name.upper()} exact: {o['values']}")
    r = run(cachet, "inspect", st, "--json")
    check(r.returncode == 0, f"inspect --json safetensors: {r.stderr.strip()}")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        check(j["metadata"] == {"format": "pt"}, "safetensors metadata")
        check([t["name"] for t in j["tensors"]] == ["f32", "f16", "bf16", "i32", "u8", "f64", "i64", "u64"],
              "safetensors tensor order")
        check(j["tensors"][1]["offset"] == 60 and j["tensors"][1]["bytes"] == 16,
              "safetensors offsets")

    # ---- GGUF: metadata of every type, F32/F16/Q8_0 tensors ----
    w = rng.standard_normal((2, 6, 8)).astype(np.float32)
    h = rng.standard_normal((3, 4)).astype(np.float16)
    # Q8_0: blocks of (f16 scale, 32 int8); value = scale * q.
    q_rows, q_cols = 2, 64
    scales = (rng.random(q_rows * q_cols // 32) * 0.1 + 0.01).astype(np.float16)
    qs = rng.integers(-128, 128, size=(q_rows * q_cols // 32, 32), dtype=np.int8)
    q8 = b"".join(scales[i].tobytes() + qs[i].tobytes() for i in range(len(scales)))
    q8_ref = (scales.astype(np.float32)[:, None] * qs.astype(np.float32)).reshape(-1)
    kvs = [("general.architecture", 8, "test"),
           ("u8", 0, 7), ("i8", 1, -7), ("u16", 2, 700), ("i16", 3, -700), ("u32", 4, 70000),
           ("i32", 5, -70000), ("f32", 6, 0.5), ("bool", 7, True), ("u64", 10, 2**40),
           ("i64", 11, -(2**40)), ("f64", 12, 0.125),
           ("tokens", 9, (8, ["<pad>", "é", "x"])),
           ("long", 9, (5, list(range(100)))),
           ("nested", 9, (9, [(5, [1, 2]), (8, ["a"])]))]
    gg = os.path.join(a.workdir, "model.gguf")
    write_gguf(gg, kvs, [("w", 0, w.shape, w.tobytes()), ("h", 1, h.shape, h.tobytes()),
                         ("q", 8, (q_rows, q_cols), q8)])
    r = run(cachet, "inspect", gg, "--json")
    check(r.returncode == 0, f"inspect --json gguf: {r.stderr.strip()}")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        m = j["metadata"]
        for key, _, v in kvs[:12]:
            check(m.get(key) == v, f"gguf metadata {key}: {m.get(key)!r} != {v!r}")
        check(m["tokens"] == ["<pad>", "é", "x"], "gguf string array")
        check(m["long"]["length"] == 100 and m["long"]["head"][:3] == [0, 1, 2],
              "gguf long array summarised")
        check(m["nested"] == [[1, 2], ["a"]], "gguf nested array")
        shapes = {t["name"]: t["shape"] for t in j["tensors"]}
        check(shapes == {"w": [2, 6, 8], "h": [3, 4], "q": [2, 64]}, f"gguf shapes {shapes}")
        check(j["totals"]["tensors"] == 3, "gguf totals")
    r = run(cachet, "inspect", gg)
    check(r.returncode == 0 and "general.architecture" in r.stdout and "Q8_0" in r.stdout,
          "gguf text listing")
    o = values(cachet, gg, "w")
    if o:
        check(o["shape"] == [2, 6, 8], "gguf w shape")
        same_f32(o["values"], w, "gguf F32")
    o = values(cachet, gg, "h")
    if o:
        same_f32(o["values"], h.astype(np.float32), "gguf F16")
    o = values(cachet, gg, "q")
    if o:
        check(o["type"] == "Q8_0", "gguf Q8_0 type")
        same_f32(o["values"], q8_ref, "gguf Q8_0 dequantized")

    # ---- hostile inputs: clean errors naming the file ----
    data = open(gg, "rb").read()
    cut = os.path.join(a.workdir, "cut.gguf")
    for n in (3, 20, 100, len(data) - 1):
        with open(cut, "wb") as f:
            f.write(data[:n])
        r = run(cachet, "inspect", cut)
        check(r.returncode == 1 and cut in r.stderr and "error" in r.stderr,
              f"truncated gguf ({n} bytes): rc={r.returncode} {r.stderr.strip()}")
    bad = os.path.join(a.workdir, "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 10**12) + b"{}")
    r = run(cachet, "inspect", bad)
    check(r.returncode == 1 and bad in r.stderr, f"bad safetensors header: {r.stderr.strip()}")
    r = run(cachet, "inspect", gg, "--tensor", "missing", "--values")
    check(r.returncode == 1 and "missing tensor 'missing'" in r.stderr, "missing tensor error")

    if FAILURES:
        print(f"test_formats: {len(FAILURES)} failure(s)")
        return 1
    print("test_formats: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
