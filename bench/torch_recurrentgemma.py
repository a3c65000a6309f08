#!/usr/bin/env python3
"""PyTorch eager baseline for RecurrentGemma (Griffin): prefill and decode speed on CPU.

Builds the model with the real shapes of a preset (random weights, created directly in the
requested dtype) and measures what a PyTorch user gets today, written the way Google
DeepMind's PyTorch model runs it:

  * prefill: one forward over the whole prompt (every matmul through F.linear in the model
    dtype; the RG-LRU gates, decay and scan in float32 with a loop over time steps; masked
    local attention with the softmax in float32); it also builds the decode state;
  * decode: one token per step with a proper cache: the last 3 conv inputs and the float32
    RG-LRU state per recurrent layer, a ring of the last W keys/values per attention layer
    (the token attends to itself plus the W tokens before it); matvecs through F.linear in the
    model dtype; the full tied LM head and greedy argmax every step.

Usage:
  python3 bench/torch_recurrentgemma.py --preset 2b --dtype bf16 --threads 2 --prompt 128 --decode 8
  python3 bench/torch_recurrentgemma.py --check     # tiny model: cached decode vs the reference

--check compares the prefill logits and every cached decode step of a tiny random model with
the full-sequence forward of tests/reference/recurrent_gemma.py (exits non-zero on mismatch).
"""

import argparse
import math
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

PRESETS = {
    # RecurrentGemma-2B (HF config: intermediate_size 15360 = 2 x 7680, one KV head).
    "2b": dict(
        vocab_size=256000,
        hidden_size=2560,
        intermediate_size=15360,
        num_hidden_layers=26,
        num_attention_heads=10,
        num_key_value_heads=1,
        head_dim=256,
        lru_width=2560,
        attention_window_size=2048,
    ),
    # Tiny shape for the correctness check (small window so that the ring buffer wraps).
    "tiny": dict(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=6,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        lru_width=128,
        attention_window_size=8,
    ),
}

COMMON = dict(
    conv1d_width=4,
    logits_soft_cap=30.0,
    rms_norm_eps=1e-6,
    partial_rotary_factor=0.5,
    rope_theta=10000.0,
    block_types=["recurrent", "recurrent", "attention"],
    hidden_activation="gelu_pytorch_tanh",
)

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}


class Cfg:
    def __init__(self, d):
        self.raw = dict(d)
        self.V = d["vocab_size"]
        self.d = d["hidden_size"]
        self.E = d["intermediate_size"] // 2
        self.L = d["num_hidden_layers"]
        self.H = d["num_attention_heads"]
        self.KV = d["num_key_value_heads"]
        self.hd = d["head_dim"]
        self.R = d["lru_width"]
        self.W = d["attention_window_size"]
        self.K = d["conv1d_width"]
        self.cap = d["logits_soft_cap"]
        self.eps = d["rms_norm_eps"]
        self.rot = int(self.hd * d["partial_rotary_factor"])
        self.theta = d["rope_theta"]
        self.types = d["block_types"]
        # sqrt(d) rounded to bfloat16 before the multiply (50.5 for d = 2560).
        self.embed_scale = torch.tensor(math.sqrt(self.d), dtype=torch.bfloat16).item()

    def is_attention(self, i):
        return self.types[i % len(self.types)] == "attention"


# ----------------------------------------------------------------------------- weights


def make_weights(cfg, dtype, seed):
    """Random weights with Hugging Face tensor names, allocated directly in `dtype` (no float32
    copy of the big matrices). Values are uniform in [-bound, bound], copied from one random
    pool at random offsets (running the RNG over 2.7 G numbers would dominate the start-up;
    the values do not change the speed of dense kernels). Scales keep activations O(1)."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.empty(1 << 22, dtype=dtype).uniform_(-1.0, 1.0, generator=g)
    w = {}

    scaled = {}  # one scaled copy of the pool per range: a single write pass per weight

    def fill(t, lo, hi):
        if (lo, hi) not in scaled:
            scaled[(lo, hi)] = pool * ((hi - lo) / 2) + (hi + lo) / 2
        src = scaled[(lo, hi)]
        flat = t.view(-1)
        i = 0
        while i < flat.numel():
            off = int(torch.randint(0, src.numel() // 2, (1,), generator=g))
            n = min(flat.numel() - i, src.numel() - off)
            flat[i : i + n].copy_(src[off : off + n])
            i += n
        return t

    def uni(name, shape, bound):
        w[name] = fill(torch.empty(shape, dtype=dtype), -bound, bound)

    def lin(name, out_f, in_f, bias):
        uni(name + ".weight", (out_f, in_f), 1.0 / math.sqrt(in_f))
        if bias:
            uni(name + ".bias", (out_f,), 0.02)

    d, E, R, H, hd = cfg.d, cfg.E, cfg.R, cfg.H, cfg.hd
    bw = R // H
    uni("model.embed_tokens.weight", (cfg.V, d), 0.035)  # x0 = E[t] * 50.5 has rms ~1
    uni("model.final_norm.weight", (d,), 0.1)
    for i in range(cfg.L):
        p = f"model.layers.{i}."
        uni(p + "temporal_pre_norm.weight", (d,), 0.1)
        uni(p + "channel_pre_norm.weight", (d,), 0.1)
        lin(p + "mlp_block.gate_proj", E, d, True)
        lin(p + "mlp_block.up_proj", E, d, True)
        lin(p + "mlp_block.down_proj", d, E, True)
        t = p + "temporal_block."
        if cfg.is_attention(i):
            lin(t + "q_proj", H * hd, d, False)
            lin(t + "k_proj", cfg.KV * hd, d, False)
            lin(t + "v_proj", cfg.KV * hd, d, False)
            lin(t + "o_proj", d, H * hd, True)
        else:
            lin(t + "linear_x", R, d, True)
            lin(t + "linear_y", R, d, True)
            lin(t + "linear_out", d, R, True)
            uni(t + "conv_1d.weight", (R, 1, cfg.K), 0.5)
            uni(t + "conv_1d.bias", (R,), 0.02)
            # Lambda in the range of the released checkpoints: a = sigmoid(-L)^(8 ga).
            w[t + "rg_lru.recurrent_param"] = fill(torch.empty(R, dtype=dtype), -6.9, -2.2)
            for gate in ("input_gate", "recurrent_gate"):
                uni(t + f"rg_lru.{gate}_weight", (H, bw, bw), 1.0 / math.sqrt(bw))
                uni(t + f"rg_lru.{gate}_bias", (H, bw), 0.02)
    return w


class Layer:
    pass


def prepare(cfg, w, acc):
    """Per-layer views of the weights plus the few small tensors the RG-LRU keeps in float32
    (gate matrices [H, bw, bw], biases, Lambda: 1.3 M numbers per layer)."""
    layers = []
    for i in range(cfg.L):
        p = f"model.layers.{i}."
        t = p + "temporal_block."
        ly = Layer()
        ly.attn = cfg.is_attention(i)
        ly.norm_t = w[p + "temporal_pre_norm.weight"].to(acc) + 1.0
        ly.norm_c = w[p + "channel_pre_norm.weight"].to(acc) + 1.0
        m = p + "mlp_block."
        ly.gate_w, ly.gate_b = w[m + "gate_proj.weight"], w[m + "gate_proj.bias"]
        ly.up_w, ly.up_b = w[m + "up_proj.weight"], w[m + "up_proj.bias"]
        ly.down_w, ly.down_b = w[m + "down_proj.weight"], w[m + "down_proj.bias"]
        if ly.attn:
            ly.q_w, ly.k_w, ly.v_w = (w[t + n + "_proj.weight"] for n in "qkv")
            ly.o_w, ly.o_b = w[t + "o_proj.weight"], w[t + "o_proj.bias"]
        else:
            ly.x_w, ly.x_b = w[t + "linear_x.weight"], w[t + "linear_x.bias"]
            ly.y_w, ly.y_b = w[t + "linear_y.weight"], w[t + "linear_y.bias"]
            ly.out_w, ly.out_b = w[t + "linear_out.weight"], w[t + "linear_out.bias"]
            ly.conv_w = w[t + "conv_1d.weight"][:, 0, :].t().contiguous()  # [K, R], row K-1 newest
            ly.conv_b = w[t + "conv_1d.bias"]
            ly.lam = w[t + "rg_lru.recurrent_param"].to(acc)
            ly.gx_w = w[t + "rg_lru.input_gate_weight"].to(acc)  # [H, in, out]
            ly.gx_b = w[t + "rg_lru.input_gate_bias"].to(acc)[:, None, :]
            ly.ga_w = w[t + "rg_lru.recurrent_gate_weight"].to(acc)
            ly.ga_b = w[t + "rg_lru.recurrent_gate_bias"].to(acc)[:, None, :]
        layers.append(ly)
    return layers


# ----------------------------------------------------------------------------- model


class Model:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.emb = weights["model.embed_tokens.weight"]
        self.dtype = self.emb.dtype
        # Float32 for norms, RG-LRU, softmax and logits (float64 only for the float64 check).
        self.acc = torch.float64 if self.dtype == torch.float64 else torch.float32
        self.final_norm = weights["model.final_norm.weight"].to(self.acc) + 1.0
        self.layers = prepare(cfg, weights, self.acc)
        half = cfg.rot // 2
        self.inv_freq = 1.0 / (cfg.theta ** (torch.arange(half, dtype=self.acc) * 2 / cfg.rot))

    # --- pieces

    def norm(self, x, w):
        xf = x.to(self.acc)
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * w).to(x.dtype)

    def rope(self, x, pos):
        """x [T, n, hd]; pos [T] (float32). Half-split pairs on the first rot dims."""
        rot, half = self.cfg.rot, self.cfg.rot // 2
        ang = pos[:, None] * self.inv_freq[None, :]
        cos = torch.cos(ang).to(x.dtype)[:, None, :]
        sin = torch.sin(ang).to(x.dtype)[:, None, :]
        x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)

    def mlp(self, ly, x):
        g = F.gelu(F.linear(x, ly.gate_w, ly.gate_b), approximate="tanh")
        u = F.linear(x, ly.up_w, ly.up_b)
        return F.linear(g * u, ly.down_w, ly.down_b)

    def gates(self, ly, cf):
        """cf float32 [T, R] -> sigmoid gates gx, ga [T, R] (block-diagonal, W as [H, in, out])."""
        T = cf.shape[0]
        ch = cf.view(T, self.cfg.H, -1).transpose(0, 1)  # [H, T, bw]
        gx = torch.sigmoid(torch.baddbmm(ly.gx_b, ch, ly.gx_w)).transpose(0, 1).reshape(T, -1)
        ga = torch.sigmoid(torch.baddbmm(ly.ga_b, ch, ly.ga_w)).transpose(0, 1).reshape(T, -1)
        return gx, ga

    def head(self, x):
        """x [d] (model dtype) -> soft-capped float32 logits [V]."""
        z = F.linear(self.norm(x, self.final_norm), self.emb).to(self.acc)
        return self.cfg.cap * torch.tanh(z / self.cfg.cap)

    # --- prefill: the whole prompt in one forward, returns (last logits, state)

    def prefill(self, tokens):
        cfg = self.cfg
        T = tokens.shape[0]
        x = self.emb[tokens] * cfg.embed_scale
        pos = torch.arange(T, dtype=self.acc)
        state = []
        for ly in self.layers:
            h_in = self.norm(x, ly.norm_t)
            if ly.attn:
                out, st = self._attn_prefill(ly, h_in, pos)
            else:
                out, st = self._rec_prefill(ly, h_in)
            state.append(st)
            x = x + out
            x = x + self.mlp(ly, self.norm(x, ly.norm_c))
        return self.head(x[-1]), {"layers": state, "n": T}

    def _rec_prefill(self, ly, x):
        cfg = self.cfg
        T = x.shape[0]
        y = F.gelu(F.linear(x, ly.y_w, ly.y_b), approximate="tanh")
        u = F.linear(x, ly.x_w, ly.x_b)
        # Causal depthwise conv: c_t = b + sum_k w[k] * u[t - (K-1) + k], zero before t = 0.
        up = torch.cat([u.new_zeros(cfg.K - 1, cfg.R), u], dim=0)
        c = ly.conv_b.expand(T, cfg.R)
        for k in range(cfg.K):
            c = c + ly.conv_w[k] * up[k : k + T]
        cf = c.to(self.acc)
        gx, ga = self.gates(ly, cf)
        log_a = -8.0 * ga * F.softplus(ly.lam)
        a = torch.exp(log_a)
        mult = torch.sqrt(1.0 - torch.exp(2.0 * log_a))
        mult[0] = 1.0  # position 0 is a reset: no normalisation, no carry-over
        xh = cf * gx * mult
        hs = torch.empty_like(xh)
        h = xh[0]
        hs[0] = h
        for t in range(1, T):
            h = a[t] * h + xh[t]
            hs[t] = h
        out = F.linear(hs.to(x.dtype) * y, ly.out_w, ly.out_b)
        conv_state = up[T:].clone()  # the last K-1 inputs, oldest first (zeros if T < K-1)
        return out, {"conv": conv_state, "h": h.clone()}

    def _attn_prefill(self, ly, x, pos):
        cfg = self.cfg
        T = x.shape[0]
        q = self.rope(F.linear(x, ly.q_w).view(T, cfg.H, cfg.hd), pos)
        k = self.rope(F.linear(x, ly.k_w).view(T, cfg.KV, cfg.hd), pos)
        v = F.linear(x, ly.v_w).view(T, cfg.KV, cfg.hd)
        rep = cfg.H // cfg.KV
        qh = q.transpose(0, 1)  # [H, T, hd]
        kh = k.transpose(0, 1).repeat_interleave(rep, 0)  # [H, T, hd]
        vh = v.transpose(0, 1).repeat_interleave(rep, 0)
        scores = (qh @ kh.transpose(1, 2)).to(self.acc) * (cfg.hd**-0.5)
        qp = torch.arange(T)[:, None]
        kp = torch.arange(T)[None, :]
        visible = (kp <= qp) & (qp <= kp + cfg.W)
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(x.dtype)
        o = (probs @ vh).transpose(0, 1).reshape(T, cfg.H * cfg.hd)
        out = F.linear(o, ly.o_w, ly.o_b)
        # Ring of the last min(T, W) keys/values, slot = position % W.
        kc = x.new_zeros(cfg.W, cfg.KV, cfg.hd)
        vc = x.new_zeros(cfg.W, cfg.KV, cfg.hd)
        n = min(T, cfg.W)
        slots = torch.arange(T - n, T) % cfg.W
        kc[slots] = k[T - n :]
        vc[slots] = v[T - n :]
        return out, {"k": kc, "v": vc}

    # --- decode: one token with the cache (state updated in place), returns logits

    def step(self, token, state):
        cfg = self.cfg
        n = state["n"]  # tokens seen = position of this token
        x = self.emb[token] * cfg.embed_scale  # [d]
        x = x[None]  # [1, d]
        pos = torch.tensor([float(n)], dtype=self.acc)
        for ly, st in zip(self.layers, state["layers"]):
            h_in = self.norm(x, ly.norm_t)
            if ly.attn:
                out = self._attn_step(ly, h_in, pos, n, st)
            else:
                out = self._rec_step(ly, h_in, n, st)
            x = x + out
            x = x + self.mlp(ly, self.norm(x, ly.norm_c))
        state["n"] = n + 1
        return self.head(x[0])

    def _rec_step(self, ly, x, n, st):
        y = F.gelu(F.linear(x, ly.y_w, ly.y_b), approximate="tanh")
        u = F.linear(x, ly.x_w, ly.x_b)  # [1, R]
        win = torch.cat([st["conv"], u], dim=0)  # [K, R], oldest first
        c = ly.conv_b + (win * ly.conv_w).sum(0, keepdim=True)
        st["conv"] = win[1:]
        cf = c.to(self.acc)
        gx, ga = self.gates(ly, cf)
        log_a = -8.0 * ga * F.softplus(ly.lam)
        if n == 0:
            h = cf * gx
        else:
            a = torch.exp(log_a)
            h = a * st["h"] + cf * gx * torch.sqrt(1.0 - torch.exp(2.0 * log_a))
        st["h"] = h[0]
        return F.linear(h.to(x.dtype) * y, ly.out_w, ly.out_b)

    def _attn_step(self, ly, x, pos, n, st):
        cfg = self.cfg
        q = self.rope(F.linear(x, ly.q_w).view(1, cfg.H, cfg.hd), pos)[0]  # [H, hd]
        k = self.rope(F.linear(x, ly.k_w).view(1, cfg.KV, cfg.hd), pos)[0]  # [KV, hd]
        v = F.linear(x, ly.v_w).view(cfg.KV, cfg.hd)
        # Visible: the W previous tokens (every valid slot of the ring) plus this one.
        m = min(n, cfg.W)
        keys = torch.cat([st["k"][:m], k[None]], dim=0)  # [m+1, KV, hd]
        vals = torch.cat([st["v"][:m], v[None]], dim=0)
        rep = cfg.H // cfg.KV
        qg = q.view(cfg.KV, rep, cfg.hd)  # query heads grouped by KV head
        scores = torch.einsum("grd,sgd->grs", qg, keys).to(self.acc) * (cfg.hd**-0.5)
        probs = torch.softmax(scores, dim=-1).to(x.dtype)
        o = torch.einsum("grs,sgd->grd", probs, vals).reshape(1, cfg.H * cfg.hd)
        slot = n % cfg.W
        st["k"][slot] = k
        st["v"][slot] = v
        return F.linear(o, ly.o_w, ly.o_b)


# ----------------------------------------------------------------------------- check


def check(args):
    """Tiny model: prefill + cached decode vs the full-sequence reference forward."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "reference"))
    import recurrent_gemma as ref  # noqa: E402

    raw = dict(PRESETS["tiny"], **COMMON)
    cfg = Cfg(raw)
    rcfg = ref.Config(raw)
    ok = True
    for dtype, tol in ((torch.float64, 1e-9), (torch.float32, 2e-3)):
        w = make_weights(cfg, dtype, seed=args.seed)
        model = Model(cfg, w)
        gen = torch.Generator().manual_seed(args.seed + 1)
        for plen in (1, 2, 5, 11):
            prompt = torch.randint(0, cfg.V, (plen,), generator=gen)
            logits, state = model.prefill(prompt)
            seq = prompt.tolist()
            worst = 0.0
            for i in range(14):  # prompt + decode crosses the window of 8 for every plen
                want = ref.forward(rcfg, w, torch.tensor([seq]))[0, -1].to(logits.dtype)
                worst = max(worst, (logits - want).abs().max().item())
                tok = int(torch.argmax(logits))
                seq.append(tok)
                logits = model.step(torch.tensor(tok), state)
            status = "ok" if worst <= tol else "MISMATCH"
            ok &= worst <= tol
            print(f"check {str(dtype):14s} prompt {plen:2d} + 14 steps: max |dlogit| {worst:.3g} {status}")
    print("check passed" if ok else "check FAILED")
    return 0 if ok else 1


# ----------------------------------------------------------------------------- bench


def mem_gb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return float("nan")


def load_avg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


class Timer:
    """Wall and process CPU time (all threads) of a block."""

    def __enter__(self):
        self.w0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0


def bench(args):
    torch.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    cfg = Cfg(dict(PRESETS[args.preset], **COMMON))
    print(f"torch {torch.__version__}  python {platform.python_version()}  threads {torch.get_num_threads()}")
    print(f"preset {args.preset}  dtype {args.dtype}  prompt {args.prompt}  decode {args.decode}")
    print(f"load average at start: {load_avg()} ({os.cpu_count()} CPUs)")
    with Timer() as t:
        w = make_weights(cfg, dtype, seed=args.seed)
        model = Model(cfg, w)
    nparam = sum(x.numel() for x in w.values())
    nbytes = sum(x.numel() * x.element_size() for x in w.values())
    print(f"weights: {nparam / 1e9:.3f} G params, {nbytes / 1e9:.2f} GB, built in {t.wall:.1f} s,"
          f" RSS {mem_gb():.2f} GB")
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(0, cfg.V, (args.prompt,), generator=gen)

    if args.warmup:
        nw = min(args.prompt, args.warmup)
        with Timer() as t:
            wl, ws = model.prefill(prompt[:nw])
            model.step(torch.argmax(wl), ws)
        print(f"warm-up ({nw}-token prefill + 1 step): {t.wall:.1f} s")

    # Process CPU seconds (all threads) per token are printed beside the wall rate: on a busy
    # machine they show how much work the step took while the wall rate shows what a user waits.
    with Timer() as t:
        logits, state = model.prefill(prompt)
    print(f"torch prefill {args.prompt}: {args.prompt / t.wall:.2f} tok/s ({t.wall:.2f} s wall,"
          f" {t.cpu:.2f} s cpu = {t.cpu / args.prompt:.3f} cpu s/token)")

    walls, cpus = [], []
    tok = torch.argmax(logits)
    for _ in range(args.decode):
        with Timer() as t:
            logits = model.step(tok, state)
            tok = torch.argmax(logits)
        walls.append(t.wall)
        cpus.append(t.cpu)
    if walls:
        n, tw, tc = len(walls), sum(walls), sum(cpus)
        print(f"torch decode: {n / tw:.3f} tok/s ({n} tokens, {tw:.2f} s wall, {tc:.2f} s cpu;"
              f" step min {min(walls):.2f} s, max {max(walls):.2f} s;"
              f" {tc / n:.2f} cpu s/token)")
    print(f"load average at end: {load_avg()}; RSS {mem_gb():.2f} GB")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="2b")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128, help="prompt length for the prefill")
    ap.add_argument("--decode", type=int, default=8, help="number of decode steps to time")
    ap.add_argument("--warmup", type=int, default=4,
                    help="untimed warm-up: prefill of this many tokens + 1 step (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true",
                    help="verify the cached decode on a tiny model against the reference, then exit")
    args = ap.parse_args()
    if args.prompt < 1 or args.decode < 0 or args.threads < 1:
        ap.error("--prompt >= 1, --decode >= 0, --threads >= 1")
    with torch.inference_mode():
        return check(args) if args.check else bench(args)


if __name__ == "__main__":
    sys.exit(main())
