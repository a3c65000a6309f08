"""Write tiny random RecurrentGemma models in the Hugging Face layout.

    python3 make_tiny_rg.py --preset tiny --out DIR [--dtype f32|bf16] [--shards N] [--seed S]

The directory gets config.json (model_type "recurrent_gemma") and model.safetensors (or
N shards plus model.safetensors.index.json). Weights are random with scales that keep the
model in its normal operating range: unit-variance embeddings after the sqrt(d) scale, logits
of a few units (below the soft cap), attention scores of order one, and Λ drawn like DM's
init so that the base decay sigmoid(-Λ) lies in (0.9, 0.999).
"""

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from recurrent_gemma import Config, expected_shapes  # noqa: E402

PRESETS = {
    # 6 layers (r, r, a) x 2, every contraction dim a multiple of 32.
    "tiny": dict(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        lru_width=64,
        intermediate_size=2 * 128,
        num_hidden_layers=6,
        attention_window_size=8,
        vocab_size=300,
    ),
    # Every contraction dim a multiple of 256, so that K-quants apply to every matrix.
    "tiny256": dict(
        hidden_size=256,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=128,
        lru_width=256,
        intermediate_size=2 * 512,
        num_hidden_layers=3,
        attention_window_size=16,
        vocab_size=512,
    ),
    # Grouped-query variant (2 KV heads for 4 query heads), untested by the released models.
    "tiny_gqa": dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        lru_width=64,
        intermediate_size=2 * 96,
        num_hidden_layers=3,
        attention_window_size=5,
        vocab_size=200,
    ),
}
# A long window (300 keys), on sequences longer than it: tiny with 3 layers.
PRESETS["tiny_longwin"] = dict(
    PRESETS["tiny"], num_hidden_layers=3, attention_window_size=300, vocab_size=100
)


def make_config(preset, **overrides):
    c = dict(
        model_type="recurrent_gemma",
        architectures=["RecurrentGemmaForCausalLM"],
        conv1d_width=4,
        logits_soft_cap=30.0,
        rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh",
        partial_rotary_factor=0.5,
        rope_theta=10000.0,
        block_types=["recurrent", "recurrent", "attention"],
        embeddings_scale_by_sqrt_dim=True,
        attention_bias=False,
        tie_word_embeddings=True,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
        torch_dtype="float32",
    )
    c.update(PRESETS[preset])
    c.update(overrides)
    return c


def lambda_init(n, gen, min_rad=0.9, max_rad=0.999):
    """DM's rnn_param_init: base decay a0 = sigmoid(-Λ) with a0^2 uniform in [min^2, max^2]."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    a0_sq = u * (max_rad**2 - min_rad**2) + min_rad**2
    sp = -0.5 * torch.log(a0_sq)  # softplus(Λ) = -log a0
    return torch.log(torch.expm1(sp)).float()  # inverse softplus


def init_weights(cfg_dict, seed=0, gain=1.0):
    """Random weights for every tensor of the config (float32)."""
    cfg = Config(cfg_dict)
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std):
        return torch.randn(shape, generator=gen) * std

    w = {}
    for name, shape in expected_shapes(cfg).items():
        if name.endswith("embed_tokens.weight"):
            # x0 = E * sqrt(d) has unit variance; logits have std ~gain*... of order 1-3.
            w[name] = normal(shape, 2.0 / math.sqrt(cfg.hidden_size))
        elif name.endswith("norm.weight"):
            w[name] = normal(shape, 0.1)  # scale is 1 + w
        elif name.endswith("conv_1d.weight"):
            w[name] = normal(shape, 1.0 / math.sqrt(cfg.conv1d_width))
        elif name.endswith("recurrent_param"):
            w[name] = lambda_init(shape[0], gen)
        elif name.endswith("_gate_weight"):
            w[name] = normal(shape, 1.0 / math.sqrt(shape[1]))
        elif name.endswith("_gate_bias"):
            w[name] = normal(shape, 0.1)
        elif name.endswith(".bias"):
            w[name] = normal(shape, 0.05)
        elif len(shape) == 2:
            fan_in = shape[1]
            std = gain / math.sqrt(fan_in)
            if name.endswith(("down_proj.weight", "linear_out.weight", "o_proj.weight")):
                std *= 0.5  # residual branch outputs
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                std *= 1.3  # attention scores of order one, not uniform
            w[name] = normal(shape, std)
        else:
            raise ValueError(f"no init rule for {name}")
    return w


def write_model(out_dir, cfg_dict, weights, dtype="f32", shards=1):
    torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    cfg_dict = dict(cfg_dict)
    cfg_dict["torch_dtype"] = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[dtype]
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".json")):
            os.remove(os.path.join(out_dir, f))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    safetensors_io.save_dir({k: v.to(torch_dtype) for k, v in weights.items()}, out_dir, shards)


def make(preset, out_dir, dtype="f32", shards=1, seed=0, untied=False, pattern_key="block_types"):
    cfg = make_config(preset)
    if pattern_key != "block_types":
        cfg[pattern_key] = cfg.pop("block_types")
    w = init_weights(cfg, seed)
    if untied:
        gen = torch.Generator().manual_seed(seed + 1000)
        w["lm_head.weight"] = torch.randn(w["model.embed_tokens.weight"].shape, generator=gen) * (
            2.0 / math.sqrt(cfg["hidden_size"])
        )
        cfg["tie_word_embeddings"] = False
    write_model(out_dir, cfg, w, dtype, shards)
    return out_dir


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--untied", action="store_true", help="write a separate lm_head.weight")
    ap.add_argument("--pattern-key", default="block_types", choices=["block_types", "_block_types"])
    a = ap.parse_args()
    make(a.preset, a.out, a.dtype, a.shards, a.seed, a.untied, a.pattern_key)
    print(a.out)


if __name__ == "__main__":
    main()
