#!/usr/bin/env python3
"""Block formats against an independent numpy decoder.

Writes a small GGUF file holding one tensor of every weight type (random but valid blocks:
finite scales, arbitrary quant bits), asks `cachet inspect FILE --tensor NAME --values` for the
values and checks them bit for bit (as float32 bit patterns) against a numpy decoder written from
the format definitions, which evaluates each value with the same float32 operations as ggml.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

# type name -> (ggml type id, elements per block, bytes per block)
TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "BF16": (30, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "Q8_K": (15, 256, 292),
}

# Byte offsets of the f16 scale fields in each block (they must hold finite values).
HALF_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q8_1": [0, 2],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}

F32 = np.float32


def f16(blocks, off):
    """The f16 field at byte offset off of every block, as float32 (exact)."""
    return blocks[:, off:off + 2].copy().view(np.float16).astype(F32)[:, 0]


def u8(blocks, off, n):
    return blocks[:, off:off + n].astype(np.int32)


def i8(blocks, off, n):
    return blocks[:, off:off + n].copy().view(np.int8).astype(np.int32)


def col(v):
    return v[:, None]


# ------------------------------------------------------------------------------------------
# Decoders: blocks is a uint8 array [nblocks, block_bytes]; each returns float32 [nblocks, QK].

def dec_q4_0(b):
    d = f16(b, 0)
    qs = u8(b, 2, 16)
    q = np.concatenate([qs & 15, qs >> 4], axis=1) - 8          # element j<16: low nibble of byte j
    return q.astype(F32) * col(d)


def dec_q4_1(b):
    d, m = f16(b, 0), f16(b, 2)
    qs = u8(b, 4, 16)
    q = np.concatenate([qs & 15, qs >> 4], axis=1)
    return q.astype(F32) * col(d) + col(m)


def q5_values(b, qh_off, qs_off):
    qh = b[:, qh_off:qh_off + 4].copy().view("<u4").astype(np.int64)   # [nb, 1]
    qs = u8(b, qs_off, 16)
    low = np.concatenate([qs & 15, qs >> 4], axis=1)
    high = (qh >> np.arange(32)) & 1                                    # bit e of qh: element e
    return low | (high.astype(np.int32) << 4)


def dec_q5_0(b):
    return (q5_values(b, 2, 6) - 16).astype(F32) * col(f16(b, 0))


def dec_q5_1(b):
    return q5_values(b, 4, 8).astype(F32) * col(f16(b, 0)) + col(f16(b, 2))


def dec_q8_0(b):
    return i8(b, 2, 32).astype(F32) * col(f16(b, 0))


def dec_q8_1(b):
    return i8(b, 4, 32).astype(F32) * col(f16(b, 0))   # the sum field s is not a value


E = np.arange(256)
# 2-bit fields of Q2_K/Q3_K: element e lies in byte (e//128)*32 + e%32 at bits 2*((e%128)//32).
TWO_BIT_BYTE = (E // 128) * 32 + E % 32
TWO_BIT_SHIFT = 2 * ((E % 128) // 32)


def dec_q2_k(b):
    sc = u8(b, 0, 16)
    qs = u8(b, 16, 64)
    d, dmin = f16(b, 80), f16(b, 82)
    q = (qs[:, TWO_BIT_BYTE] >> TWO_BIT_SHIFT) & 3
    g = E // 16
    dl = col(d) * (sc & 15).astype(F32)     # [nb, 16], rounded to f32
    ml = col(dmin) * (sc >> 4).astype(F32)
    return dl[:, g] * q.astype(F32) - ml[:, g]


def dec_q3_k(b):
    hmask = u8(b, 0, 32)
    qs = u8(b, 32, 64)
    s = u8(b, 96, 12)
    d = f16(b, 108)
    j = np.arange(16)
    low = np.where(j < 8, s[:, j % 8] & 15, s[:, j % 8] >> 4)
    high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
    scale = (low | (high << 4)) - 32                      # signed 6-bit scales
    q2 = (qs[:, TWO_BIT_BYTE] >> TWO_BIT_SHIFT) & 3
    hbit = (hmask[:, E % 32] >> (E // 32)) & 1            # set: no -4 offset
    q = q2 - np.where(hbit == 1, 0, 4)
    dl = col(d) * scale.astype(F32)
    return dl[:, E // 16] * q.astype(F32)


def k4_scales(s):
    """6-bit scales and mins of the eight groups of a Q4_K / Q5_K block (12 bytes)."""
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty((s.shape[0], 8), np.int32)
    for g in range(8):
        if g < 4:
            sc[:, g] = s[:, g] & 63
            mn[:, g] = s[:, g + 4] & 63
        else:
            sc[:, g] = (s[:, g + 4] & 15) | ((s[:, g - 4] >> 6) << 4)
            mn[:, g] = (s[:, g + 4] >> 4) | ((s[:, g] >> 6) << 4)
    return sc, mn


# 4-bit fields of Q4_K/Q5_K: element e in byte 32*(e//64) + e%32, low nibble if e%64 < 32.
NIB_BYTE = 32 * (E // 64) + E % 32
NIB_SHIFT = np.where(E % 64 < 32, 0, 4)


def dec_q4_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    sc, mn = k4_scales(u8(b, 4, 12))
    qs = u8(b, 16, 128)
    q = (qs[:, NIB_BYTE] >> NIB_SHIFT) & 15
    d1 = col(d) * sc.astype(F32)
    m1 = col(dmin) * mn.astype(F32)
    g = E // 32
    return d1[:, g] * q.astype(F32) - m1[:, g]


def dec_q5_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    sc, mn = k4_scales(u8(b, 4, 12))
    qh = u8(b, 16, 32)
    qs = u8(b, 48, 128)
    q = ((qs[:, NIB_BYTE] >> NIB_SHIFT) & 15) | (((qh[:, E % 32] >> (E // 32)) & 1) << 4)
    d1 = col(d) * sc.astype(F32)
    m1 = col(dmin) * mn.astype(F32)
    g = E // 32
    return d1[:, g] * q.astype(F32) - m1[:, g]


def dec_q6_k(b):
    ql = u8(b, 0, 128)
    qh = u8(b, 128, 64)
    sc = i8(b, 192, 16)
    d = f16(b, 208)
    half, r = E // 128, E % 128
    quarter, lane = r // 32, r % 32
    lb = ql[:, 64 * half + lane + 32 * (quarter % 2)]
    low = np.where(quarter < 2, lb & 15, lb >> 4)
    high = (qh[:, 32 * half + lane] >> (2 * quarter)) & 3
    q = (low | (high << 4)) - 32
    ds = col(d) * sc.astype(F32)             # (d * scale) first, then * q
    return ds[:, E // 16] * q.astype(F32)


def dec_q8_k(b):
    d = b[:, 0:4].copy().view("<f4")[:, 0].astype(F32)
    return col(d) * i8(b, 4, 256).astype(F32)


DECODERS = {
    "Q4_0": dec_q4_0, "Q4_1": dec_q4_1, "Q5_0": dec_q5_0, "Q5_1": dec_q5_1, "Q8_0": dec_q8_0,
    "Q8_1": dec_q8_1, "Q2_K": dec_q2_k, "Q3_K": dec_q3_k, "Q4_K": dec_q4_k, "Q5_K": dec_q5_k,
    "Q6_K": dec_q6_k, "Q8_K": dec_q8_k,
}


def decode(name, raw, n):
    if name == "F32":
        return np.frombuffer(raw, "<f4").astype(F32)
    if name == "F16":
        return np.frombuffer(raw, "<f2").astype(F32)
    if name == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(F32)
    _, qk, bb = TYPES[name]
    blocks = np.frombuffer(raw, np.uint8).reshape(-1, bb)
    out = DECODERS[name](blocks)
    assert out.dtype == F32, name
    return out.reshape(n)


# ------------------------------------------------------------------------------------------
# Random valid data

def random_finite_f16(rng, count):
    h = rng.integers(0, 65536, size=count, dtype=np.uint32)
    exp = (h >> 10) & 31
    h = np.where(exp == 31, h & 0x83FF, h)            # no infinities or NaNs
    return h.astype(np.uint16)


def random_tensor(rng, name, n):
    tid, qk, bb = TYPES[name]
    if name == "F32":
        v = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype("<f4")
        return v.tobytes()
    if name == "F16":
        return random_finite_f16(rng, n).astype("<u2").tobytes()
    if name == "BF16":
        h = rng.integers(0, 65536, size=n, dtype=np.uint32)
        h = np.where(((h >> 7) & 255) == 255, h & 0x807F, h)
        return h.astype("<u2").tobytes()
    nb = n // qk
    blocks = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for off in HALF_FIELDS.get(name, []):
        blocks[:, off:off + 2] = random_finite_f16(rng, nb).astype("<u2").view(np.uint8).reshape(nb, 2)
    if name == "Q8_K":
        d = (rng.standard_normal(nb) * np.exp2(rng.integers(-12, 4, nb))).astype("<f4")
        blocks[:, 0:4] = d.view(np.uint8).reshape(nb, 4)
    return blocks.tobytes()


# ------------------------------------------------------------------------------------------
# A minimal GGUF (version 3) writer

GGUF_U32, GGUF_STRING = 4, 8


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tensors, alignment=32):
    """tensors: list of (name, type name, gguf dims [ne0, ne1, ...], raw bytes)."""
    kvs = [
        ("general.architecture", GGUF_STRING, gguf_str("quant-test")),
        ("general.alignment", GGUF_U32, struct.pack("<I", alignment)),
    ]
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, vtype, payload in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + payload
    offset = 0
    offsets = []
    for name, tname, dims, raw in tensors:
        offsets.append(offset)
        out += gguf_str(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", TYPES[tname][0], offset)
        offset += (len(raw) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for (name, tname, dims, raw), off in zip(tensors, offsets):
        assert len(out) - data_start == off
        out += raw
        out += b"\0" * (-len(out) % alignment)
    with open(path, "wb") as f:
        f.write(out)


# ------------------------------------------------------------------------------------------

def inspect_values(cachet, path, name):
    res = subprocess.run([cachet, "inspect", path, "--tensor", name, "--values"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cachet inspect failed for {name}: {res.stderr.strip()}")
    # Integers such as "-0" must stay floats to keep their sign.
    return json.loads(res.stdout, parse_int=float)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(20240611)

    tensors = []
    for tname, (tid, qk, bb) in TYPES.items():
        # Rows of several blocks; ggml dims are [ne0 (row length), ne1 (rows)].
        ne0 = qk * (3 if qk == 256 else 4) if qk > 1 else 40
        ne1 = 3
        raw = random_tensor(rng, tname, ne0 * ne1)
        assert len(raw) == ne0 * ne1 // qk * bb
        tensors.append((f"t.{tname.lower()}", tname, [ne0, ne1], raw))
    path = os.path.join(args.workdir, "blocks.gguf")
    write_gguf(path, tensors)

    failures = []
    checked = 0
    for name, tname, dims, raw in tensors:
        n = dims[0] * dims[1]
        want = decode(tname, raw, n)
        try:
            got_json = inspect_values(args.cachet, path, name)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            failures.append(f"{tname}: {e}")
            continue
        problems = []
        if got_json.get("type") != tname:
            problems.append(f"type {got_json.get('type')!r}")
        if [int(x) for x in got_json.get("shape", [])] != list(reversed(dims)):
            problems.append(f"shape {got_json.get('shape')}")
        got = np.array(got_json.get("values", []), dtype=np.float64).astype(F32)
        if got.size != n:
            problems.append(f"{got.size} values, expected {n}")
        else:
            gb, wb = got.view(np.uint32), want.view(np.uint32)
            bad = np.nonzero(gb != wb)[0]
            if bad.size:
                i = bad[0]
                problems.append(f"{bad.size}/{n} values differ, first at {i}: "
                                f"{got[i]!r} ({gb[i]:#010x}) vs {want[i]!r} ({wb[i]:#010x})")
        if problems:
            failures.append(f"{tname}: " + "; ".join(problems))
        else:
            checked += n

    for f in failures:
        print("FAIL", f)
    print(f"test_quant: {len(tensors) - len(failures)}/{len(tensors)} types bit-identical "
          f"({checked} values)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
