"""The whole MetaVoice pipeline in PyTorch, on the component references, greedy.

Follows the original fast path (metavoice-src fam/llm/fast_inference.py::TTS.synthesise with
fast_inference_utils.py::generate, adapters/flattened_encodec.py, inference.py::non_causal_sample,
mixins/non_causal.py, adapters/tilted_encodec.py), with the waveform as candle makes it (EnCodec
24 kHz decoder, loudness normalisation to -14 LUFS with tanh) instead of MultiBandDiffusion and
DeepFilterNet:

  prompt = BPE(normalize_text(text)) + 2049, EOT 2561
  stage 1: both guidance rows take the same tokens through one KV cache; the speaker term goes
           to row 0 only; logits = g * cond + (1 - g) * uncond at the last position; the token is
           the argmax (temperature 0); stop after the end-of-audio token 2048 or at the budget
           (block_size - len(prompt), or max_tokens)
  split:   t < 1024 -> c0, 1024 <= t < 2048 -> c1 - 1024, 2048 dropped, t > 2048 text; c0 and c1
           truncated to the shorter
  stage 2: h0 = text2 + c0 + [1024], h1 = [1024] * len(text2) + c1 + [1024], padded with 1024 or
           cut to block_size; one non-causal pass; argmax of each head at each position
  tilted:  keep the codes < 1024 of each of the 8 hierarchies, truncate all to the shortest
  audio:   EnCodec decode of the 8 x T codes, then loudness normalisation

    python3 metavoice_pipeline.py --dir METAVOICE_DIR --text TEXT [--max-tokens N]
        [--guidance 3.0] [--out codes.json]
"""

import argparse
import json
import os
import sys

import math

import torch
import torch.nn.functional as F

if not hasattr(F, "scaled_dot_product_attention"):  # torch < 2.0
    def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if is_causal:
            L, S = q.size(-2), k.size(-2)
            causal = torch.ones(L, S, dtype=torch.bool).tril()
            att = att.masked_fill(~causal, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                att = att.masked_fill(~attn_mask, float("-inf"))
            else:
                att = att + attn_mask
        return torch.softmax(att, dim=-1) @ v

    F.scaled_dot_product_attention = _sdpa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import metavoice_gpt  # noqa: E402
import mv_tokenizer  # noqa: E402

CODEBOOK = 1024
END_OF_AUDIO = 2048
STAGE2_PAD = 1024


def cfg_mix(cond, uncond, g):
    return g * cond + (1 - g) * uncond


def split_interleaved(tokens):
    c0, c1, text = [], [], []
    for t in tokens:
        if t < CODEBOOK:
            c0.append(t)
        elif t < 2 * CODEBOOK:
            c1.append(t - CODEBOOK)
        elif t > END_OF_AUDIO:
            text.append(t)
    n = min(len(c0), len(c1))
    return c0[:n], c1[:n], text


def stage2_input(text2, c0, c1, block_size):
    h0 = list(text2) + list(c0) + [STAGE2_PAD]
    h1 = [STAGE2_PAD] * len(text2) + list(c1) + [STAGE2_PAD]
    out = []
    for h in (h0, h1):
        h = h[:block_size]
        out.append(h + [STAGE2_PAD] * (block_size - len(h)))
    return out


def tilted_filter(hierarchies):
    out = [[t for t in h if 0 <= t < CODEBOOK] for h in hierarchies]
    n = min(len(x) for x in out)
    return [x[:n] for x in out]


def stage1_greedy(s1, prompt, spk, guidance, max_tokens=None):
    """The whole stage-1 sequence (prompt first) of greedy decoding."""
    T = len(prompt)
    block = s1.a["block_size"]
    if T >= block:
        raise ValueError("prompt too long")
    budget = block - T
    if max_tokens is not None and max_tokens > 0:
        budget = min(budget, max_tokens)
    s1.setup_caches()
    idx = torch.tensor([prompt, prompt], dtype=torch.long)
    logits = s1.forward(idx, spk, torch.arange(T))[:, -1]
    seq = list(prompt)
    tok = int(torch.argmax(cfg_mix(logits[0], logits[1], guidance)))
    seq.append(tok)
    n, pos = 1, T
    while tok != END_OF_AUDIO and n < budget:
        idx = torch.tensor([[tok], [tok]], dtype=torch.long)
        logits = s1.forward(idx, spk, torch.tensor([pos]))[:, -1]
        pos += 1
        tok = int(torch.argmax(cfg_mix(logits[0], logits[1], guidance)))
        seq.append(tok)
        n += 1
    return seq


def stage2_greedy(s2, text2, c0, c1, spk):
    block = s2.a["block_size"]
    hier = stage2_input(text2, c0, c1, block)
    heads = s2.forward(torch.tensor([hier], dtype=torch.long), spk)
    for h in heads:
        hier.append([int(x) for x in torch.argmax(h[0], dim=-1)])
    return hier


def synthesize_codes(model_dir, text, guidance=3.0, max_tokens=None, spk=None,
                     dtype=torch.float64):
    """Greedy text -> (stage-1 sequence, 8 x T codes)."""
    s1, s2, spk_default = metavoice_gpt.load_stages(model_dir, dtype)
    bpe = mv_tokenizer.BPE.from_meta(os.path.join(model_dir, "first_stage.meta.json"))
    spk = spk_default if spk is None else torch.as_tensor(spk, dtype=torch.float64).reshape(-1)
    norm = mv_tokenizer.normalize_text(text)
    if not norm:
        raise ValueError("empty text")
    prompt = bpe.stage1_ids(norm)
    text2 = bpe.stage2_ids(norm)
    with torch.no_grad():
        seq = stage1_greedy(s1, prompt, spk, guidance, max_tokens)
        c0, c1, _ = split_interleaved(seq)
        if not c0:
            raise ValueError("stage 1 produced no audio")
        hier = stage2_greedy(s2, text2, c0, c1, spk)
    return seq, tilted_filter(hier)


def decode_codes(model_dir, codes, normalize=True, encodec_dir=None):
    """EnCodec decode of 8 x T codes and loudness normalisation (the codec reference)."""
    import encodec
    d = encodec_dir or os.path.join(model_dir, "encodec_24khz")
    y = encodec.decode(d, codes)[0]
    if normalize:
        y = encodec.normalize_loudness(y.astype("float32"), 24000)
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--guidance", type=float, default=3.0)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    seq, codes = synthesize_codes(a.dir, a.text, a.guidance, a.max_tokens)
    print(f"stage 1: {len(seq)} tokens; codes: {len(codes)} x {len(codes[0])}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"codes": codes}, f)


if __name__ == "__main__":
    main()
