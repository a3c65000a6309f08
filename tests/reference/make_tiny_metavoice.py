"""A complete tiny random METAVOICE_DIR, built from the component references.

    python3 make_tiny_metavoice.py --out DIR [--seed S] [--dtype f32|bf16]

DIR receives:
  first_stage.safetensors, second_stage.safetensors, spk_emb.safetensors, config.json
      (metavoice_gpt.write_tiny_stages: tiny stage 1 with the real 2562-token vocabulary,
      tiny non-causal stage 2 with 2 input hierarchies and 6 heads)
  first_stage.meta.json          (mv_tokenizer.write_tiny_meta: 512-rank BPE, offset 2049)
  encodec_24khz/                 (encodec.write_tiny_encodec: HF config.json + model.safetensors
                                  with weight_g / weight_v pairs; 24 kHz, hop 320, 8 codebooks
                                  of 1024 codes as MetaVoice needs, few filters)
  speaker_encoder.safetensors    (speaker_encoder.random_state_dict, for --speaker WAV)
  speaker_encoder.pt             (the same weights in the original's torch.save layout)
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import encodec  # noqa: E402
import metavoice_gpt  # noqa: E402
import mv_tokenizer  # noqa: E402
import safetensors_io  # noqa: E402
import speaker_encoder  # noqa: E402

# EnCodec overrides: MetaVoice's 8 codebooks of 1024 codes and the real hop (320 samples per
# frame at 24 kHz, so that a few hundred frames are long enough for the loudness gate).
TINY_CODEC = dict(codebook_size=1024, num_quantizers=8, upsampling_ratios=[8, 5, 4, 2],
                  kernel_size=7, num_residual_layers=1)


def write_tiny_metavoice(out_dir, seed=0, dtype="f32", speaker=True):
    """Writes every part of a METAVOICE_DIR to out_dir; returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    metavoice_gpt.write_tiny_stages(out_dir, seed=seed, dtype=dtype)
    mv_tokenizer.write_tiny_meta(out_dir)
    encodec.write_tiny_encodec(os.path.join(out_dir, "encodec_24khz"), seed=seed, **TINY_CODEC)
    if speaker:
        state = speaker_encoder.random_state_dict(seed)
        safetensors_io.save_file({k: v.float().contiguous() for k, v in state.items()},
                                 os.path.join(out_dir, "speaker_encoder.safetensors"))
        speaker_encoder.write_pt(os.path.join(out_dir, "speaker_encoder.pt"), state)
    return out_dir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    a = ap.parse_args()
    write_tiny_metavoice(a.out, a.seed, a.dtype)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
