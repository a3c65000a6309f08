#!/usr/bin/env python3
"""`cachet tts` end to end on a tiny random METAVOICE_DIR (tests/reference/make_tiny_metavoice.py)
against the PyTorch pipeline (tests/reference/metavoice_pipeline.py).

Checks: greedy (--temp 0) text -> WAV gives exactly the reference's 8 x T codes and, within
tolerance, its waveform (EnCodec + loudness), with a token limit and with the whole stage-1
context (stage-2 window cut); guidance and the speaker (.safetensors embedding, .wav through the
speaker encoder) change the codes as in the reference; greedy and seeded runs are reproducible,
different seeds differ; --dump-codes / --codes round trip to the same WAV, also with --encodec
alone; `cachet convert` of the directory to GGUF (F32: same codes; Q8_0: runs) and of
speaker_encoder.pt to safetensors; clear errors for empty, non-Latin-1 and too long text, bad
speaker files, missing files and bad codes.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import encodec  # noqa: E402
import make_tiny_metavoice  # noqa: E402
import metavoice_pipeline as ref  # noqa: E402
import safetensors_io  # noqa: E402
import speaker_encoder  # noqa: E402

FAILURES = []
TEXT = "hi how are you today"


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg)
    return cond


def run(cachet, args):
    r = subprocess.run([cachet] + args, capture_output=True, timeout=600)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def tts(cachet, args, what):
    if "-t" not in args:
        args = ["-t", "1"] + args
    rc, out, err = run(cachet, ["tts"] + args)
    check(rc == 0, f"{what}: exit {rc}: {err[-800:]}")
    return rc, err


def load_codes(path):
    with open(path) as f:
        return json.load(f)["codes"]


def wav_samples(path):
    x, rate, _, _ = encodec.read_wav(path)
    return x[:, 0], rate


def expect_error(cachet, args, needle, what):
    rc, _, err = run(cachet, args)
    ok = rc != 0 and needle.lower() in err.lower() and "cachet: error:" in err
    check(ok, f"{what}: expected an error mentioning '{needle}', got exit {rc}: {err[-500:]}")


def write_wav16(path, x, rate):
    pcm = np.clip(np.round(np.asarray(x) * 32767.0), -32768, 32767).astype("<i2").tobytes()
    hdr = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVE"
    hdr += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    hdr += b"data" + struct.pack("<I", len(pcm))
    with open(path, "wb") as f:
        f.write(hdr + pcm)


def compare_run(cachet, d, wd, name, text, extra, ref_kwargs, tol=2e-3):
    """Greedy C++ run vs the reference: codes equal, waveform close. Returns the codes."""
    codes_path = os.path.join(wd, name + ".json")
    wav_path = os.path.join(wd, name + ".wav")
    rc, err = tts(cachet, ["-m", d, "-p", text, "-o", wav_path, "--temp", "0", "--float",
                           "--dump-codes", codes_path] + extra, name)
    if rc != 0:
        return None
    got = load_codes(codes_path)
    seq, want = ref.synthesize_codes(d, text, **ref_kwargs)
    check(len(got) == 8, f"{name}: {len(got)} codebooks")
    if not check(got == want, f"{name}: codes differ from the reference "
                 f"({len(got[0])} vs {len(want[0])} frames; first row {got[0][:12]} vs {want[0][:12]})"):
        return got
    y, rate = wav_samples(wav_path)
    check(rate == 24000, f"{name}: rate {rate}")
    yr = ref.decode_codes(d, want)
    check(len(y) == len(yr) == 320 * len(want[0]),
          f"{name}: {len(y)} samples, reference {len(yr)}, frames {len(want[0])}")
    if len(y) == len(yr):
        err_max = float(np.max(np.abs(y - yr)))
        check(err_max < tol, f"{name}: waveform differs from the reference by {err_max}")
        check(float(np.max(np.abs(y))) > 1e-3, f"{name}: silent output")
    check("audio:" in err and "real time" in err, f"{name}: no summary line: {err[-300:]}")
    print(f"{name}: {len(got[0])} frames, stage-1 sequence {len(seq)} tokens: ok")
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    cachet, wd = args.cachet, args.workdir
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(wd)
    torch.set_num_threads(1)  # tiny models: threads only add overhead
    d = make_tiny_metavoice.write_tiny_metavoice(os.path.join(wd, "mv"), seed=3)

    # 1. Greedy against the reference: a token limit; then the whole context.
    base = compare_run(cachet, d, wd, "greedy", TEXT, ["-n", "240"], dict(max_tokens=240))
    compare_run(cachet, d, wd, "greedy_full", "The quick brown fox, jumps over the lazy dog!",
                [], dict())
    # Guidance changes the mix; g = 1 is the conditioned row alone.
    g1 = compare_run(cachet, d, wd, "guidance1", TEXT, ["-n", "120", "--guidance", "1"],
                     dict(max_tokens=120, guidance=1.0))
    # Another speaker embedding from a .safetensors file.
    g = torch.Generator().manual_seed(77)
    spk = torch.randn(256, generator=g)
    spk = spk / spk.norm()
    spk_path = os.path.join(wd, "voice.safetensors")
    safetensors_io.save_file({"spk_emb": spk.reshape(1, 256).float()}, spk_path)
    sp = compare_run(cachet, d, wd, "speaker_st", TEXT, ["-n", "120", "--speaker", spk_path],
                     dict(max_tokens=120, spk=spk.double()))
    if base is not None and sp is not None:
        check(sp[0][:40] != base[0][:40], "a different speaker gave the same codes")
    if base is not None and g1 is not None:
        check(g1[0][:40] != base[0][:40], "guidance 1 gave the same codes as guidance 3")
    # The same embedding stored as float64 under "spk_emb" (as numpy saves it) gives the same codes.
    spk64 = os.path.join(wd, "voice64.safetensors")
    safetensors_io.save_file({"spk_emb": spk.reshape(1, 256).double()}, spk64)
    sp64 = compare_run(cachet, d, wd, "speaker_st64", TEXT, ["-n", "120", "--speaker", spk64],
                       dict(max_tokens=120, spk=spk.double()))
    if sp is not None and sp64 is not None:
        check(sp64[0] == sp[0], "a float64 spk_emb gave other codes than the float32 one")

    # A reference recording through the speaker encoder (16 kHz, 3 s of tones and noise).
    rng = np.random.default_rng(5)
    t = np.arange(48000) / 16000.0
    voice = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) + 0.05 * rng.standard_normal(t.size)
    voice_wav = os.path.join(wd, "voice.wav")
    write_wav16(voice_wav, voice, 16000)
    x16, _, _, _ = encodec.read_wav(voice_wav)
    state = safetensors_io.load_file(os.path.join(d, "speaker_encoder.safetensors"))
    emb = speaker_encoder.embed(state, x16[:, 0].astype(np.float32))
    compare_run(cachet, d, wd, "speaker_wav", TEXT, ["-n", "120", "--speaker", voice_wav],
                dict(max_tokens=120, spk=torch.tensor(emb, dtype=torch.float64)))

    # 2. Reproducibility: greedy twice; the same seed twice; another seed.
    def wav_bytes(name, extra):
        p = os.path.join(wd, name + ".wav")
        c = os.path.join(wd, name + ".json")
        tts(cachet, ["-m", d, "-p", TEXT, "-o", p, "-n", "200", "--dump-codes", c] + extra, name)
        with open(p, "rb") as f:
            data = f.read()
        return data, load_codes(c) if os.path.exists(c) else None

    a, _ = wav_bytes("greedy_a", ["--temp", "0"])
    b, _ = wav_bytes("greedy_b", ["--temp", "0", "--seed", "99", "-t", "2"])
    check(a == b, "greedy runs differ (another seed, another thread count)")
    # --profile: the same samples, and stage 1's phases on stderr, each product with its rate
    p = os.path.join(wd, "greedy_profile.wav")
    _, err = tts(cachet, ["-m", d, "-p", TEXT, "-o", p, "-n", "200", "--temp", "0", "--profile"],
                 "profile")
    with open(p, "rb") as f:
        check(f.read() == a, "--profile changed the samples")
    lines = err.splitlines()
    check(any(re.fullmatch(r"profile of stage 1 \([0-9]+ steps, the prompt's pass included\):", l)
              for l in lines), f"--profile heading: {err[-800:]}")
    rows = [re.fullmatch(r"profile: (.+): [0-9.]+ ms per step \([0-9.]+%\)(, [0-9.]+ GB/s)?", l)
            for l in lines if l.startswith("profile: ")]
    named = {m.group(1): m.group(2) for m in rows if m}
    check(rows and all(rows) and named.get("mlp w2") and named.get("attention wqkv")
          and "outside the phases" in named, f"--profile lines: {err[-800:]}")
    s1, c1 = wav_bytes("seed1_a", ["--seed", "1"])
    s1b, c1b = wav_bytes("seed1_b", ["--seed", "1", "-t", "2"])
    s2, c2 = wav_bytes("seed2", ["--seed", "2"])
    check(s1 == s1b and c1 == c1b, "the same seed gave different outputs")
    check(c1 != c2, "different seeds gave the same codes")
    check(c1 != load_codes(os.path.join(wd, "greedy_a.json")), "sampling gave the greedy codes")
    print("reproducibility: ok")

    # 3. --codes round trip: the dumped codes decode to the same WAV.
    rt = os.path.join(wd, "roundtrip.wav")
    tts(cachet, ["-m", d, "--codes", os.path.join(wd, "seed1_a.json"), "-o", rt], "codes")
    with open(rt, "rb") as f:
        check(f.read() == s1, "--codes did not reproduce the synthesized WAV")
    rt2 = os.path.join(wd, "roundtrip2.wav")
    tts(cachet, ["--encodec", os.path.join(d, "encodec_24khz"), "--codes",
                 os.path.join(wd, "seed1_a.json"), "-o", rt2], "codes --encodec")
    with open(rt2, "rb") as f:
        check(f.read() == s1, "--codes with --encodec did not reproduce the synthesized WAV")
    # Without loudness normalisation: the raw EnCodec output of the reference.
    raw = os.path.join(wd, "raw.wav")
    tts(cachet, ["-m", d, "--codes", os.path.join(wd, "greedy.json"), "-o", raw, "--float",
                 "--no-loudness"], "codes raw")
    if os.path.exists(raw) and os.path.exists(os.path.join(wd, "greedy.json")):
        y, _ = wav_samples(raw)
        yr = encodec.decode(os.path.join(d, "encodec_24khz"), load_codes(os.path.join(wd, "greedy.json")))[0]
        check(len(y) == len(yr) and float(np.max(np.abs(y - yr))) < 1e-3,
              "raw EnCodec output differs from the reference")
    print("codes round trip: ok")

    # 4. convert: the directory's stage 1 to GGUF; speaker_encoder.pt to safetensors.
    dq = os.path.join(wd, "mv_gguf")
    shutil.copytree(d, dq)
    os.remove(os.path.join(dq, "first_stage.safetensors"))
    rc, _, err = run(cachet, ["convert", d, "-o", os.path.join(dq, "first_stage_f32.gguf"),
                              "--type", "F32", "-q"])
    if check(rc == 0, f"convert METAVOICE_DIR: {err[-500:]}"):
        c = os.path.join(wd, "gguf.json")
        tts(cachet, ["-m", dq, "-p", TEXT, "-o", os.path.join(wd, "gguf.wav"), "--temp", "0",
                     "-n", "240", "--dump-codes", c], "gguf f32")
        if base is not None and os.path.exists(c):
            check(load_codes(c) == base, "the F32 GGUF stage 1 gave other codes")
        # Without config.json, the configs the GGUF carries (the tiny model's are not the
        # released ones) load the same model.
        os.remove(os.path.join(dq, "config.json"))
        c2 = os.path.join(wd, "gguf_noconfig.json")
        tts(cachet, ["-m", dq, "-p", TEXT, "-o", os.path.join(wd, "gguf_noconfig.wav"),
                     "--temp", "0", "-n", "240", "--dump-codes", c2], "gguf f32 without config.json")
        if base is not None and os.path.exists(c2):
            check(load_codes(c2) == base, "the GGUF's own configs gave other codes")
        shutil.copy(os.path.join(d, "config.json"), dq)
    dq8 = os.path.join(wd, "mv_q8")
    shutil.copytree(dq, dq8)
    os.remove(os.path.join(dq8, "first_stage_f32.gguf"))
    rc, _, err = run(cachet, ["convert", d, "-o", os.path.join(dq8, "first_stage_q8_0.gguf"),
                              "--type", "Q8_0", "-q"])
    if check(rc == 0, f"convert --type Q8_0: {err[-500:]}"):
        tts(cachet, ["-m", dq8, "-p", TEXT, "-o", os.path.join(wd, "q8.wav"), "--temp", "0",
                     "-n", "60"], "gguf q8_0")
    conv = os.path.join(wd, "spk_enc.safetensors")
    rc, _, err = run(cachet, ["convert", os.path.join(d, "speaker_encoder.pt"), "-o", conv])
    if check(rc == 0, f"convert speaker_encoder.pt: {err[-500:]}"):
        got = safetensors_io.load_file(conv)
        want = safetensors_io.load_file(os.path.join(d, "speaker_encoder.safetensors"))
        check(sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want),
              "converted speaker encoder differs from its state dict")
    print("convert: ok")

    # 5. Errors.
    out = os.path.join(wd, "err.wav")
    expect_error(cachet, ["tts", "-m", d, "-p", "  \n\t ", "-o", out], "empty", "empty text")
    expect_error(cachet, ["tts", "-m", d, "-p", "caf\u00e9 \u2122", "-o", out], "Latin-1",
                 "non-Latin-1 text")
    expect_error(cachet, ["tts", "-m", d, "-p", "hello world " * 300, "-o", out], "too long",
                 "text too long")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--speaker",
                          os.path.join(wd, "nope.wav")], "nope.wav", "missing speaker")
    junk = os.path.join(wd, "junk.wav")
    with open(junk, "wb") as f:
        f.write(b"RIFF\x10\x00\x00\x00WAVEjunkjunk")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--speaker", junk], "junk.wav",
                 "bad speaker wav")
    bad_spk = os.path.join(wd, "bad_spk.safetensors")
    safetensors_io.save_file({"spk_emb": torch.zeros(1, 100)}, bad_spk)
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--speaker", bad_spk], "256",
                 "wrong-size speaker embedding")
    txt = os.path.join(wd, "voice.txt")
    with open(txt, "w") as f:
        f.write("x")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--speaker", txt], "voice.txt",
                 "unsupported speaker file")
    for missing in ["second_stage.safetensors", "first_stage.meta.json", "spk_emb.safetensors",
                    "encodec_24khz"]:
        dm = os.path.join(wd, "mv_missing")
        shutil.rmtree(dm, ignore_errors=True)
        shutil.copytree(d, dm)
        p = os.path.join(dm, missing)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        expect_error(cachet, ["tts", "-m", dm, "-p", TEXT, "-o", out], missing,
                     f"missing {missing}")
    expect_error(cachet, ["tts", "-m", os.path.join(wd, "nowhere"), "-p", TEXT, "-o", out],
                 "nowhere", "missing directory")
    bad_codes = os.path.join(wd, "bad_codes.json")
    with open(bad_codes, "w") as f:
        json.dump({"codes": [[1, 2, 3]] * 7 + [[1, 2, 1024]]}, f)
    expect_error(cachet, ["tts", "-m", d, "--codes", bad_codes, "-o", out], "1024", "code 1024")
    with open(bad_codes, "w") as f:
        json.dump({"codes": [[1, 2, 3]] * 7 + [[1, 2]]}, f)
    expect_error(cachet, ["tts", "-m", d, "--codes", bad_codes, "-o", out], "bad_codes.json",
                 "ragged codes")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--top-p", "0"], "top-p",
                 "top-p 0")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "--codes", bad_codes, "-o", out], "not both",
                 "text and codes")
    # Outputs that are inputs, audio too long for the speaker encoder, empty codes.
    voice = os.path.join(wd, "voice_in.wav")
    write_wav16(voice, np.zeros(400), 1)  # 400 samples at 1 Hz: 400 s
    before = open(voice, "rb").read()
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", voice, "--speaker", voice],
                 "is an input", "output onto the speaker file")
    check(open(voice, "rb").read() == before, "the speaker file was changed")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--dump-codes", out],
                 "-o and as --dump-codes", "the same file twice")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", os.path.join(d, "spk_emb.safetensors")],
                 "a file of the input", "output into the model directory")
    expect_error(cachet, ["tts", "-m", d, "-p", TEXT, "-o", out, "--speaker", voice],
                 "at most 300 s", "speaker audio too long")
    # Outputs beside an input file are fine when they are not inputs: speaker-embed twice.
    enc_dir = os.path.join(wd, "enc")
    os.makedirs(enc_dir, exist_ok=True)
    shutil.copy(os.path.join(d, "speaker_encoder.safetensors"), enc_dir)
    again = os.path.join(enc_dir, "me.safetensors")
    for i in range(2):
        rc, _, err = run(cachet, ["speaker-embed", "-m", os.path.join(enc_dir,
                                  "speaker_encoder.safetensors"), voice_wav, "-o", again])
        check(rc == 0, f"speaker-embed beside its encoder, run {i + 1}: {err[-300:]}")
    empty_codes = os.path.join(wd, "empty_codes.json")
    with open(empty_codes, "w") as f:
        json.dump({"codes": [[]]}, f)
    expect_error(cachet, ["codec-decode", "-m", os.path.join(d, "encodec_24khz"), "--codes",
                          empty_codes, "-o", out], "no codes", "codec-decode of empty codes")
    print("errors: ok")

    # `cachet bench -m METAVOICE_DIR`: stage 1's figure lines, and the spread of the timed steps
    # (positions after the 4-token prompt and the warm-up, before the final position), and with
    # --profile stage 1's phases, each product with its rate.
    rc, out, err = run(cachet, ["bench", "-m", d, "-t", "2", "-p", "4", "--decode-steps", "8",
                                "--profile"])
    if check(rc == 0, f"bench -m: exit {rc}: {err[-800:]}"):
        num = r"([0-9]+(?:\.[0-9]+)?)"
        step = [re.fullmatch(rf"stage1 step: {num} steps/s \(([0-9]+)% of roofline, {num} steps/s "
                             rf"at {num} GB/s\)", l) for l in out.splitlines()]
        check(sum(m is not None for m in step) == 1, f"bench -m: stage1 step line: {out}")
        spread = [re.fullmatch(rf"stage1 step time: median {num} ms \(([0-9]+)% of roofline\), "
                               rf"slowest {num} ms \(position ([0-9]+)\)", l)
                  for l in out.splitlines()]
        state = [re.fullmatch(rf"state: {num} MiB after ([0-9]+) positions", l)
                 for l in out.splitlines()]
        spread = [m for m in spread if m]
        state = [m for m in state if m]
        if check(len(spread) == 1 and len(state) == 1, f"bench -m: step time / state lines: {out}"):
            med, slow, pos = float(spread[0][1]), float(spread[0][3]), int(spread[0][4])
            share = int(spread[0][2])
            check(share > 0, f"bench -m: median step at {share}% of roofline")
            end = int(state[0][2])
            check(med <= slow, f"bench -m: median {med} above slowest {slow}")
            # 7 timed steps (the first of the 8 is not timed) end at the final position
            check(end - 7 <= pos < end, f"bench -m: slowest step at {pos}, state at {end}")
        prof = {}
        for l in out.splitlines():
            m = re.fullmatch(rf"profile: (.+): {num} ms per step \({num}%\)(?:, {num} GB/s)?", l)
            if m:
                prof[m.group(1)] = m.group(4)
        for phase in ("attention wqkv", "attention wo", "mlp w1, w3", "mlp w2", "output head"):
            check(prof.get(phase) is not None, f"bench -m --profile: no rate for '{phase}': {out}")
        check("attention" in prof and prof["attention"] is None and "outside the phases" in prof,
              f"bench -m --profile: attention / outside lines: {out}")
    print("bench: ok")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)
    print("test_tts: all checks passed")


if __name__ == "__main__":
    main()
