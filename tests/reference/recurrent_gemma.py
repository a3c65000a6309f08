"""Plain PyTorch reference of RecurrentGemma (Griffin) with Google DeepMind's numerics.

Reads the Hugging Face layout (config.json + model.safetensors, tensor names `model.layers.N...`)
and computes the logits of every position of one sequence that starts at position 0.

Numerics (see the RecurrentGemma fact sheet):
  x0      = E[tok] * bf16(sqrt(d))
  RMSNorm = x * rsqrt(mean(x^2) + eps) * (1 + w)
  block   : r = x + Temporal(norm_t(x)); out = r + MLP(norm_c(r))
  MLP     = down(gelu_tanh(gate(x)) * up(x))
  recurrent block: y = gelu_tanh(linear_y(x)); u = linear_x(x); c = causal depthwise conv(u);
           gx = sigmoid(c_h @ Wx_h + bx_h), ga = sigmoid(c_h @ Wa_h + ba_h)   (W as [head, in, out])
           log_a = -8 * ga * softplus(L); a = exp(log_a)
           h_t = a_t * h_{t-1} + c_t * gx_t * sqrt(1 - a_t^2)    (at position 0: h_0 = c_0 * gx_0)
           out = linear_out(h * y)
  local attention: MQA/GQA, RoPE (half-split) on the first head_dim*partial_rotary_factor dims,
           scores / sqrt(head_dim), key kp visible to query qp iff kp <= qp <= kp + W (W+1 keys)
  head    : logits = cap * tanh((norm_f(x) @ E^T) / cap)

Everything is computed in `dtype` (float32 by default; float64 for a tighter reference).
The RG-LRU scan can run sequentially (the definition) or as a chunked parallel scan in log
space (for training); both give the same result.
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

RECURRENT = "recurrent"
ATTENTION = "attention"


class Config:
    def __init__(self, d):
        def need(key):
            if key not in d:
                raise ValueError(f"config.json: missing key '{key}'")
            return d[key]

        self.vocab_size = int(need("vocab_size"))
        self.hidden_size = int(need("hidden_size"))
        self.intermediate_size = int(need("intermediate_size"))
        self.num_hidden_layers = int(need("num_hidden_layers"))
        self.num_attention_heads = int(need("num_attention_heads"))
        self.num_key_value_heads = int(need("num_key_value_heads"))
        self.head_dim = int(d.get("head_dim") or self.hidden_size // self.num_attention_heads)
        self.lru_width = int(d.get("lru_width") or self.hidden_size)
        self.attention_window_size = int(need("attention_window_size"))
        self.conv1d_width = int(d.get("conv1d_width", 4))
        self.logits_soft_cap = float(d.get("logits_soft_cap", 30.0))
        self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        self.partial_rotary_factor = float(d.get("partial_rotary_factor", 0.5))
        rope = d.get("rope_parameters") or {}
        self.rope_theta = float(d.get("rope_theta", rope.get("rope_theta", 10000.0)))
        pattern = d.get("block_types") or d.get("_block_types")
        if not pattern:
            raise ValueError("config.json: missing 'block_types' / '_block_types'")
        self.block_types = list(pattern)
        for t in self.block_types:
            if t not in (RECURRENT, ATTENTION):
                raise ValueError(f"config.json: unknown block type '{t}'")
        act = d.get("hidden_activation", "gelu_pytorch_tanh")
        if act not in ("gelu_pytorch_tanh", "gelu_tanh", "gelu_approximate"):
            raise ValueError(f"config.json: unsupported hidden_activation '{act}'")

    def layer_type(self, i):
        return self.block_types[i % len(self.block_types)]

    @property
    def mlp_width(self):
        return self.intermediate_size // 2

    @property
    def embed_scale(self):
        # The constant sqrt(d) is rounded to bfloat16 before the multiply (as in training).
        return torch.tensor(math.sqrt(self.hidden_size), dtype=torch.bfloat16).item()

    @property
    def rotary_dim(self):
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def load(cls, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            return cls(json.load(f))


def expected_shapes(cfg):
    """HF tensor name -> shape, for every tensor the model reads (lm_head excluded)."""
    d, E, R, V = cfg.hidden_size, cfg.mlp_width, cfg.lru_width, cfg.vocab_size
    H, hd, kv = cfg.num_attention_heads, cfg.head_dim, cfg.num_key_value_heads
    bw = R // H
    s = {"model.embed_tokens.weight": [V, d], "model.final_norm.weight": [d]}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        s[p + "temporal_pre_norm.weight"] = [d]
        s[p + "channel_pre_norm.weight"] = [d]
        s[p + "mlp_block.gate_proj.weight"] = [E, d]
        s[p + "mlp_block.gate_proj.bias"] = [E]
        s[p + "mlp_block.up_proj.weight"] = [E, d]
        s[p + "mlp_block.up_proj.bias"] = [E]
        s[p + "mlp_block.down_proj.weight"] = [d, E]
        s[p + "mlp_block.down_proj.bias"] = [d]
        t = p + "temporal_block."
        if cfg.layer_type(i) == RECURRENT:
            for n in ("linear_x", "linear_y"):
                s[t + n + ".weight"] = [R, d]
                s[t + n + ".bias"] = [R]
            s[t + "linear_out.weight"] = [d, R]
            s[t + "linear_out.bias"] = [d]
            s[t + "conv_1d.weight"] = [R, 1, cfg.conv1d_width]
            s[t + "conv_1d.bias"] = [R]
            s[t + "rg_lru.recurrent_param"] = [R]
            for g in ("input_gate", "recurrent_gate"):
                s[t + f"rg_lru.{g}_weight"] = [H, bw, bw]
                s[t + f"rg_lru.{g}_bias"] = [H, bw]
        else:
            s[t + "q_proj.weight"] = [H * hd, d]
            s[t + "k_proj.weight"] = [kv * hd, d]
            s[t + "v_proj.weight"] = [kv * hd, d]
            s[t + "o_proj.weight"] = [d, H * hd]
            s[t + "o_proj.bias"] = [d]
    return s


# ----------------------------------------------------------------------------- building blocks


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def linear(x, w, b=None):
    y = x @ w.t()
    return y if b is None else y + b


def softplus(x):
    # Stable log(1 + exp(x)).
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))


def causal_conv1d(u, w, b):
    """u [B, T, R]; w [R, 1, K] (tap K-1 multiplies the newest input); zero before t = 0."""
    K = w.shape[-1]
    T = u.shape[1]
    out = b.expand_as(u).clone()
    for k in range(K):
        shift = K - 1 - k  # tap k multiplies u[t - shift]
        if shift >= T:
            continue
        if shift == 0:
            out = out + w[:, 0, k] * u
        else:
            out[:, shift:] = out[:, shift:] + w[:, 0, k] * u[:, :-shift]
    return out


def block_diag_gate(x, w, b, heads):
    """x [B, T, R] split into `heads` blocks; w [H, in, out]: y_h = x_h @ w_h + b_h."""
    B, T, R = x.shape
    xh = x.reshape(B, T, heads, R // heads)
    y = torch.einsum("bthi,hio->btho", xh, w) + b
    return y.reshape(B, T, R)


def lru_scan_sequential(a, x):
    """h_t = a_t * h_{t-1} + x_t with h_{-1} = 0; a, x [B, T, R]."""
    h = torch.zeros_like(x[:, 0])
    out = []
    for t in range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def lru_scan_parallel(log_a, x, chunk=16):
    """Same recurrence from log a, chunked: within a chunk
    h_t = exp(L_t) h_in + sum_{s<=t} exp(L_t - L_s) x_s with L the cumulative sum of log a;
    L_t - L_s <= 0 for s <= t, so every exponent is stable."""
    B, T, R = x.shape
    h = torch.zeros_like(x[:, 0])
    out = []
    for s0 in range(0, T, chunk):
        la = log_a[:, s0 : s0 + chunk]
        xc = x[:, s0 : s0 + chunk]
        C = la.shape[1]
        L = torch.cumsum(la, dim=1)  # [B, C, R]
        # [B, t, s, R]: L_t - L_s for s <= t, -inf above the diagonal (weight 0).
        upper = torch.triu(torch.full((C, C), -math.inf, dtype=x.dtype, device=x.device), diagonal=1)
        wts = torch.exp(L[:, :, None, :] - L[:, None, :, :] + upper[None, :, :, None])
        hc = (wts * xc[:, None, :, :]).sum(dim=2) + torch.exp(L) * h[:, None, :]
        out.append(hc)
        h = hc[:, -1]
    return torch.cat(out, dim=1)


def lru_scan_cumsum(log_a, x, chunk=8):
    """Same recurrence, cheaper (O(T R) memory) for training: within a chunk of C steps
    h_t = exp(L_t) (h_in + sum_{s<=t} exp(-L_s) x_s), L the cumulative sum of log a from the
    chunk start, then the chunk-end states are carried over chunks. Needs -L <= ~85 within a
    chunk, i.e. log a >= -85 / C per step (asserted)."""
    B, T, R = x.shape
    if float(log_a.detach().min()) < -80.0 / chunk:
        raise ValueError("lru_scan_cumsum: decay too fast for the chunk size")
    pad = (-T) % chunk
    if pad:
        log_a = torch.cat([log_a, torch.zeros_like(log_a[:, :pad])], dim=1)
        x = torch.cat([x, torch.zeros_like(x[:, :pad])], dim=1)
    n = (T + pad) // chunk
    L = torch.cumsum(log_a.reshape(B, n, chunk, R), dim=2)
    inner = torch.exp(L) * torch.cumsum(torch.exp(-L) * x.reshape(B, n, chunk, R), dim=2)
    decay = torch.exp(L)  # from the chunk start to each position, <= 1
    h = torch.zeros_like(x[:, 0])
    carried = []
    for k in range(n):
        carried.append(h)
        h = inner[:, k, -1] + decay[:, k, -1] * h
    carry = torch.stack(carried, dim=1)  # state entering each chunk [B, n, R]
    out = inner + decay * carry[:, :, None, :]
    return out.reshape(B, n * chunk, R)[:, :T]


def rg_lru(c, p, cfg, scan="sequential"):
    """RG-LRU over c [B, T, R] for a sequence starting at position 0."""
    H = cfg.num_attention_heads
    gx = torch.sigmoid(block_diag_gate(c, p["input_gate_weight"], p["input_gate_bias"], H))
    ga = torch.sigmoid(block_diag_gate(c, p["recurrent_gate_weight"], p["recurrent_gate_bias"], H))
    log_a = -8.0 * ga * softplus(p["recurrent_param"])
    a = torch.exp(log_a)
    a_square = torch.exp(2.0 * log_a)
    multiplier = torch.sqrt(1.0 - a_square)
    # Position 0 is a reset: no normalisation and no carry-over.
    multiplier = torch.cat([torch.ones_like(multiplier[:, :1]), multiplier[:, 1:]], dim=1)
    x_hat = c * gx * multiplier
    if scan == "sequential":
        a = torch.cat([torch.zeros_like(a[:, :1]), a[:, 1:]], dim=1)
        return lru_scan_sequential(a, x_hat)
    # With h_{-1} = 0 the value of a_0 does not matter; use log a_0 = 0.
    log_a = torch.cat([torch.zeros_like(log_a[:, :1]), log_a[:, 1:]], dim=1)
    if scan == "cumsum":
        return lru_scan_cumsum(log_a, x_hat)
    return lru_scan_parallel(log_a, x_hat)


def recurrent_block(x, p, cfg, scan="sequential"):
    y = gelu(linear(x, p["linear_y.weight"], p["linear_y.bias"]))
    u = linear(x, p["linear_x.weight"], p["linear_x.bias"])
    c = causal_conv1d(u, p["conv_1d.weight"], p["conv_1d.bias"])
    lru = {
        k[len("rg_lru.") :]: v for k, v in p.items() if k.startswith("rg_lru.")
    }
    h = rg_lru(c, lru, cfg, scan)
    return linear(h * y, p["linear_out.weight"], p["linear_out.bias"])


def rope(x, positions, cfg):
    """x [B, T, heads, hd]; rotate the first rotary_dim dims, half-split pairs (j, j + rot/2)."""
    rot = cfg.rotary_dim
    half = rot // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, rot, 2, dtype=x.dtype) / rot))
    ang = positions.to(x.dtype)[:, None] * inv_freq[None, :]  # [T, half]
    cos = torch.cos(ang)[None, :, None, :]
    sin = torch.sin(ang)[None, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def local_attention(x, p, cfg, q_block=256):
    B, T, _ = x.shape
    H, kv, hd, W = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.attention_window_size
    pos = torch.arange(T)
    q = rope(linear(x, p["q_proj.weight"]).reshape(B, T, H, hd), pos, cfg)
    k = rope(linear(x, p["k_proj.weight"]).reshape(B, T, kv, hd), pos, cfg)
    v = linear(x, p["v_proj.weight"]).reshape(B, T, kv, hd)
    rep = H // kv  # query head h uses key/value head h // rep
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    outs = []
    # Query blocks [s, e) attend to keys [max(0, s - W), e): bounded memory for long inputs.
    for s in range(0, T, q_block):
        e = min(T, s + q_block)
        ks = max(0, s - W)
        qb = q[:, s:e].transpose(1, 2)  # [B, H, tq, hd]
        kb = k[:, ks:e].transpose(1, 2)
        vb = v[:, ks:e].transpose(1, 2)
        scores = (qb @ kb.transpose(-1, -2)) / math.sqrt(hd)
        qp = torch.arange(s, e)[:, None]
        kp = torch.arange(ks, e)[None, :]
        visible = (kp <= qp) & (qp <= kp + W)
        scores = scores.masked_fill(~visible, -math.inf)
        probs = torch.softmax(scores, dim=-1)
        outs.append((probs @ vb).transpose(1, 2).reshape(B, e - s, H * hd))
    o = torch.cat(outs, dim=1)
    return linear(o, p["o_proj.weight"], p["o_proj.bias"])


def mlp(x, p):
    g = gelu(linear(x, p["gate_proj.weight"], p["gate_proj.bias"]))
    u = linear(x, p["up_proj.weight"], p["up_proj.bias"])
    return linear(g * u, p["down_proj.weight"], p["down_proj.bias"])


def _sub(weights, prefix):
    n = len(prefix)
    return {k[n:]: v for k, v in weights.items() if k.startswith(prefix)}


def forward(cfg, weights, tokens, scan="sequential"):
    """tokens LongTensor [B, T] (positions 0..T-1) -> capped logits [B, T, V].
    `weights` maps HF names to tensors, all of the compute dtype."""
    emb = weights["model.embed_tokens.weight"]
    x = emb[tokens] * cfg.embed_scale
    eps = cfg.rms_norm_eps
    for i in range(cfg.num_hidden_layers):
        p = _sub(weights, f"model.layers.{i}.")
        t = _sub(p, "temporal_block.")
        h = rms_norm(x, p["temporal_pre_norm.weight"], eps)
        if cfg.layer_type(i) == RECURRENT:
            x = x + recurrent_block(h, t, cfg, scan)
        else:
            x = x + local_attention(h, t, cfg)
        x = x + mlp(rms_norm(x, p["channel_pre_norm.weight"], eps), _sub(p, "mlp_block."))
    x = rms_norm(x, weights["model.final_norm.weight"], eps)
    head = weights.get("lm_head.weight", emb)
    logits = linear(x, head)
    c = cfg.logits_soft_cap
    return c * torch.tanh(logits / c)


class RecurrentGemma:
    """Reference model: RecurrentGemma(cfg, weights).logits([tok, ...]) -> [T, V] tensor."""

    def __init__(self, cfg, weights, dtype=torch.float32):
        if isinstance(cfg, dict):
            cfg = Config(cfg)
        self.cfg = cfg
        self.dtype = dtype
        shapes = expected_shapes(cfg)
        for name, shape in shapes.items():
            if name not in weights:
                raise ValueError(f"missing tensor {name}")
            if list(weights[name].shape) != shape:
                raise ValueError(f"tensor {name}: shape {list(weights[name].shape)}, expected {shape}")
        self.weights = {n: weights[n].to(dtype) for n in shapes}
        if "lm_head.weight" in weights:
            self.weights["lm_head.weight"] = weights["lm_head.weight"].to(dtype)

    @classmethod
    def load(cls, model_dir, dtype=torch.float32):
        return cls(Config.load(model_dir), safetensors_io.load_dir(model_dir), dtype)

    @torch.no_grad()
    def logits(self, tokens, scan="sequential"):
        for t in tokens:
            if not 0 <= int(t) < self.cfg.vocab_size:
                raise ValueError(f"token {t} out of range [0, {self.cfg.vocab_size})")
        toks = torch.tensor([list(tokens)], dtype=torch.long)
        return forward(self.cfg, self.weights, toks, scan)[0]


def main():
    import argparse

    ap = argparse.ArgumentParser(description="Reference RecurrentGemma logits as JSON")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--f64", action="store_true")
    ap.add_argument("--last", action="store_true")
    a = ap.parse_args()
    toks = [int(t) for t in a.tokens.split(",") if t]
    m = RecurrentGemma.load(a.model, torch.float64 if a.f64 else torch.float32)
    lg = m.logits(toks)
    if a.last:
        lg = lg[-1:]
    print(json.dumps({"tokens": toks, "logits": lg.tolist()}))


if __name__ == "__main__":
    main()
