"""PyTorch reference of the two GPT stages of MetaVoice-1B, and tiny random checkpoints.

Stage 1 follows metavoice-src fam/llm/fast_model.py (gpt-fast "Transformer"): learned absolute
positions, RMSNorm computed as x * rsqrt(mean(x^2) + eps) then * weight, causal SDPA through a
static KV cache (the mask is a row of tril(max_seq, max_seq) over the whole cache), SwiGLU
w2(silu(w1 x) * w3 x), no biases. The batch has two rows with the same tokens: the speaker
projection speaker_cond_pos(spk_emb) is added to every position of row 0 and nothing to row 1.

Stage 2 follows fam/llm/model.py, layers/{combined,attn,layers}.py (nanoGPT "GPT"): the sum of
the hierarchies' token embeddings + wpe + speaker_cond_pos(spk_emb); blocks
x += c_proj(attn(ln_1 x)); x += mlp(ln_2 x); LayerNorm (eps 1e-5, optional bias) or RMSNorm;
GELU (exact erf) or SwiGLU MLP; non-causal (no mask at all) or causal; heads untied
(target_vocab_sizes) or tied to the input embeddings (causal). With spk_emb_on_text False the
speaker term starts at the first end-of-text token (1537) of hierarchy 0, that token included.

    python3 metavoice_gpt.py --out DIR [--seed S] [--dtype f32|bf16]

writes a tiny METAVOICE_DIR's GPT parts: first_stage.safetensors (gpt-fast names),
second_stage.safetensors (nanoGPT names), spk_emb.safetensors ("spk_emb", [1, 256]) and
config.json {"first_stage": {"model_args": ...}, "second_stage": {"model_args": ...}}.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

END_OF_TEXT_STAGE2 = 1537


# ------------------------------------------------------------------ configurations


def sdpa(q, k, v, attn_mask=None, is_causal=False):
    """torch's scaled_dot_product_attention (scale 1/sqrt(head_dim)); attn_mask: bool, True
    where attending is allowed; is_causal: lower-triangular mask."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def find_multiple(n, k):
    return n if n % k == 0 else n + k - n % k


RELEASED_STAGE1 = dict(block_size=2048, vocab_size=2562, n_layer=24, n_head=16, dim=2048,
                       n_local_heads=16, norm_eps=1e-5, intermediate_size=5632, speaker_emb_dim=256)

RELEASED_STAGE2 = dict(block_size=1024, vocab_sizes=[1538, 1025], target_vocab_sizes=[1025] * 6,
                       n_layer=6, n_head=6, n_embd=384, bias=False, causal=False,
                       norm_type="layernorm", rmsnorm_eps=None, nonlinearity_type="gelu",
                       swiglu_multiple_of=None, spk_emb_on_text=True, kv_cache_enabled=False,
                       speaker_emb_dim=256)

# Tiny stage 1: every contraction dim a multiple of 256 (dim 256, intermediate 768), so that
# K-quants apply to every matrix; the real vocabulary, so that the real token ids fit.
TINY_STAGE1 = dict(block_size=512, vocab_size=2562, n_layer=2, n_head=4, dim=256,
                   n_local_heads=4, norm_eps=1e-5, speaker_emb_dim=256)

# Tiny stage 2: the released structure (2 input hierarchies, 6 heads, non-causal), small.
TINY_STAGE2 = dict(block_size=256, vocab_sizes=[1538, 1025], target_vocab_sizes=[1025] * 6,
                   n_layer=2, n_head=2, n_embd=64, bias=False, causal=False,
                   norm_type="layernorm", nonlinearity_type="gelu", spk_emb_on_text=True,
                   kv_cache_enabled=False, speaker_emb_dim=256)

# A causal stage 2 with a KV cache: tied heads, RMSNorm, SwiGLU, biases.
TINY_STAGE2_CAUSAL = dict(block_size=64, vocab_sizes=[1538, 1025], target_vocab_sizes=None,
                          n_layer=2, n_head=4, n_embd=64, bias=True, causal=True,
                          norm_type="rmsnorm", rmsnorm_eps=1e-5, nonlinearity_type="swiglu",
                          swiglu_multiple_of=32, spk_emb_on_text=False, kv_cache_enabled=True,
                          speaker_emb_dim=256)


def stage1_args(overrides=None):
    """gpt-fast ModelArgs with MetaVoice-1B defaults; intermediate_size derived when absent."""
    a = dict(RELEASED_STAGE1)
    o = dict(overrides or {})
    if "intermediate_size" not in o or o["intermediate_size"] is None:
        d = o.get("dim", a["dim"])
        o["intermediate_size"] = find_multiple(int(2 * 4 * d / 3), 256)
    a.update({k: v for k, v in o.items() if k in RELEASED_STAGE1})
    if a["n_local_heads"] == -1:
        a["n_local_heads"] = a["n_head"]
    a["head_dim"] = a["dim"] // a["n_head"]
    return a


def stage2_args(overrides=None):
    a = dict(RELEASED_STAGE2)
    o = dict(overrides or {})
    if o.get("causal") and "target_vocab_sizes" not in o:
        o["target_vocab_sizes"] = None
    a.update({k: v for k, v in o.items() if k in RELEASED_STAGE2})
    a["head_dim"] = a["n_embd"] // a["n_head"]
    h = 4 * a["n_embd"]
    if a["nonlinearity_type"] == "swiglu":
        m = a["swiglu_multiple_of"]
        h = m * math.ceil(int(2 * h / 3) / m)
    a["mlp_hidden"] = h
    a["heads"] = a["target_vocab_sizes"] if a["target_vocab_sizes"] is not None else a["vocab_sizes"]
    return a


def model_args_json(a, released):
    return {k: a[k] for k in released if k in a}


# ------------------------------------------------------------------ stage 1


def stage1_shapes(a):
    d, hd, I = a["dim"], a["head_dim"], a["intermediate_size"]
    s = {
        "tok_embeddings.weight": [a["vocab_size"], d],
        "pos_embeddings.weight": [a["block_size"], d],
        "speaker_cond_pos.weight": [d, a["speaker_emb_dim"]],
        "norm.weight": [d],
        "output.weight": [a["vocab_size"], d],
    }
    for i in range(a["n_layer"]):
        p = f"layers.{i}."
        s[p + "attention.wqkv.weight"] = [(a["n_head"] + 2 * a["n_local_heads"]) * hd, d]
        s[p + "attention.wo.weight"] = [d, a["n_head"] * hd]
        s[p + "feed_forward.swiglu.w1.weight"] = [I, d]
        s[p + "feed_forward.swiglu.w3.weight"] = [I, d]
        s[p + "feed_forward.w2.weight"] = [d, I]
        s[p + "attention_norm.weight"] = [d]
        s[p + "ffn_norm.weight"] = [d]
    return s


def rmsnorm_fast(x, w, eps):
    # gpt-fast: computed in float32 (or wider) then cast back, then times the weight.
    xf = x if x.dtype == torch.float64 else x.float()
    out = xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + eps)
    return out.type_as(x) * w



def round_rows(t, top):
    """Each last-axis row of t rounded to integers in [-top, top] times the scale max|row| / top
    (rows of zeros stay zero)."""
    sc = t.abs().amax(dim=-1, keepdim=True) / top
    safe = torch.where(sc > 0, sc, torch.ones_like(sc))
    return torch.where(sc > 0, torch.round(t / safe).clamp(-top, top) * sc, torch.zeros_like(t))

class Stage1:
    """gpt-fast Transformer with a static KV cache, batch = the two guidance rows."""

    def __init__(self, args, weights, dtype=torch.float64):
        self.a = args
        w = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v for k, v in weights.items()}
        for name, shape in stage1_shapes(args).items():
            if name not in w:
                raise KeyError(f"missing tensor {name}")
            if list(w[name].shape) != shape:
                raise ValueError(f"{name}: shape {list(w[name].shape)}, expected {shape}")
        self.w = {k: v.to(dtype) for k, v in w.items()}
        self.dtype = dtype
        self.act_round = None
        self.kv_bf16 = False
        self.setup_caches()

    def round_activations(self, how):
        """Rounds the input of every weight matrix product like a CPU kernel that quantizes its
        activations: None (exact), "bf16", or ("int8", block): symmetric 8-bit per block of
        `block` values (scale max|x| / 127), as Q8_0 (32) / Q8_K (256) do."""
        self.act_round = how

    def round_kv(self, how):
        """Rounds keys and values like an engine's cache: None/False (exact); True or "bf16"
        (bf16 keys and values, queries rounded to bf16 for the scores, like a score kernel that
        multiplies bf16 pairs); "i8" (each head's row of keys or values to int8 with the scale
        max|x| / 127, queries to 16 bits per head with max|q| / 32767, like integer scores)."""
        self.kv_bf16 = "bf16" if how is True else (how or None)

    def _mm(self, x, name):
        how = self.act_round
        if how == "bf16":
            x = x.to(torch.bfloat16).to(x.dtype)
        elif how is not None:
            blk = how[1]
            y = x.reshape(-1, blk)
            sc = y.abs().max(dim=1, keepdim=True).values.clamp(min=1e-30) / 127
            x = (torch.round(y / sc) * sc).reshape(x.shape)
        return x @ self.w[name].T

    def setup_caches(self):
        a = self.a
        self.max_seq = find_multiple(a["block_size"], 8)
        shape = (2, a["n_local_heads"], self.max_seq, a["head_dim"])
        self.k_cache = [torch.zeros(shape, dtype=self.dtype) for _ in range(a["n_layer"])]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype) for _ in range(a["n_layer"])]
        self.causal_mask = torch.tril(torch.ones(self.max_seq, self.max_seq, dtype=torch.bool))

    def forward(self, idx, spk_emb, input_pos):
        """idx [2, S] tokens at positions input_pos [S]; spk_emb [speaker_emb_dim] or None.
        Returns logits [2, S, vocab]."""
        a, w = self.a, self.w
        H, KV, hd, d = a["n_head"], a["n_local_heads"], a["head_dim"], a["dim"]
        mask = self.causal_mask[None, None, input_pos]
        spk_cond_mask = torch.zeros((2, 1, d), dtype=torch.bool)
        spk_cond_mask[0] = 1
        x = w["tok_embeddings.weight"][idx] + w["pos_embeddings.weight"][input_pos]
        if spk_emb is not None:
            proj = spk_emb.to(self.dtype).reshape(1, 1, -1) @ w["speaker_cond_pos.weight"].T
            x = x + proj * spk_cond_mask
        bsz, S, _ = x.shape
        for i in range(a["n_layer"]):
            p = f"layers.{i}."
            h = rmsnorm_fast(x, w[p + "attention_norm.weight"], a["norm_eps"])
            qkv = self._mm(h, p + "attention.wqkv.weight")
            q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
            q = q.view(bsz, S, H, hd).transpose(1, 2)
            k = k.view(bsz, S, KV, hd).transpose(1, 2)
            v = v.view(bsz, S, KV, hd).transpose(1, 2)
            if self.kv_bf16 == "bf16":
                q, k, v = (t.to(torch.bfloat16).to(t.dtype) for t in (q, k, v))
            elif self.kv_bf16 == "i8":
                q = round_rows(q, 32767)
                k, v = round_rows(k, 127), round_rows(v, 127)
            self.k_cache[i][:, :, input_pos] = k
            self.v_cache[i][:, :, input_pos] = v
            kk = self.k_cache[i].repeat_interleave(H // KV, dim=1)
            vv = self.v_cache[i].repeat_interleave(H // KV, dim=1)
            y = sdpa(q, kk, vv, attn_mask=mask)
            y = y.transpose(1, 2).contiguous().view(bsz, S, H * hd)
            x = x + self._mm(y, p + "attention.wo.weight")
            h = rmsnorm_fast(x, w[p + "ffn_norm.weight"], a["norm_eps"])
            g = F.silu(self._mm(h, p + "feed_forward.swiglu.w1.weight")) * self._mm(h, p + "feed_forward.swiglu.w3.weight")
            x = x + self._mm(g, p + "feed_forward.w2.weight")
        x = rmsnorm_fast(x, w["norm.weight"], a["norm_eps"])
        return self._mm(x, "output.weight")

    def logits(self, tokens, spk_emb, chunks=None):
        """Both rows get `tokens` (as in the original). chunks: list of chunk lengths (None:
        one prefill). Returns [2, T, vocab]."""
        self.setup_caches()
        T = len(tokens)
        idx = torch.tensor([tokens, tokens], dtype=torch.long)
        chunks = chunks or [T]
        out, s = [], 0
        for n in chunks:
            pos = torch.arange(s, s + n)
            out.append(self.forward(idx[:, s:s + n], spk_emb, pos))
            s += n
        assert s == T
        return torch.cat(out, dim=1)


# ------------------------------------------------------------------ stage 2


def stage2_shapes(a):
    d, M = a["n_embd"], a["mlp_hidden"]
    s = {}
    for i, v in enumerate(a["vocab_sizes"]):
        s[f"transformer.wtes.{i}.weight"] = [v, d]
    s["transformer.wpe.weight"] = [a["block_size"], d]
    s["speaker_cond_pos.weight"] = [d, a["speaker_emb_dim"]]

    def norm(p):
        s[p + ".weight"] = [d]
        if a["bias"] and a["norm_type"] == "layernorm":
            s[p + ".bias"] = [d]

    def lin(p, o, i):
        s[p + ".weight"] = [o, i]
        if a["bias"]:
            s[p + ".bias"] = [o]

    for i in range(a["n_layer"]):
        p = f"transformer.h.{i}."
        norm(p + "ln_1")
        norm(p + "ln_2")
        lin(p + "attn.c_attn", 3 * d, d)
        lin(p + "attn.c_proj", d, d)
        if a["nonlinearity_type"] == "swiglu":
            lin(p + "mlp.swiglu.w1", M, d)
            lin(p + "mlp.swiglu.w3", M, d)
        else:
            lin(p + "mlp.c_fc", M, d)
        lin(p + "mlp.c_proj", d, M)
    norm("transformer.ln_f")
    if a["target_vocab_sizes"] is not None:
        for h, v in enumerate(a["target_vocab_sizes"]):
            s[f"lm_heads.{h}.weight"] = [v, d]
    return s


class Stage2:
    """MetaVoice nanoGPT."""

    def __init__(self, args, weights, dtype=torch.float64):
        self.a = args
        w = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v for k, v in weights.items()}
        for name, shape in stage2_shapes(args).items():
            if name not in w:
                raise KeyError(f"missing tensor {name}")
            if list(w[name].shape) != shape:
                raise ValueError(f"{name}: shape {list(w[name].shape)}, expected {shape}")
        self.w = {k: v.to(dtype) for k, v in w.items()}
        self.dtype = dtype

    def _norm(self, x, p):
        a, w = self.a, self.w
        if a["norm_type"] == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + a["rmsnorm_eps"]) * w[p + ".weight"]
        return F.layer_norm(x, (a["n_embd"],), w[p + ".weight"], w.get(p + ".bias"), 1e-5)

    def _lin(self, x, p):
        y = x @ self.w[p + ".weight"].T
        b = self.w.get(p + ".bias")
        return y + b if b is not None else y

    def forward(self, idx, spk_emb=None):
        """idx [B, n_hierarchies, T]; spk_emb [speaker_emb_dim] or None (no speaker term).
        Returns a list over heads of [B, T, vocab_h] (all positions)."""
        a, w = self.a, self.w
        B, nh, T = idx.shape
        assert T <= a["block_size"] and nh == len(a["vocab_sizes"])
        d, H, hd = a["n_embd"], a["n_head"], a["head_dim"]
        x = torch.zeros((B, T, d), dtype=self.dtype)
        for i in range(nh):
            x = x + w[f"transformer.wtes.{i}.weight"][idx[:, i, :]]
        x = x + w["transformer.wpe.weight"][torch.arange(T)]
        if spk_emb is not None:
            spk = (spk_emb.to(self.dtype).reshape(1, 1, -1) @ w["speaker_cond_pos.weight"].T)
            if not a["spk_emb_on_text"]:
                is_eot = idx[:, 0, :] == END_OF_TEXT_STAGE2
                mask = (torch.cumsum(is_eot, dim=-1) > 0).to(self.dtype)
                spk = spk * mask[:, :, None]
            x = x + spk
        for i in range(a["n_layer"]):
            p = f"transformer.h.{i}."
            c = self._lin(self._norm(x, p + "ln_1"), p + "attn.c_attn").view(B, T, 3, H, hd)
            q, k, v = (c[:, :, j].transpose(1, 2) for j in range(3))
            y = sdpa(q, k, v, is_causal=a["causal"])
            y = y.transpose(1, 2).contiguous().view(B, T, d)
            x = x + self._lin(y, p + "attn.c_proj")
            h = self._norm(x, p + "ln_2")
            if a["nonlinearity_type"] == "swiglu":
                m = F.silu(self._lin(h, p + "mlp.swiglu.w1")) * self._lin(h, p + "mlp.swiglu.w3")
            else:
                m = F.gelu(self._lin(h, p + "mlp.c_fc"))
            x = x + self._lin(m, p + "mlp.c_proj")
        x = self._norm(x, "transformer.ln_f")
        out = []
        for h in range(len(a["heads"])):
            name = f"lm_heads.{h}.weight"
            hw = w[name] if name in w else w[f"transformer.wtes.{h}.weight"]  # tied
            out.append(x @ hw.T)
        return out

    def logits(self, tokens, spk_emb=None):
        """tokens: [n_hierarchies][T] lists. Returns [heads, T, vocab] (equal head sizes)."""
        idx = torch.tensor([tokens], dtype=torch.long)
        return torch.stack([o[0] for o in self.forward(idx, spk_emb)])


# ------------------------------------------------------------------ tiny checkpoints


def _randn(g, shape, std, mean=0.0):
    return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean


def random_stage1_weights(a, seed):
    g = torch.Generator().manual_seed(seed)
    w = {}
    for name, shape in stage1_shapes(a).items():
        if len(shape) == 1:
            w[name] = _randn(g, shape, 0.1, 1.0)
        elif name in ("tok_embeddings.weight", "pos_embeddings.weight"):
            w[name] = _randn(g, shape, 0.5)
        else:
            w[name] = _randn(g, shape, 1.0 / math.sqrt(shape[1]))
    return w


def random_stage2_weights(a, seed):
    g = torch.Generator().manual_seed(seed + 1000)
    w = {}
    for name, shape in stage2_shapes(a).items():
        if name.endswith(".bias"):
            w[name] = _randn(g, shape, 0.1)
        elif len(shape) == 1:
            w[name] = _randn(g, shape, 0.1, 1.0)
        elif name.startswith("transformer.wtes") or name == "transformer.wpe.weight":
            w[name] = _randn(g, shape, 0.5)
        else:
            w[name] = _randn(g, shape, 1.0 / math.sqrt(shape[1]))
    return w


def random_speaker(seed, dim=256):
    g = torch.Generator().manual_seed(seed + 2000)
    s = torch.randn(dim, generator=g, dtype=torch.float64)
    return (s / s.norm()).float()  # L2-normalised, as the speaker encoder gives


_TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def write_tiny_stages(out_dir, seed=0, dtype="f32", stage1=None, stage2=None):
    """Writes first_stage.safetensors, second_stage.safetensors, spk_emb.safetensors and
    config.json (merged into an existing one) to out_dir. stage1 / stage2: model_args overrides
    of TINY_STAGE1 / TINY_STAGE2. Returns (stage1 args, stage2 args, stage-1 weights, stage-2
    weights, speaker embedding), weights as stored (upcast them to compare)."""
    os.makedirs(out_dir, exist_ok=True)
    a1 = stage1_args({**TINY_STAGE1, **(stage1 or {})})
    a2 = stage2_args({**TINY_STAGE2, **(stage2 or {})})
    td = _TORCH_DTYPES[dtype]
    w1 = {k: v.to(td) for k, v in random_stage1_weights(a1, seed).items()}
    w2 = {k: v.to(td) for k, v in random_stage2_weights(a2, seed).items()}
    spk = random_speaker(seed, a1["speaker_emb_dim"])
    safetensors_io.save_file(w1, os.path.join(out_dir, "first_stage.safetensors"))
    safetensors_io.save_file(w2, os.path.join(out_dir, "second_stage.safetensors"))
    safetensors_io.save_file({"spk_emb": spk.reshape(1, -1)}, os.path.join(out_dir, "spk_emb.safetensors"))
    cfg_path = os.path.join(out_dir, "config.json")
    cfg = {}
    if os.path.exists(cfg_path):
        with open(cfg_path) as f:
            cfg = json.load(f)
    cfg["first_stage"] = {"model_args": model_args_json(a1, RELEASED_STAGE1)}
    cfg["second_stage"] = {"model_args": model_args_json(a2, RELEASED_STAGE2)}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    return a1, a2, w1, w2, spk


def load_stages(model_dir, dtype=torch.float64):
    """The reference stages of a directory written by write_tiny_stages (f32/bf16 safetensors)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    a1 = stage1_args(cfg["first_stage"]["model_args"])
    a2 = stage2_args(cfg["second_stage"]["model_args"])
    w1 = safetensors_io.load_file(os.path.join(model_dir, "first_stage.safetensors"))
    w2 = safetensors_io.load_file(os.path.join(model_dir, "second_stage.safetensors"))
    spk = safetensors_io.load_file(os.path.join(model_dir, "spk_emb.safetensors"))["spk_emb"].reshape(-1)
    return Stage1(a1, w1, dtype), Stage2(a2, w2, dtype), spk.double()


# ------------------------------------------------------------------ GGUF (F32) writer


def save_gguf_f32(tensors, path, alignment=32):
    """A GGUF v3 file of F32 tensors (no metadata but general.alignment); dims innermost first."""
    def s(b):
        return struct.pack("<Q", len(b)) + b

    names = sorted(tensors)
    head = b"GGUF" + struct.pack("<I", 3) + struct.pack("<QQ", len(names), 1)
    head += s(b"general.alignment") + struct.pack("<I", 4) + struct.pack("<I", alignment)
    blobs, infos, off = [], b"", 0
    for n in names:
        t = tensors[n].detach().float().contiguous()
        data = t.numpy().astype("<f4").tobytes()
        dims = list(reversed(t.shape))
        infos += s(n.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims)
        infos += struct.pack("<I", 0) + struct.pack("<Q", off)
        blobs.append((off, data))
        off += len(data)
        off = (off + alignment - 1) // alignment * alignment
    out = head + infos
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    base = len(out)
    buf = bytearray(out)
    for o, data in blobs:
        buf += b"\0" * (base + o - len(buf))
        buf += data
    with open(path, "wb") as f:
        f.write(bytes(buf))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="f32", choices=sorted(_TORCH_DTYPES))
    a = ap.parse_args()
    write_tiny_stages(a.out, a.seed, a.dtype)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
