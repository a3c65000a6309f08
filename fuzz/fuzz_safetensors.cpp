// libFuzzer target: the safetensors parser on arbitrary bytes must either succeed or throw
// cachet::Error; a successful parse must describe tensors that lie inside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cachet/error.h"
#include "cachet/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = cachet::SafetensorsFile::from_memory(data, size, "fuzz.safetensors");
    for (const auto& t : f->tensors()) {
      if (t.nbytes > 0) {
        volatile uint8_t a = t.bytes()[0];
        volatile uint8_t b = t.bytes()[t.nbytes - 1];
        (void)a;
        (void)b;
      }
      if (t.nbytes != static_cast<size_t>(t.numel()) *
                          static_cast<size_t>(cachet::dtype_info(t.dtype).block_bytes))
        std::abort();
    }
  } catch (const cachet::Error&) {
  }
  return 0;
}
