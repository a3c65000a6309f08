"""MetaVoice GPT stages: the cachet engine against the PyTorch reference.

    python3 test_mv_gpt.py --cachet BIN --workdir DIR [--quick]

Builds tiny random METAVOICE_DIRs (tests/reference/metavoice_gpt.py) in DIR and compares the
logits printed by `BIN logits -m DIR` with the reference computed in float64:
  - stage 1 (both guidance rows, every position) for f32 and bf16 safetensors, a grouped-query
    variant, every prefill mode (prefill, step, chunk:N), and GGUF files whose matrices
    `BIN quantize` turned into Q8_0 / Q4_K / BF16 (the reference then runs on the dequantized
    weights read back with `BIN inspect`);
  - stage 2 (`--stage 2 --in FILE.json`): the released non-causal structure, and a causal
    configuration with a KV cache (tied heads, RMSNorm, SwiGLU, biases, speaker term from the end
    of text on) fed in every mode;
  - error paths.

Error measure: err = max |engine - reference| / S with S = max(1, std(reference logits)).
"""

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import torch  # noqa: E402

import metavoice_gpt as mv  # noqa: E402
import safetensors_io  # noqa: E402
from harness import Results, run  # noqa: E402

# f32 engine vs f64 reference (the reference in f32 differs from f64 by ~1e-6 here).
TOL_F32 = 1e-4
# Quantized and bf16 matrices vs the reference on the dequantized weights. The weights are
# identical (dequantization is exact); the difference comes from the kernels rounding the
# activations of their dot products: to bf16 (BF16 weights, and multi-row products of the
# other types, on CPUs with AVX-512 BF16) or to 8 bits per block (Q8_0 blocks of 32, Q8_K
# blocks of 256: the one-row path of the block types). BF16 models also cache keys and values
# in bf16 (queries rounded to bf16 for the scores), models of quantized blocks in int8 rows with
# a scale each (queries rounded to 16 bits). The test runs the reference again with the
# activations rounded each way, and the keys and values rounded as the engine's cache holds
# them, and bounds the engine's error by 2x the largest of those emulated errors (+1e-3).
# Measured on the tiny stage 1 (2 layers, dim 256, 40 tokens, logit std ~1; err as defined
# above):
#   emulated: bf16 2.2e-2, int8 blocks of 32 6.7e-2, blocks of 256 1.1e-1 (int8 cache);
#   engine: Q8_0 prefill 4.0e-2 step 7.8e-2; Q4_K prefill 4.1e-2 step 1.0e-1;
#   BF16 prefill 2.1e-2 step 2.1e-2.
QUANT_ROUNDING = {"Q8_0": ["bf16", ("int8", 32)], "Q4_K": ["bf16", ("int8", 256)], "BF16": ["bf16"]}
CACHE_ROUNDING = {"Q8_0": "i8", "Q4_K": "i8", "BF16": "bf16"}


def rounding_tolerance(ref_model, toks, spk, ways, ref, kv="bf16"):
    worst = 0.0
    ref_model.round_kv(kv)
    for how in ways:
        ref_model.round_activations(how)
        worst = max(worst, scaled_err(ref_model.logits(toks, spk), ref))
    ref_model.round_activations(None)
    ref_model.round_kv(False)
    return 2 * worst + 1e-3, worst


def scaled_err(a, ref):
    s = max(1.0, ref.std().item())
    return (a - ref).abs().max().item() / s


def stage1_engine(cachet, d, tokens, mode=None):
    cmd = [cachet, "logits", "-m", d, "--tokens", ",".join(str(t) for t in tokens)]
    if mode:
        cmd += ["--mode", mode]
    rc, out, err = run(cmd)
    if rc != 0:
        return None, f"exit {rc}: {err.strip()[-400:]}"
    try:
        j = json.loads(out)
        if j.get("tokens") != list(tokens):
            return None, "the 'tokens' field differs from the input"
        return torch.tensor(j["logits"], dtype=torch.float64), ""
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return None, f"bad JSON output: {e}: {out[:200]}"


def stage2_engine(cachet, d, tokens, workdir, mode=None):
    path = os.path.join(workdir, "stage2_in.json")
    with open(path, "w") as f:
        json.dump({"tokens": tokens}, f)
    cmd = [cachet, "logits", "-m", d, "--stage", "2", "--in", path]
    if mode:
        cmd += ["--mode", mode]
    rc, out, err = run(cmd)
    if rc != 0:
        return None, f"exit {rc}: {err.strip()[-400:]}"
    try:
        j = json.loads(out)
        return [torch.tensor(h, dtype=torch.float64) for h in j["logits"]], ""
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return None, f"bad JSON output: {e}: {out[:200]}"


def stage1_tokens(n, seed=1):
    """A stage-1 like sequence: text ids (2049..2560), end of text 2561, then audio tokens."""
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(2049, 2561, (n // 3,), generator=g).tolist() + [2561]
    audio = torch.randint(0, 2049, (n - len(text),), generator=g).tolist()
    return text + audio


def stage2_tokens(T, seed=2):
    """[h0, h1] as the pipeline builds them: text2 + c0 + [1024], [1024]*len(text2) + c1 + [1024],
    right-padded with 1024 to T."""
    g = torch.Generator().manual_seed(seed)
    text2 = torch.randint(1025, 1537, (5,), generator=g).tolist() + [1537]
    frames = (T - len(text2)) // 2
    c0 = torch.randint(0, 1024, (frames,), generator=g).tolist()
    c1 = torch.randint(0, 1024, (frames,), generator=g).tolist()
    h0 = text2 + c0 + [1024]
    h1 = [1024] * len(text2) + c1 + [1024]
    h0 += [1024] * (T - len(h0))
    h1 += [1024] * (T - len(h1))
    return [h0, h1]


# ------------------------------------------------------------------ reference self-checks


def reference_self_checks(res, workdir):
    d = os.path.join(workdir, "selfcheck")
    a1, a2, w1, w2, spk = mv.write_tiny_stages(d, seed=3)
    s64 = mv.Stage1(a1, w1, torch.float64)
    s32 = mv.Stage1(a1, w1, torch.float32)
    toks = stage1_tokens(30)
    ref = s64.logits(toks, spk)
    res.check("ref.stage1_f32_vs_f64", scaled_err(s32.logits(toks, spk).double(), ref) < 2e-5)
    steps = s64.logits(toks, spk, chunks=[7] + [1] * 10 + [13])
    res.check("ref.stage1_prefill_vs_steps", scaled_err(steps, ref) < 1e-10)
    # Row 1 is the unconditioned row: equal to a run without speaker.
    none = s64.logits(toks, None)
    res.check("ref.stage1_row1_unconditioned",
              scaled_err(ref[1], none[1]) < 1e-12 and scaled_err(ref[0], none[0]) > 1e-3)
    ref_a1 = mv.stage1_args()
    res.check("ref.stage1_released_ffn", ref_a1["intermediate_size"] == 5632 and ref_a1["head_dim"] == 128)
    # Stage 2: bidirectional (the first position depends on the last).
    st2 = mv.Stage2(a2, w2, torch.float64)
    t2 = stage2_tokens(40)
    base = st2.logits(t2, spk)
    t2b = [list(t2[0]), list(t2[1])]
    t2b[1][-1] = 3
    res.check("ref.stage2_bidirectional", (st2.logits(t2b, spk)[:, 0] - base[:, 0]).abs().max() > 1e-6)


# ------------------------------------------------------------------ engine checks


def compare_stage1(res, cachet, name, d, ref_model, spk, toks, tol, modes):
    ref = ref_model.logits(toks, spk)
    outs = {}
    for mode in modes:
        lg, why = stage1_engine(cachet, d, toks, mode)
        label = f"{name}.{mode}"
        if lg is None:
            res.check(label, False, why)
            continue
        if lg.shape != ref.shape:
            res.check(label, False, f"shape {tuple(lg.shape)} vs {tuple(ref.shape)}")
            continue
        e = scaled_err(lg, ref)
        res.check(label, e <= tol, f"err={e:.2e} tol={tol:.0e}")
        outs[mode] = (lg, e)
    return outs


def engine_stage1(res, cachet, workdir, quick):
    d = os.path.join(workdir, "mv_f32")
    a1, a2, w1, w2, spk = mv.write_tiny_stages(d, seed=0)
    ref_model = mv.Stage1(a1, w1, torch.float64)
    toks = stage1_tokens(40)
    modes = ["prefill", "step", "chunk:5"] if quick else ["prefill", "step", "chunk:3", "chunk:16"]
    compare_stage1(res, cachet, "stage1_f32", d, ref_model, spk, toks, TOL_F32, modes)
    # One token.
    compare_stage1(res, cachet, "stage1_f32.len1", d, ref_model, spk, toks[:1], TOL_F32, ["prefill"])

    bf = os.path.join(workdir, "mv_bf16")
    a1b, _, w1b, _, spkb = mv.write_tiny_stages(bf, seed=0, dtype="bf16")
    ref_bf = mv.Stage1(a1b, w1b, torch.float64)
    tol_bf, _ = rounding_tolerance(ref_bf, toks, spkb, ["bf16"], ref_bf.logits(toks, spkb))
    compare_stage1(res, cachet, "stage1_bf16", bf, ref_bf, spkb, toks, tol_bf, ["prefill", "step"])

    gq = os.path.join(workdir, "mv_gqa")
    a1g, _, w1g, _, spkg = mv.write_tiny_stages(gq, seed=5, stage1={"n_local_heads": 2, "n_layer": 3})
    compare_stage1(res, cachet, "stage1_gqa", gq, mv.Stage1(a1g, w1g, torch.float64), spkg, toks,
                   TOL_F32, ["prefill", "chunk:7"])

    # --last: each guidance row's last position, as in the full output
    full, why = stage1_engine(cachet, d, toks)
    rc, out, err = run([cachet, "logits", "-m", d, "--last", "--mode", "chunk:5", "--tokens",
                        ",".join(str(t) for t in toks)])
    ok = rc == 0 and full is not None
    if ok:
        last = torch.tensor(json.loads(out)["logits"], dtype=torch.float64)
        ok = (last.shape == (2, 1, full.shape[2])
              and scaled_err(last[:, 0], full[:, -1]) <= TOL_F32)
    res.check("stage1_last_is_the_last_row", ok, f"rc={rc} {err.strip()[:160]!r} {why}")

    # Errors.
    V = a1["vocab_size"]
    rc, out, err = run([cachet, "logits", "-m", d, "--tokens", f"1,2,{V}"])
    res.check("error.stage1_token_out_of_range", rc != 0 and str(V) in err, f"rc={rc} {err.strip()[:160]!r}")
    rc, out, err = run([cachet, "logits", "-m", d, "--tokens", ""])
    res.check("error.stage1_empty", rc != 0 and "empty" in err.lower(), f"rc={rc} {err.strip()[:160]!r}")
    too_long = ",".join(["5"] * (a1["block_size"] + 1))
    rc, out, err = run([cachet, "logits", "-m", d, "--tokens", too_long])
    res.check("error.stage1_block_size", rc != 0 and "block_size" in err, f"rc={rc} {err.strip()[:160]!r}")
    broken = os.path.join(workdir, "mv_broken")
    shutil.copytree(d, broken, dirs_exist_ok=True)
    w = dict(w1)
    del w["layers.1.attention.wo.weight"]
    safetensors_io.save_file(w, os.path.join(broken, "first_stage.safetensors"))
    rc, out, err = run([cachet, "logits", "-m", broken, "--tokens", "1,2"])
    res.check("error.stage1_missing_tensor", rc != 0 and "layers.1.attention.wo.weight" in err,
              f"rc={rc} {err.strip()[:160]!r}")
    os.remove(os.path.join(broken, "spk_emb.safetensors"))
    safetensors_io.save_file(w1, os.path.join(broken, "first_stage.safetensors"))
    rc, out, err = run([cachet, "logits", "-m", broken, "--tokens", "1,2"])
    res.check("error.stage1_missing_speaker", rc != 0 and "spk_emb" in err, f"rc={rc} {err.strip()[:160]!r}")
    return d, a1, w1, spk


def inspect_tensor(cachet, path, name):
    rc, out, err = run([cachet, "inspect", path, "--tensor", name, "--values"])
    if rc != 0:
        return None, f"inspect {name}: exit {rc}: {err.strip()[:200]}"
    try:
        j = json.loads(out)
        return (j.get("type"), torch.tensor(j["values"], dtype=torch.float32).reshape(j["shape"])), ""
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return None, f"inspect {name}: bad JSON: {e}"


def engine_stage1_gguf(res, cachet, workdir, src, a1, w1, spk, quick, measured):
    """F32 GGUF written here, matrices quantized by `cachet quantize`, loaded from a directory
    that has only first_stage_<type>.gguf for stage 1."""
    f32 = os.path.join(workdir, "first_stage_f32.gguf")
    mv.save_gguf_f32(w1, f32)
    toks = stage1_tokens(40, seed=4)
    types = ["Q8_0", "Q4_K"] if quick else ["Q8_0", "Q4_K", "BF16"]
    for qtype in types:
        label = f"stage1_gguf.{qtype}"
        d = os.path.join(workdir, f"mv_{qtype}")
        os.makedirs(d, exist_ok=True)
        for n in ("config.json", "spk_emb.safetensors", "second_stage.safetensors"):
            shutil.copy(os.path.join(src, n), os.path.join(d, n))
        out = os.path.join(d, f"first_stage_{qtype.lower()}.gguf")
        rc, o, err = run([cachet, "quantize", f32, out, qtype, "-q"], timeout=300)
        if rc != 0:
            res.check(label, False, f"quantize exit {rc}: {err.strip()[:300]}")
            continue
        weights, bad = {}, ""
        for name, shape in mv.stage1_shapes(a1).items():
            got, why = inspect_tensor(cachet, out, name)
            if got is None:
                bad = why
                break
            ttype, t = got
            if list(t.shape) != shape:
                bad = f"{name}: shape {list(t.shape)} vs {shape}"
                break
            want = "F32" if len(shape) == 1 else qtype
            if ttype != want:
                bad = f"{name}: type {ttype}, expected {want}"
                break
            weights[name] = t
        if bad:
            res.check(label, False, bad)
            continue
        ref_model = mv.Stage1(a1, weights, torch.float64)
        tol, emu = rounding_tolerance(ref_model, toks, spk, QUANT_ROUNDING[qtype],
                                      ref_model.logits(toks, spk), kv=CACHE_ROUNDING[qtype])
        measured[f"{qtype}.emulated"] = emu
        outs = compare_stage1(res, cachet, label, d, ref_model, spk, toks, tol, ["prefill", "step"])
        for mode, (lg, e) in outs.items():
            measured[f"{qtype}.{mode}"] = e


def engine_stage2(res, cachet, workdir, d, quick):
    st1, st2, spk = mv.load_stages(d)
    T = st2.a["block_size"]
    toks = stage2_tokens(T)
    ref = st2.logits(toks, spk)
    lg, why = stage2_engine(cachet, d, toks, workdir)
    if lg is None:
        res.check("stage2_noncausal", False, why)
    else:
        got = torch.stack(lg) if len({tuple(x.shape) for x in lg}) == 1 else None
        ok = got is not None and got.shape == ref.shape
        e = scaled_err(got, ref) if ok else float("inf")
        res.check("stage2_noncausal", ok and e <= TOL_F32,
                  f"err={e:.2e} shape={None if got is None else tuple(got.shape)} vs {tuple(ref.shape)}")
    # Shorter than the block (allowed by the engine; the pipeline always pads).
    short = [toks[0][:17], toks[1][:17]]
    lg, why = stage2_engine(cachet, d, short, workdir)
    ref_s = st2.logits(short, spk)
    ok = lg is not None and torch.stack(lg).shape == ref_s.shape
    res.check("stage2_noncausal.short", ok and scaled_err(torch.stack(lg), ref_s) <= TOL_F32, why)
    rc, out, err = run([cachet, "logits", "-m", d, "--stage", "2", "--in", os.path.join(workdir, "stage2_in.json"),
                        "--mode", "step"])
    res.check("error.stage2_noncausal_step", rc != 0 and "non-causal" in err, f"rc={rc} {err.strip()[:160]!r}")
    bad = [toks[0][:5], [1025] + toks[1][1:5]]
    lg, why = stage2_engine(cachet, d, bad, workdir)
    res.check("error.stage2_token_out_of_range", lg is None and "hierarchy 1" in why, why[:160])
    lg, why = stage2_engine(cachet, d, [toks[0][:5], toks[1][:4]], workdir)
    res.check("error.stage2_ragged", lg is None and "tokens" in why, why[:160])

    # Causal stage 2 with a KV cache (tied heads of sizes 1538 and 1025).
    cd = os.path.join(workdir, "mv_causal2")
    _, a2c, _, w2c, spkc = mv.write_tiny_stages(cd, seed=7, stage2=mv.TINY_STAGE2_CAUSAL)
    ref_c = mv.Stage2(a2c, w2c, torch.float64)
    Tc = 30
    tc = stage2_tokens(Tc, seed=8)
    idx = torch.tensor([tc], dtype=torch.long)
    ref_heads = [h[0] for h in ref_c.forward(idx, spkc)]
    for mode in (["prefill", "step"] if quick else ["prefill", "step", "chunk:4"]):
        lg, why = stage2_engine(cachet, cd, tc, workdir, mode)
        label = f"stage2_causal.{mode}"
        if lg is None:
            res.check(label, False, why)
            continue
        if [tuple(x.shape) for x in lg] != [tuple(x.shape) for x in ref_heads]:
            res.check(label, False, f"shapes {[tuple(x.shape) for x in lg]}")
            continue
        e = max(scaled_err(x, r) for x, r in zip(lg, ref_heads))
        res.check(label, e <= TOL_F32, f"err={e:.2e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    torch.set_num_threads(1)
    t0 = time.time()
    res = Results()
    reference_self_checks(res, a.workdir)
    if not os.path.exists(a.cachet):
        res.check("cachet_binary_exists", False, a.cachet)
    else:
        d, a1, w1, spk = engine_stage1(res, a.cachet, a.workdir, a.quick)
        measured = {}
        engine_stage1_gguf(res, a.cachet, a.workdir, d, a1, w1, spk, a.quick, measured)
        if measured:
            print("measured quantized errors: " + ", ".join(f"{k}={v:.2e}" for k, v in measured.items()))
        engine_stage2(res, a.cachet, a.workdir, d, a.quick)
    dt = time.time() - t0
    print(f"\nmv_gpt: {res.passed} passed, {len(res.failed)} failed, {len(res.skipped)} skipped in {dt:.0f}s")
    if res.failed:
        print("failed: " + ", ".join(res.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
