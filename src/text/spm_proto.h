// Minimal reader and writer of the SentencePiece ModelProto wire format: only the fields
// needed to move a vocabulary between a tokenizer.model and GGUF metadata.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cachet::spm_proto {

// Piece types as numbered by SentencePiece (and by llama.cpp's token_type).
enum PieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Piece {
  std::string piece;
  float score = 0.0f;
  int32_t type = kNormal;
};

struct Summary {
  std::vector<Piece> pieces;
  int32_t model_type = 1;  // 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  bool add_dummy_prefix = true;  // NormalizerSpec defaults
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses a serialized ModelProto; name is used in errors.
Summary parse(const std::string& bytes, const std::string& name);

struct BuildSpec {
  std::vector<Piece> pieces;
  int32_t model_type = 2;
  bool byte_fallback = true;
  bool add_dummy_prefix = false;
  int32_t unk_id = -1, bos_id = -1, eos_id = -1, pad_id = -1;
};

// Serializes a ModelProto with an identity normalizer.
std::string build(const BuildSpec& spec);

}  // namespace cachet::spm_proto
