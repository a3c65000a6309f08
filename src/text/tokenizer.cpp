#include "cachet/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cachet/error.h"
#include "cachet/file.h"
#include "cachet/gguf.h"
#include "cachet/model_files.h"
#include "text/spm_proto.h"

namespace cachet {

namespace {

constexpr const char* kProtoKey = "tokenizer.sentencepiece.model";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";

int parse_byte_piece(const std::string& p) {
  // "<0xAB>"
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

}  // namespace

Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_model_proto(const std::string& bytes, const std::string& name) {
  CACHET_CHECK(!bytes.empty(), name, ": empty SentencePiece model");
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  CACHET_CHECK(status.ok(), name, ": not a valid SentencePiece model (", status.ToString(), ")");
  CACHET_CHECK(sp->GetPieceSize() > 0, name, ": SentencePiece model has an empty vocabulary");
  Tokenizer t;
  t.sp_ = std::move(sp);
  t.name_ = name;
  t.init();
  return t;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_model_proto(read_file(path), path);
}

Tokenizer Tokenizer::from_gguf(const GgufFile& gguf) {
  if (const GgufValue* v = gguf.find(kProtoKey)) {
    CACHET_CHECK(
        v->is_array() && (v->elem_type() == GgufType::UINT8 || v->elem_type() == GgufType::INT8),
        gguf.path(), ": metadata key '", kProtoKey, "' must be a uint8 array");
    std::string bytes(static_cast<const char*>(v->raw_data()), v->size());
    return from_model_proto(bytes, gguf.path() + " (" + kProtoKey + ")");
  }
  CACHET_CHECK(gguf.has(kTokensKey), gguf.path(),
               ": the file holds no tokenizer (no metadata key '", kProtoKey, "' or '", kTokensKey,
               "'): convert the model again from a directory with tokenizer.model");
  const std::string kind = gguf.get_string("tokenizer.ggml.model", "llama");
  CACHET_CHECK(kind == "llama", gguf.path(), ": tokenizer.ggml.model is '", kind,
               "'; only SentencePiece tokenizers ('llama') are supported");
  const std::vector<std::string> tokens = gguf.get_strings(kTokensKey);
  const size_t n = tokens.size();
  CACHET_CHECK(n > 0, gguf.path(), ": ", kTokensKey, " is empty");
  std::vector<float> scores(n, 0.0f);
  if (gguf.has("tokenizer.ggml.scores")) {
    scores = gguf.get_f32_array("tokenizer.ggml.scores");
    CACHET_CHECK(scores.size() == n, gguf.path(), ": tokenizer.ggml.scores has ", scores.size(),
                 " entries for ", n, " tokens");
  }
  std::vector<int32_t> types(n, spm_proto::kNormal);
  if (gguf.has("tokenizer.ggml.token_type")) {
    types = gguf.get_i32_array("tokenizer.ggml.token_type");
    CACHET_CHECK(types.size() == n, gguf.path(), ": tokenizer.ggml.token_type has ", types.size(),
                 " entries for ", n, " tokens");
  }
  spm_proto::BuildSpec spec;
  spec.pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t t = types[i];
    if (t < 1 || t > 6) t = spm_proto::kNormal;
    spec.pieces[i] = {tokens[i], scores[i], t};
  }
  auto id_key = [&](const char* key) -> int32_t {
    const int64_t id = gguf.get_int(key, -1);
    CACHET_CHECK(id >= -1 && id < static_cast<int64_t>(n), gguf.path(), ": ", key, " = ", id,
                 " is outside the vocabulary of ", n, " tokens");
    return static_cast<int32_t>(id);
  };
  spec.unk_id = id_key("tokenizer.ggml.unknown_token_id");
  spec.bos_id = id_key("tokenizer.ggml.bos_token_id");
  spec.eos_id = id_key("tokenizer.ggml.eos_token_id");
  spec.pad_id = id_key("tokenizer.ggml.padding_token_id");
  if (spec.unk_id < 0) {
    for (size_t i = 0; i < n; ++i)
      if (spec.pieces[i].type == spm_proto::kUnknown) spec.unk_id = static_cast<int32_t>(i);
  }
  CACHET_CHECK(spec.unk_id >= 0, gguf.path(), ": the vocabulary has no unknown token");
  spec.pieces[spec.unk_id].type = spm_proto::kUnknown;
  for (int32_t id : {spec.bos_id, spec.eos_id, spec.pad_id})
    if (id >= 0 && id != spec.unk_id) spec.pieces[id].type = spm_proto::kControl;
  spec.add_dummy_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix", true);
  return from_model_proto(spm_proto::build(spec), gguf.path() + " (" + kTokensKey + ")");
}

namespace {

// tokenizer.model in the folder of a model file ("" if there is none): a GGUF file without a
// tokenizer of its own (candle's RecurrentGemma GGUF files have none) or a .safetensors file
// of a checkpoint directory
std::string tokenizer_beside(const std::string& file) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const fs::path tm = dir / "tokenizer.model";
  std::error_code ec;
  return fs::is_regular_file(tm, ec) ? tm.string() : std::string();
}

// The tokenizer a GGUF file carries, else the tokenizer.model beside it
Tokenizer gguf_or_beside(const GgufFile& g, const std::string& path) {
  if (g.has(kProtoKey) || g.has(kTokensKey)) return Tokenizer::from_gguf(g);
  if (const std::string tm = tokenizer_beside(path); !tm.empty()) return Tokenizer::from_file(tm);
  fail(path, " has no tokenizer: the GGUF file has no '", kProtoKey,
       "' key and no tokenizer.model is beside it; put the model's tokenizer.model in the same "
       "folder, or convert the model again from a directory that contains one");
}

}  // namespace

Tokenizer Tokenizer::from_model_files(const ModelFiles& files) {
  if (files.gguf && (files.gguf->has(kProtoKey) || files.gguf->has(kTokensKey)))
    return from_gguf(*files.gguf);
  if (!files.tokenizer_model.empty()) return from_file(files.tokenizer_model);
  if (files.format == ModelFiles::Format::Gguf && files.gguf)
    return gguf_or_beside(*files.gguf, files.path);
  fail(files.path, " has no tokenizer: put tokenizer.model in the directory or use a GGUF file ",
       "converted with one");
}

Tokenizer Tokenizer::from_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  CACHET_CHECK(!ec && fs::exists(st), path, ": no such file or directory");
  if (fs::is_directory(st)) {
    const std::string tm = (fs::path(path) / "tokenizer.model").string();
    CACHET_CHECK(fs::exists(tm, ec), path,
                 " has no tokenizer: put tokenizer.model (a SentencePiece model) in the directory");
    return from_file(tm);
  }
  if (GgufFile::has_magic(path)) return gguf_or_beside(*GgufFile::open(path), path);
  if (fs::path(path).extension() == ".safetensors") {
    const std::string tm = tokenizer_beside(path);
    CACHET_CHECK(!tm.empty(), path,
                 " has no tokenizer: put the model's tokenizer.model in the same folder");
    return from_file(tm);
  }
  const std::string bytes = read_file(path);
  try {
    return from_model_proto(bytes, path);
  } catch (const Error&) {
    fail(path, ": not a GGUF file, a model directory or a SentencePiece model");
  }
}

void Tokenizer::init() {
  vocab_size_ = sp_->GetPieceSize();
  bos_ = sp_->bos_id();
  eos_ = sp_->eos_id();
  pad_ = sp_->pad_id();
  unk_ = sp_->unk_id();
  start_of_turn_ = piece_to_id("<start_of_turn>");
  end_of_turn_ = piece_to_id("<end_of_turn>");
  byte_of_.assign(vocab_size_, -1);
  for (int64_t i = 0; i < vocab_size_; ++i) {
    const int id = static_cast<int>(i);
    if (sp_->IsByte(id)) byte_of_[i] = static_cast<int16_t>(parse_byte_piece(sp_->IdToPiece(id)));
    if (sp_->IsControl(id) && !sp_->IdToPiece(id).empty())
      controls_.emplace_back(sp_->IdToPiece(id), static_cast<int32_t>(id));
  }
}

void Tokenizer::check_id(int32_t id) const {
  CACHET_CHECK(id >= 0 && id < vocab_size_, name_, ": token id ", id,
               " is outside the vocabulary (0..", vocab_size_ - 1, ")");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  CACHET_CHECK(status.ok(), name_, ": cannot encode text (", status.ToString(), ")");
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<int32_t> Tokenizer::encode_with_controls(std::string_view text) const {
  std::vector<int32_t> out;
  while (!text.empty()) {
    // The earliest control text (the longest where two start at one place)
    size_t at = std::string_view::npos, len = 0;
    int32_t which = -1;
    for (const auto& [piece, id] : controls_) {
      const size_t p = text.find(piece);
      if (p < at || (p == at && p != std::string_view::npos && piece.size() > len)) {
        at = p;
        len = piece.size();
        which = id;
      }
    }
    const auto before = encode(text.substr(0, at));
    out.insert(out.end(), before.begin(), before.end());
    if (at == std::string_view::npos) break;
    out.push_back(which);
    text.remove_prefix(at + len);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::vector<int> v(ids.begin(), ids.end());
  for (int id : v) check_id(id);
  std::string out;
  const auto status = sp_->Decode(v, &out);
  CACHET_CHECK(status.ok(), name_, ": cannot decode ids (", status.ToString(), ")");
  return out;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  check_id(id);
  return sp_->IdToPiece(id);
}

int32_t Tokenizer::piece_to_id(std::string_view piece) const {
  const int id = sp_->PieceToId(absl::string_view(piece.data(), piece.size()));
  if (id < 0 || id >= vocab_size_) return -1;
  if (sp_->IdToPiece(id) != piece) return -1;  // unknown pieces map to <unk>
  return id;
}

bool Tokenizer::is_byte(int32_t id) const {
  return id >= 0 && id < vocab_size_ && byte_of_[id] >= 0;
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size_ && sp_->IsControl(id);
}

int Tokenizer::byte_value(int32_t id) const {
  return (id >= 0 && id < vocab_size_) ? byte_of_[id] : -1;
}

std::string Tokenizer::model_proto() const {
  return sp_->serialized_model_proto();
}

// ---------------------------------------------------------------------------------------------
// StreamDecoder
//
// decode() of SentencePiece is prefix-stable except for runs of byte pieces: bytes that do not
// yet form a complete UTF-8 character decode to U+FFFD and change once the rest arrives. So the
// decoder keeps a small window of ids, decodes it without the trailing incomplete character and
// returns what is new. A complete character (or an invalid byte) never changes when more bytes
// follow, because a character's bytes after the first are continuation bytes (0x80..0xBF) and
// the held-back tail starts with a lead byte (>= 0xC0), which no earlier sequence can absorb.
// The window restarts at the last id when that is an ordinary piece that decodes to non-empty
// text on its own: everything after it decodes as it does in the full sequence (the leading
// space of a piece is only dropped while the text is still empty).

size_t StreamDecoder::pending_bytes() const {
  // Trailing run of byte pieces (at most the last 3 matter).
  size_t run = 0;
  while (run < window_.size() && run < 3 && tok_->is_byte(window_[window_.size() - 1 - run])) ++run;
  for (size_t j = 1; j <= run; ++j) {  // j: length of the tail starting at a lead byte
    const int b = tok_->byte_value(window_[window_.size() - j]);
    if (b >= 0x80 && b < 0xC0) continue;  // continuation byte: keep looking back
    if (b < 0xC0 || b >= 0xF8) return 0;  // ASCII or never valid: nothing pending
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    return j < need ? j : 0;
  }
  return 0;
}

std::string StreamDecoder::push(int32_t id) {
  CACHET_CHECK(id >= 0 && id < tok_->vocab_size(), tok_->name(), ": token id ", id,
               " is outside the vocabulary (0..", tok_->vocab_size() - 1, ")");
  window_.push_back(id);
  const size_t k = pending_bytes();
  const std::string text =
      tok_->decode(std::span<const int32_t>(window_.data(), window_.size() - k));
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  emitted_ = std::max(emitted_, text.size());
  if (k == 0 && !tok_->is_byte(id) && !tok_->is_control(id)) {
    const int32_t one[1] = {id};
    const std::string alone = tok_->decode(one);
    if (!alone.empty()) {
      window_.assign(1, id);
      emitted_ = alone.size();
    }
  }
  return out;
}

std::string StreamDecoder::finish() {
  const std::string text = tok_->decode(window_);
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  reset();
  return out;
}

void StreamDecoder::reset() {
  window_.clear();
  emitted_ = 0;
}

// ---------------------------------------------------------------------------------------------

void write_tokenizer_to_gguf(GgufWriter& writer, const std::string& model_proto_bytes,
                             const std::string& name) {
  const Tokenizer tok = Tokenizer::from_model_proto(model_proto_bytes, name);  // validates
  const spm_proto::Summary s = spm_proto::parse(model_proto_bytes, name);
  CACHET_CHECK(static_cast<int64_t>(s.pieces.size()) == tok.vocab_size(), name, ": ",
               s.pieces.size(), " pieces parsed but the model has ", tok.vocab_size());
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(s.pieces.size());
  for (const auto& p : s.pieces) {
    tokens.push_back(p.piece);
    scores.push_back(p.score);
    types.push_back(p.type);
  }
  auto add = [&](const std::string& key, GgufValue v) {
    if (!writer.has(key)) writer.add(key, std::move(v));
  };
  add("tokenizer.ggml.model", GgufValue::string("llama"));
  add("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  add("tokenizer.ggml.scores", GgufValue::array_of(scores));
  add("tokenizer.ggml.token_type", GgufValue::array_of(types));
  auto add_id = [&](const char* key, int32_t id) {
    if (id >= 0) add(key, GgufValue::u32(static_cast<uint32_t>(id)));
  };
  add_id("tokenizer.ggml.bos_token_id", tok.bos_id());
  add_id("tokenizer.ggml.eos_token_id", tok.eos_id());
  add_id("tokenizer.ggml.padding_token_id", tok.pad_id());
  add_id("tokenizer.ggml.unknown_token_id", tok.unk_id());
  add("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  add("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
  add("tokenizer.ggml.add_space_prefix", GgufValue::boolean(s.add_dummy_prefix));
  std::vector<uint8_t> raw(model_proto_bytes.begin(), model_proto_bytes.end());
  add(kProtoKey, GgufValue::array_of(raw));
}

}  // namespace cachet
