"""RecurrentGemma: the cachet engine against the PyTorch reference.

    python3 test_recurrent_gemma.py --cachet BIN --workdir DIR [--quick]

Builds tiny random models (tests/reference/make_tiny_rg.py) in DIR and compares the logits
of every position printed by `BIN logits` with tests/reference/recurrent_gemma.py (computed in
float64) on a token sequence longer than 3 attention windows, for the f32, bf16 and
sharded/untied safetensors models, for every prefill mode, and for GGUF files of every
weight type made by `BIN convert` (the reference then runs on the dequantized weights read
back with `BIN inspect`). Also checks the error paths of `logits`.

Error measure: err = max |engine - reference| / S with S = max(1, std(reference logits))
(the logit scale; the tiny models have S ~ 2 and |logits| up to ~25 under the cap of 30).

CLI subcommands that do not exist yet are reported as SKIP; everything that runs must pass.
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

import make_tiny_rg  # noqa: E402
import safetensors_io  # noqa: E402
from harness import Results, run  # noqa: E402
from recurrent_gemma import Config, RecurrentGemma, expected_shapes  # noqa: E402

# f32 engine vs f64 reference. Reference f32 vs f64 differs by ~4e-6 abs on these models; the
# engine's different summation order and vectorised transcendental functions stay well below.
TOL_F32 = 1e-4
# bf16 weights: on AVX-512 the matrix products take the arithmetic that matmul_path() chose
# (kernels.h): activations rounded to bf16 (vdpbf16ps, as a bf16 GEMM does) when a row is a
# whole number of 32-blocks, ~1e-2 here, or bf16 weights times f32 activations by FMA, ~1e-6.
# Steps and prefills take the same one. With FMA (and on AMX tiles, where the steps run on the
# prefill's own tiles) they agree within ~1e-6. With vdpbf16ps the steps' kernel sums in
# another order than the prefill's, ~1e-6 apart, and now and then that moves an activation
# across a bf16 rounding boundary: one bf16 step (2^-8 relative) in one value, measured as
# 7e-4 at one position of tiny_bf16 on a host that chose this path. TOL_BF16_MODES bounds that;
# the same model with CACHET_MATMUL=f32 holds the modes to TOL_MODES.
TOL_BF16 = 0.05
TOL_BF16_MODES = 5e-3
# Two prefill modes of the engine against each other.
TOL_MODES = 1e-4

# Quantized GGUF vs the reference on the dequantized weights. The weights are identical
# (dequantization is exact), so the difference comes from the engine rounding activations to
# 8 bits (Q8_0 blocks of 32 / Q8_K blocks of 256) for the integer dot products: ~1/254 of the
# block maximum on every matmul input, accumulated over the layers and carried by the
# recurrence. Measured on tiny256 (53 tokens, err as defined above):
#   prefill: 1.0e-2 .. 1.3e-2 for every integer type;
#   step (matrix-vector path): Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 2.4e-2 .. 2.7e-2 (32-blocks),
#   Q2_K Q3_K Q4_K Q5_K Q6_K 3.7e-2 .. 4.2e-2 (256-blocks);
#   F16 ~3e-6 in both modes (f32 activations); BF16 ~1e-2 in both (bf16 products).
# Rounding every matmul input of the reference the same way gives 2.7e-2 (blocks of 32) and
# 3.9e-2 (blocks of 256), so these are the expected sizes. Bounds: ~2.6x the largest.
QUANT_TOL = {t: 0.07 for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")}
QUANT_TOL.update({t: 0.1 for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")})
QUANT_TOL.update({"F32": 1e-4, "F16": 1e-4, "BF16": TOL_BF16})
QUANT_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"]
BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "F16": 1, "BF16": 1, "F32": 1}
for _t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
    BLOCK[_t] = 256


def has_command(cachet, sub):
    if not os.path.exists(cachet):
        return False
    rc, out, err = run([cachet, sub, "--help"], timeout=30)
    return rc == 0


def engine_logits(cachet, model, tokens, mode=None, last=False, env=None):
    cmd = [cachet, "logits", "-m", model, "--tokens", ",".join(str(t) for t in tokens)]
    if mode:
        cmd += ["--mode", mode]
    if last:
        cmd += ["--last"]
    rc, out, err = run(cmd, env=env)
    if rc != 0:
        return None, f"exit {rc}: {err.strip()[-400:]}"
    try:
        j = json.loads(out)
        lg = torch.tensor(j["logits"], dtype=torch.float64)
        if j.get("tokens") != list(tokens):
            return None, "the 'tokens' field differs from the input"
        return lg, ""
    except (ValueError, KeyError, TypeError) as e:
        return None, f"bad JSON output: {e}: {out[:200]}"


def scaled_err(a, ref):
    s = max(1.0, ref.std().item())
    return (a - ref).abs().max().item() / s


def test_sequence(vocab, window, seed=1):
    g = torch.Generator().manual_seed(seed)
    n = 3 * window + 5
    return torch.randint(4, vocab, (n,), generator=g).tolist()


# ------------------------------------------------------------------ reference self-checks


def reference_self_checks(res, workdir):
    """Checks of the reference itself (no engine needed)."""
    d = os.path.join(workdir, "selfcheck")
    make_tiny_rg.make("tiny", d, seed=3)
    m64 = RecurrentGemma.load(d, torch.float64)
    m32 = RecurrentGemma.load(d, torch.float32)
    toks = test_sequence(m64.cfg.vocab_size, m64.cfg.attention_window_size)
    ref = m64.logits(toks)
    res.check("ref.f32_vs_f64", scaled_err(m32.logits(toks).double(), ref) < 2e-5)
    par = m64.logits(toks, scan="parallel")
    res.check("ref.parallel_scan", scaled_err(par, ref) < 1e-10)
    pre = m64.logits(toks[:11])
    res.check("ref.causal_prefix", scaled_err(pre, ref[:11]) < 1e-12)
    # safetensors round trip, bf16 bit pattern kept.
    w = safetensors_io.load_dir(d)
    safetensors_io.save_dir({k: v.to(torch.bfloat16) for k, v in w.items()}, d + "_rt", shards=2)
    w2 = safetensors_io.load_dir(d + "_rt")
    ok = all(torch.equal(w[k].to(torch.bfloat16), w2[k]) for k in w)
    res.check("ref.safetensors_roundtrip", ok and set(w) == set(w2))
    # The window: query t sees keys t-W..t (W+1 keys). Perturb the input of one position at a
    # time and watch the output of an attention block at the last position.
    from recurrent_gemma import local_attention, _sub

    cfg = m64.cfg
    W = cfg.attention_window_size
    att = _sub(m64.weights, "model.layers.2.temporal_block.")
    x = torch.randn(1, 2 * W, cfg.hidden_size, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    base = local_attention(x, att, cfg)[0, -1]
    T = x.shape[1]
    seen = []
    for p in range(T):
        x2 = x.clone()
        x2[0, p] += 1.0
        seen.append(bool((local_attention(x2, att, cfg)[0, -1] - base).abs().max() > 1e-12))
    res.check("ref.window_w_plus_1", seen == [p >= T - 1 - W for p in range(T)], f"(W={W})")


# ------------------------------------------------------------------ engine checks


def compare_model(res, cachet, name, model_dir, ref_model, tol, modes, toks, mode_tol=TOL_MODES,
                  env=None):
    ref = ref_model.logits(toks)
    outs = {}
    for mode in modes:
        lg, why = engine_logits(cachet, model_dir, toks, mode, env=env)
        label = f"{name}.{mode or 'default'}"
        if lg is None:
            res.check(label, False, why)
            continue
        if lg.shape != ref.shape:
            res.check(label, False, f"shape {tuple(lg.shape)} vs {tuple(ref.shape)}")
            continue
        e = scaled_err(lg, ref)
        res.check(label, e <= tol, f"err={e:.2e} tol={tol:.0e}")
        outs[mode] = lg
    base = modes[0]
    if base in outs:
        for mode in modes[1:]:
            if mode in outs:
                e = scaled_err(outs[mode], outs[base])
                res.check(f"{name}.{mode}_vs_{base}", e <= mode_tol, f"err={e:.2e}")
    return ref


def engine_checks(res, cachet, workdir, quick):
    models = os.path.join(workdir, "models")
    tiny = make_tiny_rg.make("tiny", os.path.join(models, "tiny"), seed=0)
    ref_tiny = RecurrentGemma.load(tiny, torch.float64)
    cfg = ref_tiny.cfg
    toks = test_sequence(cfg.vocab_size, cfg.attention_window_size)
    modes = ["prefill", "step", "chunk:3", "chunk:7"]
    ref = compare_model(res, cachet, "tiny_f32", tiny, ref_tiny, TOL_F32, modes, toks)

    # --last: one row, the last position.
    lg, why = engine_logits(cachet, tiny, toks, "prefill", last=True)
    if lg is None:
        res.check("tiny_f32.last", False, why)
    else:
        ok = lg.shape == (1, cfg.vocab_size) and scaled_err(lg[0], ref[-1]) <= TOL_F32
        res.check("tiny_f32.last", ok, f"shape={tuple(lg.shape)}")
    # --tokens-file: a JSON array or ids separated by white space, also from standard input
    tf = os.path.join(workdir, "tokens.json")
    with open(tf, "w") as f:
        json.dump(toks, f)
    want_out = run([cachet, "logits", "-m", tiny, "--tokens", ",".join(map(str, toks))])[1]
    got_out = run([cachet, "logits", "-m", tiny, "--tokens-file", tf])[1]
    res.check("tiny_f32.tokens_file", got_out == want_out and len(want_out) > 0, got_out[:120])
    rc, out, err = run([cachet, "logits", "-m", tiny, "--tokens-file", "-"],
                       input=" \n".join(map(str, toks)))
    res.check("tiny_f32.tokens_file_stdin", rc == 0 and out == want_out, err[:200])
    # A one-token sequence and a sequence shorter than the conv width.
    for n in (1, 2):
        lg, why = engine_logits(cachet, tiny, toks[:n])
        ok = lg is not None and lg.shape == ref[:n].shape and scaled_err(lg, ref[:n]) <= TOL_F32
        res.check(f"tiny_f32.len{n}", ok, why)

    # bf16 safetensors: the reference runs on the bf16 values upcast.
    bf = make_tiny_rg.make("tiny", os.path.join(models, "tiny_bf16"), dtype="bf16", seed=0)
    bf_ref = RecurrentGemma.load(bf, torch.float64)
    compare_model(res, cachet, "tiny_bf16", bf, bf_ref, TOL_BF16, ["prefill", "step"], toks,
                  mode_tol=TOL_BF16_MODES)
    compare_model(res, cachet, "tiny_bf16_fma", bf, bf_ref, TOL_BF16, ["prefill", "step"], toks,
                  mode_tol=TOL_MODES, env={"CACHET_MATMUL": "f32"})

    # Sharded, separate lm_head, `_block_types` spelling.
    sh = make_tiny_rg.make("tiny", os.path.join(models, "tiny_sharded"), shards=3, seed=7,
                           untied=True, pattern_key="_block_types")
    compare_model(res, cachet, "tiny_sharded_untied", sh, RecurrentGemma.load(sh, torch.float64),
                  TOL_F32, ["prefill", "chunk:5"], toks)

    # Every contraction dim a multiple of 256.
    t256 = make_tiny_rg.make("tiny256", os.path.join(models, "tiny256"), seed=0)
    r256 = RecurrentGemma.load(t256, torch.float64)
    toks256 = test_sequence(r256.cfg.vocab_size, r256.cfg.attention_window_size)
    compare_model(res, cachet, "tiny256_f32", t256, r256, TOL_F32,
                  ["prefill", "step"] if quick else ["prefill", "step", "chunk:7"], toks256)

    # A window of 300 keys on 605 tokens: the ring of keys and values wraps around twice, and
    # steps split each query's heads over the threads where a prefill does not.
    lw = make_tiny_rg.make("tiny_longwin", os.path.join(models, "tiny_longwin"), seed=5)
    rlw = RecurrentGemma.load(lw, torch.float64)
    compare_model(res, cachet, "tiny_longwin_f32", lw, rlw, TOL_F32, ["prefill", "step"],
                  test_sequence(rlw.cfg.vocab_size, 200))

    # Grouped-query attention (num_key_value_heads = 2): optional for the engine.
    gqa = make_tiny_rg.make("tiny_gqa", os.path.join(models, "tiny_gqa"), seed=0)
    rg = RecurrentGemma.load(gqa, torch.float64)
    tg = test_sequence(rg.cfg.vocab_size, rg.cfg.attention_window_size)
    lg, why = engine_logits(cachet, gqa, tg, "prefill")
    if lg is None:
        res.skip("tiny_gqa", f"engine rejects num_key_value_heads=2 ({why[:160]})")
    else:
        compare_model(res, cachet, "tiny_gqa", gqa, rg, TOL_F32, ["prefill", "step"], tg)

    # Error cases.
    rc, out, err = run([cachet, "logits", "-m", tiny, "--tokens", f"1,2,{cfg.vocab_size}"])
    res.check("error.token_out_of_range", rc != 0 and str(cfg.vocab_size) in err,
              f"rc={rc} stderr={err.strip()[:160]!r}")
    rc, out, err = run([cachet, "logits", "-m", tiny, "--tokens", ""])
    res.check("error.empty_tokens", rc != 0 and ("token" in err.lower() or "empty" in err.lower()),
              f"rc={rc} stderr={err.strip()[:160]!r}")
    rc, out, err = run([cachet, "logits", "-m", os.path.join(models, "does_not_exist"), "--tokens", "1"])
    res.check("error.missing_model", rc != 0 and len(err.strip()) > 0, f"rc={rc}")
    # Weights that make a logit NaN: an error naming the position, never a bare NaN in the JSON
    nan_dir = os.path.join(models, "tiny_nan")
    shutil.copytree(tiny, nan_dir, dirs_exist_ok=True)
    w = safetensors_io.load_file(os.path.join(nan_dir, "model.safetensors"))
    name = next(k for k in sorted(w) if k.endswith("mlp_block.down_proj.bias"))
    w[name] = w[name].clone()
    w[name][0] = float("nan")
    safetensors_io.save_file(w, os.path.join(nan_dir, "model.safetensors"))
    for extra, pos in (([], 0), (["--last"], 2)):
        rc, out, err = run([cachet, "logits", "-m", nan_dir, "--tokens", "2,5,7"] + extra)
        res.check(f"error.nan_logits{''.join(extra)}",
                  rc != 0 and "non-finite" in err and f"position {pos}" in err
                  and "nan" not in out.lower(), f"rc={rc} stderr={err.strip()[:160]!r}")


# ------------------------------------------------------------------ GGUF checks


def inspect_tensor(cachet, gguf, name):
    rc, out, err = run([cachet, "inspect", gguf, "--tensor", name, "--values"])
    if rc != 0:
        return None, f"inspect {name}: exit {rc}: {err.strip()[:200]}"
    try:
        j = json.loads(out)
        t = torch.tensor(j["values"], dtype=torch.float32).reshape(j["shape"])
        return (j.get("type"), t), ""
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return None, f"inspect {name}: bad JSON: {e}"


def gguf_checks(res, cachet, workdir, quick, measured):
    models = os.path.join(workdir, "models")
    ggdir = os.path.join(workdir, "gguf")
    os.makedirs(ggdir, exist_ok=True)
    cases = [("tiny256", t) for t in QUANT_TYPES]
    # tiny: no dim is a multiple of 256, so K-quants fall back to Q8_0 for every matrix.
    cases.append(("tiny", "Q4_K"))
    cases.append(("tiny", "Q4_0"))
    if quick:
        cases = [("tiny256", "Q8_0"), ("tiny256", "Q4_K"), ("tiny256", "BF16"), ("tiny", "Q4_K")]
    for preset, qtype in cases:
        src = os.path.join(models, preset)
        if not os.path.exists(os.path.join(src, "config.json")):
            make_tiny_rg.make(preset, src, seed=0)
        label = f"gguf.{preset}.{qtype}"
        out = os.path.join(ggdir, f"{preset}-{qtype}.gguf")
        rc, o, err = run([cachet, "convert", src, "-o", out, "--type", qtype], timeout=300)
        if rc != 0:
            res.check(label, False, f"convert exit {rc}: {err.strip()[:300]}")
            continue
        cfg = Config.load(src)
        weights = safetensors_io.load_dir(src)
        bad = ""
        for name, shape in expected_shapes(cfg).items():
            got, why = inspect_tensor(cachet, out, name)
            if got is None:
                bad = why
                break
            ttype, t = got
            if list(t.shape) != shape:
                bad = f"{name}: shape {list(t.shape)} vs {shape}"
                break
            if len(shape) != 2 or name.endswith("bias"):
                # Vectors, biases (the RG-LRU gate biases are 2-D) and the 3-D gates stay F32.
                if ttype != "F32" or not torch.equal(t, weights[name].float()):
                    bad = f"{name}: expected exact F32, got {ttype}"
                    break
            else:
                want = qtype if shape[1] % BLOCK[qtype] == 0 else "Q8_0"
                if ttype != want:
                    bad = f"{name}: type {ttype}, expected {want}"
                    break
            weights[name] = t
        if bad:
            res.check(label, False, bad)
            continue
        ref_model = RecurrentGemma(cfg, weights, torch.float64)
        toks = test_sequence(cfg.vocab_size, cfg.attention_window_size, seed=2)
        ref = ref_model.logits(toks)
        lg, why = engine_logits(cachet, out, toks, "prefill")
        if lg is None or lg.shape != ref.shape:
            res.check(label, False, why or f"shape {tuple(lg.shape)}")
            continue
        e = scaled_err(lg, ref)
        measured[f"{preset}.{qtype}"] = e
        res.check(label, e <= QUANT_TOL[qtype], f"err={e:.2e} tol={QUANT_TOL[qtype]:.3g}")
        if preset == "tiny256":
            # Step mode may take another kernel path (matrix-vector), with its own activation
            # rounding: both modes must be within the bound of the reference.
            lg2, why = engine_logits(cachet, out, toks, "step")
            if lg2 is None:
                res.check(label + ".step", False, why)
            else:
                e2 = scaled_err(lg2, ref)
                measured[f"{preset}.{qtype}.step"] = e2
                res.check(label + ".step", e2 <= QUANT_TOL[qtype],
                          f"err={e2:.2e} tol={QUANT_TOL[qtype]:.3g} (vs prefill {scaled_err(lg2, lg):.2e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cachet", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer quantized types and modes")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    torch.set_num_threads(1)
    t0 = time.time()
    res = Results()

    reference_self_checks(res, a.workdir)

    if not os.path.exists(a.cachet):
        res.check("cachet_binary_exists", False, a.cachet)
    elif not has_command(a.cachet, "logits"):
        res.skip("engine", "`cachet logits` is not available yet")
    else:
        engine_checks(res, a.cachet, a.workdir, a.quick)
        if has_command(a.cachet, "convert") and has_command(a.cachet, "inspect"):
            measured = {}
            gguf_checks(res, a.cachet, a.workdir, a.quick, measured)
            if measured:
                print("measured quantized errors: " + ", ".join(f"{k}={v:.2e}" for k, v in measured.items()))
        else:
            res.skip("gguf", "`cachet convert` / `cachet inspect` not available yet")

    dt = time.time() - t0
    print(f"\nrecurrent_gemma: {res.passed} passed, {len(res.failed)} failed, "
          f"{len(res.skipped)} skipped in {dt:.0f}s")
    if res.failed:
        print("failed: " + ", ".join(res.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
