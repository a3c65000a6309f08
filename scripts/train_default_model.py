#!/usr/bin/python3
"""Train the small RecurrentGemma embedded as cachet's default model (see docs/default-model.md).

    /usr/bin/python3 scripts/train_default_model.py [--data FILE] [--out DIR] [--steps N]

1. Splits the text: first 90% of the characters for training, last 10% held out.
2. Trains a SentencePiece BPE tokenizer on the training part with `spm_train`
   (Gemma's special ids: pad 0, eos 1, bos 2, unk 3; byte fallback; newline is a piece).
3. Trains a RecurrentGemma with the forward pass of tests/reference/recurrent_gemma.py, with
   the RG-LRU scan in a parallel (cumulative-sum) form and the dense products as oneDNN
   convolutions, both asserted equal to the plain reference at start; windows of the
   training tokens, each starting with BOS.
4. Writes an HF directory (config.json, model.safetensors, tokenizer.model), and
   DIR-summary.json beside it, with the held-out perplexity computed by the reference on the
   written model: the whole held-out text as one sequence after BOS.

Everything is seeded; with the same torch build and thread count the run is reproducible.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import recurrent_gemma as rg  # noqa: E402
import safetensors_io  # noqa: E402

PAD, EOS, BOS, UNK = 0, 1, 2, 3


# ----------------------------------------------------------------------------- fast ops
# Debian's torch links the reference (netlib) BLAS, so x @ w.t() runs at ~1 GFLOP/s; oneDNN
# convolutions are several times faster forward and backward. Training swaps the reference's
# dense and block-diagonal products for 1x1 convolutions (the same maths; checked at start).


def conv_linear(x, w, b=None):
    shape = x.shape
    n, k = x.numel() // shape[-1], shape[-1]
    xi = x.reshape(n, k).t().reshape(1, k, n, 1)
    y = F.conv2d(xi, w[:, :, None, None], b)  # [1, out, n, 1]
    return y.reshape(w.shape[0], n).t().reshape(*shape[:-1], w.shape[0])


def conv_block_diag_gate(x, w, b, heads):
    # w [H, in, out] -> grouped 1x1 conv weight [H*out, in, 1, 1].
    shape = x.shape
    n, r = x.numel() // shape[-1], shape[-1]
    wc = w.transpose(1, 2).reshape(r, r // heads)[:, :, None, None]
    xi = x.reshape(n, r).t().reshape(1, r, n, 1)
    y = F.conv2d(xi, wc, b.reshape(-1), groups=heads)
    return y.reshape(r, n).t().reshape(shape)


def check_fast_ops():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 12, generator=g, dtype=torch.float64)
    w = torch.randn(7, 12, generator=g, dtype=torch.float64)
    b = torch.randn(7, generator=g, dtype=torch.float64)
    assert (conv_linear(x, w, b) - rg.linear(x, w, b)).abs().max() < 1e-12
    assert (conv_linear(x, w) - rg.linear(x, w)).abs().max() < 1e-12
    wg = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    bg = torch.randn(3, 4, generator=g, dtype=torch.float64)
    assert (conv_block_diag_gate(x, wg, bg, 3) - rg.block_diag_gate(x, wg, bg, 3)).abs().max() < 1e-12


def use_fast_ops(on):
    if not hasattr(rg, "_ref_ops"):
        rg._ref_ops = (rg.linear, rg.block_diag_gate)
    rg.linear, rg.block_diag_gate = (conv_linear, conv_block_diag_gate) if on else rg._ref_ops


def model_config(vocab_size, args):
    return {
        "model_type": "recurrent_gemma",
        "architectures": ["RecurrentGemmaForCausalLM"],
        "vocab_size": vocab_size,
        "hidden_size": args.hidden,
        "intermediate_size": 2 * args.mlp,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": 1,
        "head_dim": args.hidden // args.heads,
        "lru_width": args.hidden,
        "attention_window_size": args.window,
        "conv1d_width": 4,
        "logits_soft_cap": 30.0,
        "rms_norm_eps": 1e-6,
        "hidden_activation": "gelu_pytorch_tanh",
        "partial_rotary_factor": 0.5,
        "rope_theta": 10000.0,
        "block_types": ["recurrent", "recurrent", "attention"],
        "embeddings_scale_by_sqrt_dim": True,
        "attention_bias": False,
        "tie_word_embeddings": True,
        "final_w_init_variance_scale": 2.0 / args.layers,
        "w_init_variance_scale": 0.01,
        "pad_token_id": PAD,
        "eos_token_id": EOS,
        "bos_token_id": BOS,
        "torch_dtype": "float32",
    }


# ----------------------------------------------------------------------------- tokenizer


def train_tokenizer(train_text, vocab_size, workdir):
    inp = os.path.join(workdir, "train.txt")
    with open(inp, "w", encoding="utf-8") as f:
        f.write(train_text)
    prefix = os.path.join(workdir, "tokenizer")
    cmd = [
        "spm_train",
        f"--input={inp}",
        f"--model_prefix={prefix}",
        f"--vocab_size={vocab_size}",
        "--model_type=bpe",
        "--byte_fallback=true",
        "--pad_id=0",
        "--eos_id=1",
        "--bos_id=2",
        "--unk_id=3",
        "--pad_piece=<pad>",
        "--eos_piece=<eos>",
        "--bos_piece=<bos>",
        "--unk_piece=<unk>",
        "--user_defined_symbols=\n",
        "--normalization_rule_name=identity",
        "--remove_extra_whitespaces=false",
        "--add_dummy_prefix=false",
        "--split_digits=true",
        "--character_coverage=1.0",
        "--num_threads=2",
        "--random_seed=1234",
        "--minloglevel=2",
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return prefix + ".model"


def encode(sp, text):
    # Encode line by line (identical result: "\n" is its own piece) to keep calls small.
    ids = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line:
            ids.extend(sp.encode(line))
        if i + 1 < len(lines):
            ids.append(sp.piece_to_id("\n"))
    return ids


# ----------------------------------------------------------------------------- model


def init_params(cfg, gen):
    """DM-style init: unit-variance embeddings after the sqrt(d) scale, LeCun-normal matrices,
    output projections scaled by final_w_init_variance_scale, zero biases and norm weights,
    Λ so that sigmoid(-Λ) lies in (0.9, 0.999)."""
    d = cfg.hidden_size
    final_scale = 2.0 / cfg.num_hidden_layers
    p = {}
    for name, shape in rg.expected_shapes(cfg).items():
        if name.endswith("embed_tokens.weight"):
            t = torch.randn(shape, generator=gen) / math.sqrt(d)
        elif name.endswith("norm.weight") or name.endswith(".bias") or name.endswith("_gate_bias"):
            t = torch.zeros(shape)
        elif name.endswith("conv_1d.weight"):
            t = torch.randn(shape, generator=gen) * math.sqrt(0.01 / shape[-1])
        elif name.endswith("recurrent_param"):
            u = torch.rand(shape, generator=gen, dtype=torch.float64)
            a0_sq = u * (0.999**2 - 0.9**2) + 0.9**2
            t = torch.log(torch.expm1(-0.5 * torch.log(a0_sq))).float()
        elif name.endswith("_gate_weight"):
            t = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
        else:
            std = 1.0 / math.sqrt(shape[1])
            if name.endswith(("down_proj.weight", "linear_out.weight", "o_proj.weight")):
                std *= math.sqrt(final_scale)
            t = torch.randn(shape, generator=gen) * std
        p[name] = t.float().requires_grad_(True)
    return p


# Training keeps Λ <= LAMBDA_MAX (projected after each step) so that -log a <= 8 softplus(Λ)
# <= 9.9 per step, which the cumulative-sum scan with chunks of 8 handles without overflow.
LAMBDA_MAX = 0.9


def check_parallel_scan():
    g = torch.Generator().manual_seed(7)
    log_a = -torch.rand(3, 100, 16, generator=g, dtype=torch.float64) * 8.0 * F.softplus(torch.tensor(LAMBDA_MAX))
    log_a[:, 0] = 0.0
    x = torch.randn(3, 100, 16, generator=g, dtype=torch.float64)
    seq = rg.lru_scan_sequential(torch.exp(log_a), x)
    for name, par in (("parallel", rg.lru_scan_parallel(log_a, x)), ("cumsum", rg.lru_scan_cumsum(log_a, x))):
        err = (seq - par).abs().max().item()
        assert err < 1e-10, f"{name} scan differs from the sequential one by {err}"


def check_training_forward(cfg, params):
    """The training forward (convolution products, cumulative-sum scan) equals the reference
    forward (matmuls, sequential scan) on random tokens."""
    w = {k: v.detach().double() for k, v in params.items()}
    toks = torch.randint(4, cfg.vocab_size, (2, 3 * cfg.attention_window_size // 2 + 5),
                         generator=torch.Generator().manual_seed(11))
    use_fast_ops(False)
    ref = rg.forward(cfg, w, toks, scan="sequential")
    use_fast_ops(True)
    fast = rg.forward(cfg, w, toks, scan="cumsum")
    use_fast_ops(False)
    err = (ref - fast).abs().max().item()
    assert err < 1e-9, f"training forward differs from the reference by {err}"


def loss_fn(cfg, params, batch):
    logits = rg.forward(cfg, params, batch[:, :-1], scan="cumsum")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def heldout_perplexity(cfg, params, ids, scan="sequential"):
    """exp(mean NLL) of ids[1:] given the prefix, one sequence."""
    toks = torch.tensor([ids], dtype=torch.long)
    w = {k: v.detach() for k, v in params.items()}
    logits = rg.forward(cfg, w, toks[:, :-1], scan=scan)[0]
    nll = F.cross_entropy(logits, toks[0, 1:], reduction="mean").item()
    return math.exp(nll), nll


@torch.no_grad()
def sample(cfg, params, sp, prompt, n, gen, temperature=0.8):
    ids = [BOS] + sp.encode(prompt)
    w = {k: v.detach() for k, v in params.items()}
    for _ in range(n):
        logits = rg.forward(cfg, w, torch.tensor([ids]), scan="cumsum")[0, -1]
        probs = torch.softmax(logits / temperature, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=gen)))
    return sp.decode(ids[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--out", default="default-model-hf")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--mlp", type=int, default=192, help="MLP branch width (intermediate_size/2)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64, help="training window length incl. BOS")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=0,
                    help="optimizer steps; 0 = as many as fit in --minutes (measured on the "
                         "first steps, then fixed); give the reported number to reproduce a run")
    ap.add_argument("--minutes", type=float, default=14.0, help="training time budget for --steps 0")
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--sample-tokens", type=int, default=40)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t_start = time.time()

    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    cut = int(len(text) * 0.9)
    train_text, held_text = text[:cut], text[cut:]

    import sentencepiece as spm

    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sp_path = train_tokenizer(train_text, a.vocab, tmp)
        shutil.copy(sp_path, os.path.join(a.out, "tokenizer.model"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.out, "tokenizer.model"))
    assert (sp.pad_id(), sp.eos_id(), sp.bos_id(), sp.unk_id()) == (PAD, EOS, BOS, UNK)
    vocab = sp.get_piece_size()
    train_ids = torch.tensor(encode(sp, train_text), dtype=torch.long)
    held_ids = [BOS] + encode(sp, held_text)
    assert sp.decode(held_ids[1:]) == held_text, "tokenizer does not round-trip the held-out text"
    print(f"data: {len(text)} chars; train {len(train_text)} chars = {len(train_ids)} tokens; "
          f"held-out {len(held_text)} chars = {len(held_ids) - 1} tokens; vocab {vocab}", flush=True)

    cfg_dict = model_config(vocab, a)
    cfg = rg.Config(cfg_dict)
    check_parallel_scan()
    check_fast_ops()

    gen = torch.Generator().manual_seed(a.seed)
    params = init_params(cfg, gen)
    n_params = sum(p.numel() for p in params.values())
    print(f"model: {n_params} parameters", flush=True)
    check_training_forward(cfg, params)
    use_fast_ops(True)

    is_decay = {n: p.dim() >= 2 and not n.endswith("embed_tokens.weight") for n, p in params.items()}
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in params.items() if is_decay[n]], "weight_decay": 0.1},
         {"params": [p for n, p in params.items() if not is_decay[n]], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
    )
    total = a.steps  # 0 until measured

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        t = min(1.0, (step - a.warmup) / max(1, total - a.warmup))
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    data_gen = torch.Generator().manual_seed(a.seed + 1)
    n_body = a.seq - 1
    val_probe = torch.tensor([held_ids[: 8 * a.seq]], dtype=torch.long)
    t_train = time.time()
    calib = 3
    stopped_early = None
    step = 0
    while total == 0 or step < total:
        if total == 0 and step == calib:
            per_step = (time.time() - t_train) / calib
            total = max(a.warmup + 10, int(a.minutes * 60 / per_step))
            print(f"{per_step:.2f}s per step: training for {total} steps", flush=True)
        if total == 0 and step >= a.warmup:
            raise RuntimeError("calibration must end within the warmup")
        if a.steps == 0 and time.time() - t_train > 1.25 * a.minutes * 60:
            stopped_early = step
            print(f"time budget exceeded: stopping at step {step} of {total}", flush=True)
            break
        starts = torch.randint(0, len(train_ids) - n_body, (a.batch,), generator=data_gen)
        body = torch.stack([train_ids[s : s + n_body] for s in starts.tolist()])
        batch = torch.cat([torch.full((a.batch, 1), BOS, dtype=torch.long), body], dim=1)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = loss_fn(cfg, params, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        with torch.no_grad():
            for n, p in params.items():
                if n.endswith("recurrent_param"):
                    p.clamp_(max=LAMBDA_MAX)
        if step % 10 == 0 or step == total - 1:
            print(f"step {step} loss {loss.item():.4f} lr {lr_at(step):.2e} "
                  f"elapsed {time.time() - t_start:.0f}s", flush=True)
        if (step + 1) % a.eval_every == 0:
            with torch.no_grad():
                vl = loss_fn(cfg, {k: v.detach() for k, v in params.items()}, val_probe).item()
            print(f"step {step} held-out probe loss {vl:.4f} (first {val_probe.shape[1]} tokens)", flush=True)
        step += 1
    train_seconds = time.time() - t_train

    weights = {k: v.detach().contiguous() for k, v in params.items()}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    safetensors_io.save_dir(weights, a.out)

    # Held-out perplexity: the reference model loaded from the written directory, with the
    # dense products and the RG-LRU scan in the same-maths fast forms checked above (the
    # reference BLAS and the sequential scan would take many minutes for the whole text).
    ref = rg.RecurrentGemma.load(a.out)
    ppl, nll = heldout_perplexity(ref.cfg, ref.weights, held_ids, scan="cumsum")
    bpc = nll * (len(held_ids) - 1) / len(held_text) / math.log(2)
    sgen = torch.Generator().manual_seed(a.seed + 2)
    text_out = sample(ref.cfg, ref.weights, sp, "ROMEO:\n", a.sample_tokens, sgen)
    summary = {
        "heldout_tokens": len(held_ids) - 1,
        "heldout_perplexity": ppl,
        "heldout_bits_per_char": bpc,
        "parameters": n_params,
        "steps": total if stopped_early is None else stopped_early,
        "planned_steps": total,
        "stopped_early": stopped_early is not None,
        "train_seconds": train_seconds,
        "total_seconds": time.time() - t_start,
        "args": vars(a),
    }
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), os.path.basename(os.path.abspath(a.out)) + "-summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    print("sample (T=0.8):\n" + text_out, flush=True)


if __name__ == "__main__":
    main()
