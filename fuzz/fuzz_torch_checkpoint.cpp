// libFuzzer target: the PyTorch checkpoint reader (zip + pickle) on arbitrary bytes must either
// succeed or throw cachet::Error; every tensor it returns must own exactly its bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cachet/error.h"
#include "cachet/torch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* key : {"", "model_state"}) {
    try {
      const auto tensors = cachet::read_torch_checkpoint_memory(data, size, "fuzz.pt", key);
      for (const auto& t : tensors) {
        if (cachet::tensor_bytes(t.dtype, t.shape) != t.nbytes) std::abort();
        if (t.nbytes > 0) {
          volatile uint8_t a = t.bytes()[0];
          volatile uint8_t b = t.bytes()[t.nbytes - 1];
          (void)a;
          (void)b;
        }
      }
    } catch (const cachet::Error&) {
    }
  }
  return 0;
}
