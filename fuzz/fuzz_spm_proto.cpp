// libFuzzer target: the SentencePiece ModelProto reader (the fields cachet moves between a
// tokenizer.model and GGUF metadata) on arbitrary bytes must either succeed or throw
// cachet::Error. What it reads must survive being written again and read back: the same pieces
// (text, score bits, type) and the same trainer and normalizer fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cachet/error.h"
#include "text/spm_proto.h"

namespace sp = cachet::spm_proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const sp::Summary s = sp::parse(bytes, "fuzz.model");
    if (s.pieces.size() > size / 2) std::abort();  // a piece takes a tag and a length at least
    sp::BuildSpec b;
    b.pieces = s.pieces;
    b.model_type = s.model_type;
    b.byte_fallback = s.byte_fallback;
    b.add_dummy_prefix = s.add_dummy_prefix;
    const sp::Summary r = sp::parse(sp::build(b), "rebuilt.model");
    if (r.pieces.size() != s.pieces.size() || r.model_type != s.model_type ||
        r.byte_fallback != s.byte_fallback || r.add_dummy_prefix != s.add_dummy_prefix ||
        r.remove_extra_whitespaces || !r.escape_whitespaces)
      std::abort();
    for (size_t i = 0; i < s.pieces.size(); ++i)
      if (r.pieces[i].piece != s.pieces[i].piece || r.pieces[i].type != s.pieces[i].type ||
          std::memcmp(&r.pieces[i].score, &s.pieces[i].score, sizeof(float)) != 0)
        std::abort();
  } catch (const cachet::Error&) {
  }
  return 0;
}
