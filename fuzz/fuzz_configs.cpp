// libFuzzer target: what users hand over as JSON (a RecurrentGemma config.json, the MetaVoice
// stage 1 and stage 2 model_args, an EnCodec config.json, an EnCodec codes file) on arbitrary
// bytes. Bytes that are not JSON are the JSON library's to refuse; for a JSON value each reader
// must either accept it or throw cachet::Error (an exception of any other type, such as the
// JSON library's type errors, which name no field, ends the run). The model configurations it
// accepts must write back to JSON that reads back the same; an EnCodec configuration must have
// a hop and a number of quantizers in range, codes must be rows of one length.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cachet/encodec.h"
#include "cachet/error.h"
#include "cachet/metavoice_gpt.h"
#include "cachet/recurrent_gemma.h"

namespace {

template <typename Config>
void round_trip(const nlohmann::json& j) {
  try {
    const Config c = Config::from_json(j, "fuzz.json");
    const nlohmann::json out = c.to_json();
    if (Config::from_json(out, "written.json").to_json() != out) std::abort();
  } catch (const cachet::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j =
      nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  round_trip<cachet::RecurrentGemmaConfig>(j);
  round_trip<cachet::MvStage1Args>(j);
  round_trip<cachet::MvStage2Args>(j);
  try {
    const cachet::EncodecConfig c = cachet::EncodecConfig::from_json(j, "fuzz.json");
    if (c.hop_length() < 1 || c.hop_length() > (1 << 20) || c.frame_rate() < 1 ||
        c.num_quantizers < 1 || c.num_quantizers > 4096)
      std::abort();
  } catch (const cachet::Error&) {
  }
  try {
    const auto codes = cachet::codes_from_json(j, "fuzz.json");
    for (const auto& row : codes) {
      if (row.size() != codes[0].size()) std::abort();
      for (int32_t v : row)
        if (v < 0) std::abort();
    }
  } catch (const cachet::Error&) {
  }
  return 0;
}
