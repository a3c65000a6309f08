// libFuzzer target: the GGUF parser on arbitrary bytes must either succeed or throw
// cachet::Error; a successful parse must describe tensors that lie inside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cachet/error.h"
#include "cachet/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = cachet::GgufFile::from_memory(data, size, "fuzz.gguf");
    for (const auto& [key, value] : f->metadata()) {
      (void)value.to_string();
      if (value.is_array() && value.size() > 0) (void)value.at(value.size() - 1);
    }
    for (const auto& t : f->tensors()) {
      const auto* first = t.bytes();
      if (t.nbytes > 0) {
        // Touch the first and last byte: ASan reports any view outside the buffer.
        volatile uint8_t a = first[0];
        volatile uint8_t b = first[t.nbytes - 1];
        (void)a;
        (void)b;
      }
      if (cachet::tensor_bytes(t.dtype, t.shape) != t.nbytes) std::abort();
    }
  } catch (const cachet::Error&) {
  }
  return 0;
}
