"""EnCodec decoder: the cachet engine against the PyTorch reference.

    python3 test_encodec.py --cachet BIN --workdir DIR

Writes tiny random EnCodec directories (tests/reference/encodec.py: weight_g/weight_v pairs,
parametrizations pairs or plain weights; causal and non-causal; reflect / replicate / constant
padding; dilated residual blocks; trim ratios; GroupNorm; stereo; no conv shortcut), decodes
random codes with `BIN codec-decode --raw` (float32 WAV) and compares the waveform with the
reference computed in float64. Then checks the loudness-normalised PCM16 output against the
numpy version of candle's normalize_loudness + write_pcm_as_wav applied to the engine's raw
output, and the error paths.

Error measure: err = max |engine - reference| / max(1, max |reference|); the engine is f32
(vectorised exp / sigmoid, different summation order), the reference f64: measured ~1e-6.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import encodec as ref  # noqa: E402
import safetensors_io  # noqa: E402
from harness import Results  # noqa: E402

TOL = 1e-4


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def write_codes(path, codes):
    with open(path, "w") as f:
        json.dump({"codes": codes}, f)


def decode_cli(args, model_dir, codes, out, raw=True, extra=(), piece=None):
    cpath = out + ".json"
    write_codes(cpath, codes)
    cmd = [args.cachet, "codec-decode", "--encodec", model_dir, "--codes", cpath, "-o", out]
    if raw:
        cmd.append("--raw")
    cmd += list(extra)
    env = None
    if piece is not None:  # (at most this many frames a piece, pieces a group): causal decoders
        env = dict(os.environ, CACHET_ENCODEC_PIECE=str(piece[0]),
                   CACHET_ENCODEC_GROUP=str(piece[1]))
    return run(cmd, env)


CASES = [
    # name, writer overrides, weight style, dtype, list of (n_q, T)
    ("causal_reflect", {}, "weight_norm", torch.float32, [(8, 1), (8, 2), (8, 37), (3, 20)]),
    ("parametrizations_f16", {}, "parametrizations", torch.float16, [(8, 23)]),
    ("plain_noncausal", {"use_causal_conv": False}, "plain", torch.float32, [(8, 1), (8, 29)]),
    ("replicate", {"pad_mode": "replicate"}, "weight_norm", torch.float32, [(8, 2), (8, 19)]),
    ("constant_noncausal", {"pad_mode": "constant", "use_causal_conv": False}, "weight_norm",
     torch.float32, [(8, 17)]),
    ("trim_half", {"trim_right_ratio": 0.5}, "weight_norm", torch.float32, [(8, 16)]),
    ("stereo_no_shortcut",
     {"audio_channels": 2, "use_conv_shortcut": False, "num_lstm_layers": 1,
      "upsampling_ratios": [4, 3, 2], "dilation_growth_rate": 3, "num_residual_layers": 2,
      "compress": 4, "num_filters": 8},
     "weight_norm", torch.float32, [(8, 12)]),
    ("group_norm", {"norm_type": "time_group_norm", "use_causal_conv": False},
     "weight_norm", torch.float32, [(8, 14)]),
    ("wide", {"hidden_size": 32, "num_filters": 16, "upsampling_ratios": [4, 2],
              "codebook_size": 128}, "weight_norm", torch.float32, [(8, 300)]),
]

# Causal decoders run a piece of frames at a time through the layers after the LSTM, and
# groups of pieces through the first convolution and the LSTM (300 frames above are four pieces
# in one group by default); these cases cut their input into short pieces (at most this many
# frames each) and small groups (this many pieces each).
PIECE_CASES = [
    ("causal_reflect_pieces", {}, "weight_norm", torch.float32, [(8, 37), (3, 20)], (5, 2)),
    ("stereo_no_shortcut_pieces",
     {"audio_channels": 2, "use_conv_shortcut": False, "num_lstm_layers": 1,
      "upsampling_ratios": [4, 3, 2], "dilation_growth_rate": 3, "num_residual_layers": 2,
      "compress": 4, "num_filters": 8},
     "weight_norm", torch.float32, [(8, 41)], (11, 1)),
]


def compare_case(args, res, name, overrides, style, dtype, shapes, seed, piece=None):
    d = os.path.join(args.workdir, name)
    cfg = ref.write_tiny_encodec(d, seed=seed, weight_style=style, dtype=dtype, **overrides)
    hop = int(np.prod(cfg["upsampling_ratios"]))
    for n_q, T in shapes:
        codes = ref.random_codes(n_q, T, cfg["codebook_size"], seed=seed * 100 + T)
        out = os.path.join(args.workdir, f"{name}_{n_q}x{T}.wav")
        r = decode_cli(args, d, codes, out, piece=piece)
        tag = f"{name} n_q={n_q} T={T}"
        if not res.check(tag + " runs", r.returncode == 0, r.stderr.strip()[-400:]):
            continue
        got, rate, fmt, bits = ref.read_wav(out)
        want = ref.decode(d, codes).T  # [frames, channels]
        ok_shape = got.shape == want.shape and got.shape[0] == T * hop
        if not res.check(tag + " shape", ok_shape, f"{got.shape} vs {want.shape}"):
            continue
        res.check(tag + " format", rate == 24000 and fmt == 3 and bits == 32, f"{rate} {fmt} {bits}")
        err = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
        res.check(tag + " waveform", err <= TOL, f"err {err:.2e} (|ref| max {np.max(np.abs(want)):.3f})")


def loudness_case(args, res):
    d = os.path.join(args.workdir, "loud")
    cfg = ref.write_tiny_encodec(d, seed=7)
    T = 2400  # 2400 * 6 samples = 0.6 s at 24 kHz: enough 400 ms gating blocks
    codes = ref.random_codes(8, T, cfg["codebook_size"], seed=3)
    raw_out = os.path.join(args.workdir, "loud_raw.wav")
    pcm_out = os.path.join(args.workdir, "loud_pcm.wav")
    r1 = decode_cli(args, d, codes, raw_out, raw=True)
    r2 = decode_cli(args, d, codes, pcm_out, raw=False)
    if not res.check("loudness runs", r1.returncode == 0 and r2.returncode == 0,
                     (r1.stderr + r2.stderr).strip()[-400:]):
        return
    raw, _, _, _ = ref.read_wav(raw_out)
    pcm, rate, fmt, bits = ref.read_wav(pcm_out)
    res.check("loudness pcm16 format", fmt == 1 and bits == 16 and rate == 24000, f"{fmt} {bits} {rate}")
    x = raw[:, 0].astype(np.float32)
    want = ref.pcm16_candle(ref.normalize_loudness(x, 24000))
    got = np.round(pcm[:, 0] * 32768.0).astype(np.int64)
    diff = np.abs(got - want.astype(np.int64))
    res.check("loudness pcm16 vs numpy candle", diff.max() <= 1 and np.mean(diff > 0) < 0.01,
              f"max diff {diff.max()} LSB, {np.mean(diff > 0) * 100:.3f}% differ")
    l_in = ref.loudness_lufs(x, 24000)
    l_out = ref.loudness_lufs((pcm[:, 0]).astype(np.float32), 24000)
    res.check("loudness measurable", l_in is not None and l_out is not None, f"{l_in} -> {l_out}")
    if l_in is not None and l_out is not None:
        # tanh compresses the peaks, so the result lands near but below -14 LUFS
        res.check("loudness near -14 LUFS", -16.0 < l_out < -13.0, f"{l_in:.2f} -> {l_out:.2f} LUFS")


def error_cases(args, res):
    d = os.path.join(args.workdir, "err")
    cfg = ref.write_tiny_encodec(d, seed=11)
    out = os.path.join(args.workdir, "err.wav")
    cases = [
        ("code out of range", d, [[cfg["codebook_size"]] * 4] * 8, "outside"),
        ("too many codebooks", d, ref.random_codes(9, 4, cfg["codebook_size"]), "codebooks"),
        ("ragged codes", d, [[1, 2, 3], [1, 2]], "row 1"),
        ("negative code", d, [[-1, 2]], "codes[0][0]"),
        ("missing directory", os.path.join(args.workdir, "nope"), [[1]], "nope"),
    ]
    for name, md, codes, needle in cases:
        r = decode_cli(args, md, codes, out)
        res.check("error: " + name, r.returncode != 0 and needle in r.stderr and "Traceback" not in r.stderr,
                  r.stderr.strip()[-200:])
    # A checkpoint with a tensor missing and one with a wrong shape.
    sd = safetensors_io.load_dir(d)
    for name, mutate, needle in [
        ("missing tensor", lambda t: t.pop("decoder.layers.0.conv.weight_v"), "decoder.layers.0.conv"),
        ("wrong shape", lambda t: t.__setitem__("decoder.layers.1.lstm.weight_hh_l0",
                                                torch.zeros(3, 3)), "weight_hh_l0"),
    ]:
        bad = os.path.join(args.workdir, "bad_" + name.replace(" ", "_"))
        os.makedirs(bad, exist_ok=True)
        t = dict(sd)
        mutate(t)
        safetensors_io.save_dir(t, bad)
        with open(os.path.join(d, "config.json")) as f, open(os.path.join(bad, "config.json"), "w") as g:
            g.write(f.read())
        r = decode_cli(args, bad, [[1, 2]], out)
        res.check("error: " + name, r.returncode != 0 and needle in r.stderr, r.stderr.strip()[-200:])
    # A config with fewer LSTM layers than the weights: refused, not run without them.
    bad = os.path.join(args.workdir, "bad_lstm_layers")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(d, bad)
    with open(os.path.join(bad, "config.json")) as f:
        cfg = json.load(f)
    cfg["num_lstm_layers"] = 0
    with open(os.path.join(bad, "config.json"), "w") as f:
        json.dump(cfg, f)
    r = decode_cli(args, bad, [[1, 2]], out)
    res.check("error: fewer LSTM layers in the config", r.returncode != 0 and
              "weight_ih_l0' is not used" in r.stderr, r.stderr.strip()[-200:])
    # Bad JSON
    cpath = os.path.join(args.workdir, "bad.json")
    with open(cpath, "w") as f:
        f.write("{\"codes\": [[1, 2,")
    r = run([args.cachet, "codec-decode", "--encodec", d, "--codes", cpath, "-o", out])
    res.check("error: bad json", r.returncode != 0 and "bad.json" in r.stderr, r.stderr.strip()[-200:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)
    res = Results()
    for i, (name, overrides, style, dtype, shapes) in enumerate(CASES):
        compare_case(args, res, name, overrides, style, dtype, shapes, seed=i + 1)
    for i, (name, overrides, style, dtype, shapes, piece) in enumerate(PIECE_CASES):
        compare_case(args, res, name, overrides, style, dtype, shapes, seed=50 + i, piece=piece)
    loudness_case(args, res)
    error_cases(args, res)
    print(f"\n{res.passed} passed, {len(res.failed)} failed")
    if res.failed:
        print("failed: " + ", ".join(res.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
