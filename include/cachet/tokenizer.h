// SentencePiece tokenizer (through libsentencepiece, so results are those of the SentencePiece
// library) and a streaming detokenizer.
//
// Inside GGUF files written by cachet the tokenizer travels as:
//   tokenizer.sentencepiece.model   uint8 array: the serialized ModelProto (tokenizer.model)
// plus, for other readers, the llama.cpp-style keys
//   tokenizer.ggml.model = "llama", tokenizer.ggml.tokens (string array),
//   tokenizer.ggml.scores (float32 array), tokenizer.ggml.token_type (int32 array: 1 normal,
//   2 unknown, 3 control, 4 user defined, 5 unused, 6 byte), tokenizer.ggml.{bos,eos,padding,
//   unknown}_token_id (uint32, written when the model defines them),
//   tokenizer.ggml.add_bos_token, tokenizer.ggml.add_eos_token, tokenizer.ggml.add_space_prefix.
// GGUF files without the serialized model but with the llama.cpp keys are read too: a model
// proto is rebuilt from the vocabulary (BPE with byte fallback, identity normalizer).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace cachet {

class GgufFile;
class GgufWriter;
struct ModelFiles;

class Tokenizer {
 public:
  // Serialized ModelProto bytes; name is used in error messages.
  static Tokenizer from_model_proto(const std::string& bytes, const std::string& name);
  // A SentencePiece model file (tokenizer.model).
  static Tokenizer from_file(const std::string& path);
  // The tokenizer stored in a GGUF file (see above); errors when it has none.
  static Tokenizer from_gguf(const GgufFile& gguf);
  // The GGUF keys, else files.tokenizer_model; a clear error when the model has neither.
  static Tokenizer from_model_files(const ModelFiles& files);
  // Any of: a GGUF file, a directory with tokenizer.model (nothing else needed), or a
  // SentencePiece model file.
  static Tokenizer from_path(const std::string& path);

  Tokenizer(const Tokenizer&) = default;  // shares the immutable processor
  Tokenizer& operator=(const Tokenizer&) = default;
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  ~Tokenizer();

  const std::string& name() const { return name_; }
  int64_t vocab_size() const { return vocab_size_; }

  // Text to ids, without BOS/EOS.
  std::vector<int32_t> encode(std::string_view text) const;
  // The same, but the text of a control token (Gemma's <bos>, <eos>, <pad>) is that token, as
  // llama.cpp and Hugging Face tokenizers read prompts: a prompt rendered by a chat template
  // keeps its <bos>. encode() leaves such text to SentencePiece, which spells it out.
  std::vector<int32_t> encode_with_controls(std::string_view text) const;
  // Ids to text exactly as SentencePiece decodes them (control tokens are invisible); ids
  // outside the vocabulary are an error.
  std::string decode(std::span<const int32_t> ids) const;

  std::string id_to_piece(int32_t id) const;          // error when out of range
  int32_t piece_to_id(std::string_view piece) const;  // -1 when not a piece of the vocabulary

  // -1 when the model does not define the token.
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }
  int32_t unk_id() const { return unk_; }
  int32_t start_of_turn_id() const { return start_of_turn_; }  // <start_of_turn>
  int32_t end_of_turn_id() const { return end_of_turn_; }      // <end_of_turn>

  bool is_byte(int32_t id) const;
  bool is_control(int32_t id) const;
  // The byte value of a byte-fallback piece such as <0xE2>, or -1.
  int byte_value(int32_t id) const;

  // The serialized ModelProto.
  std::string model_proto() const;

  const sentencepiece::SentencePieceProcessor& processor() const { return *sp_; }

 private:
  Tokenizer() = default;
  void init();
  void check_id(int32_t id) const;

  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::string name_;
  int64_t vocab_size_ = 0;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
  int32_t start_of_turn_ = -1, end_of_turn_ = -1;
  std::vector<int16_t> byte_of_;                           // byte value per id, -1 for other pieces
  std::vector<std::pair<std::string, int32_t>> controls_;  // control pieces' text and ids
};

// Turns ids fed one at a time into text. Each push() returns the text that is now final; the
// concatenation of all pushes and finish() equals tokenizer.decode(all ids). Byte-fallback
// pieces are held until they form a complete UTF-8 character, so a chunk never ends in the
// middle of one.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}
  std::string push(int32_t id);
  // The rest (bytes of an incomplete character come out as decode() renders them).
  std::string finish();
  void reset();

 private:
  size_t pending_bytes() const;
  const Tokenizer* tok_;
  std::vector<int32_t> window_;  // ids since the last rebase point
  size_t emitted_ = 0;           // bytes of decode(window_) already returned
};

// Adds the tokenizer keys described above to a GGUF being written (for `cachet convert`).
void write_tokenizer_to_gguf(GgufWriter& writer, const std::string& model_proto_bytes,
                             const std::string& name = "tokenizer.model");

}  // namespace cachet
