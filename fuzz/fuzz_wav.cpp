// libFuzzer target: the WAV parser on arbitrary bytes must either succeed or throw
// cachet::Error. A successful parse must give whole frames of finite samples, no more samples
// than input bytes, and survive a float32 re-encode unchanged.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cachet/error.h"
#include "cachet/wav.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cachet::WavInfo info;
    const cachet::Wav w = cachet::parse_wav(data, size, "fuzz.wav", &info);
    if (w.channels < 1 || w.sample_rate < 1) std::abort();
    if (w.samples.size() % static_cast<size_t>(w.channels) != 0) std::abort();
    if (w.samples.size() > size) std::abort();
    for (float v : w.samples)
      if (!std::isfinite(v)) std::abort();
    const std::vector<float> mono = cachet::mix_to_mono(w);
    if (static_cast<int64_t>(mono.size()) != w.frames()) std::abort();
    cachet::WavWriteOptions o;
    o.format = cachet::WavSampleFormat::Float32;
    o.extensible = (size & 1) != 0;
    const std::vector<uint8_t> b = cachet::encode_wav(w, o);
    const cachet::Wav r = cachet::parse_wav(b.data(), b.size(), "roundtrip.wav");
    if (r.channels != w.channels || r.sample_rate != w.sample_rate || r.samples != w.samples)
      std::abort();
  } catch (const cachet::Error&) {
  }
  return 0;
}
