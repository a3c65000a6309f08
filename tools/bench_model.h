// Model benchmark behind `cachet bench -m MODEL` / `cachet bench --random NAME --type T`.
#pragma once
#include <string>

namespace cachet::cli {

struct BenchModelArgs {
  std::string model;        // path of a GGUF file, HF directory or METAVOICE_DIR ("" when random)
  std::string random_name;  // preset for a random-weight model built in memory (the
                            // RecurrentGemma presets, or "metavoice-1b": stage 1)
  std::string type = "Q4_K";
  int threads = 0;
  int prompt = 0;           // prefill length; 0: 512 (MetaVoice: 16)
  int long_context = 4096;  // second decode measurement after this many tokens (0: skip)
  int decode_steps = 32;    // tokens decoded per measurement
  double tts_seconds = 0;   // MetaVoice: also time the whole pipeline for this much audio
  bool profile = false;     // where the first decode figure's time goes, phase by phase
};

int bench_model(const BenchModelArgs& args);

}  // namespace cachet::cli
