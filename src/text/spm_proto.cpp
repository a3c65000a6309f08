#include "text/spm_proto.h"

#include <cstring>

#include "cachet/error.h"

namespace cachet::spm_proto {
namespace {

class Reader {
 public:
  Reader(const char* p, size_t n, const std::string& name) : p_(p), end_(p + n), name_(name) {}
  bool done() const { return p_ >= end_; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      CACHET_CHECK(p_ < end_, name_, ": truncated SentencePiece model (varint)");
      const uint8_t c = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (c < 0x80) return v;
    }
    fail(name_, ": malformed SentencePiece model (varint too long)");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    CACHET_CHECK(n <= static_cast<uint64_t>(end_ - p_), name_,
                 ": truncated SentencePiece model (field of ", n, " bytes)");
    std::string_view s(p_, n);
    p_ += n;
    return s;
  }
  uint32_t fixed32() {
    CACHET_CHECK(end_ - p_ >= 4, name_, ": truncated SentencePiece model (fixed32)");
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }
  void skip(int wire) {
    switch (wire) {
      case 0:
        varint();
        break;
      case 1:
        CACHET_CHECK(end_ - p_ >= 8, name_, ": truncated SentencePiece model (fixed64)");
        p_ += 8;
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed32();
        break;
      default:
        fail(name_, ": malformed SentencePiece model (wire type ", wire, ")");
    }
  }

 private:
  const char* p_;
  const char* end_;
  const std::string& name_;
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, int field, int wire) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire);
}
void put_bytes(std::string& out, int field, std::string_view s) {
  put_tag(out, field, 2);
  put_varint(out, s.size());
  out.append(s);
}
void put_int(std::string& out, int field, int64_t v) {
  put_tag(out, field, 0);
  put_varint(out, static_cast<uint64_t>(v));  // negative ints: 10-byte two's complement
}
void put_float(std::string& out, int field, float f) {
  put_tag(out, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  out.append(b, 4);
}

}  // namespace

Summary parse(const std::string& bytes, const std::string& name) {
  Summary s;
  Reader r(bytes.data(), bytes.size(), name);
  while (!r.done()) {
    const uint64_t tag = r.varint();
    const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (field == 1 && wire == 2) {
      std::string_view m = r.bytes();
      Reader pr(m.data(), m.size(), name);
      Piece p;
      while (!pr.done()) {
        const uint64_t t = pr.varint();
        const int f = static_cast<int>(t >> 3), w = static_cast<int>(t & 7);
        if (f == 1 && w == 2) {
          p.piece = std::string(pr.bytes());
        } else if (f == 2 && w == 5) {
          const uint32_t u = pr.fixed32();
          std::memcpy(&p.score, &u, 4);
        } else if (f == 3 && w == 0) {
          p.type = static_cast<int32_t>(pr.varint());
        } else {
          pr.skip(w);
        }
      }
      s.pieces.push_back(std::move(p));
    } else if ((field == 2 || field == 3) && wire == 2) {
      std::string_view m = r.bytes();
      Reader sr(m.data(), m.size(), name);
      while (!sr.done()) {
        const uint64_t t = sr.varint();
        const int f = static_cast<int>(t >> 3), w = static_cast<int>(t & 7);
        if (w == 0 && field == 2 && f == 3) {
          s.model_type = static_cast<int32_t>(sr.varint());
        } else if (w == 0 && field == 2 && f == 35) {
          s.byte_fallback = sr.varint() != 0;
        } else if (w == 0 && field == 3 && f == 3) {
          s.add_dummy_prefix = sr.varint() != 0;
        } else if (w == 0 && field == 3 && f == 4) {
          s.remove_extra_whitespaces = sr.varint() != 0;
        } else if (w == 0 && field == 3 && f == 5) {
          s.escape_whitespaces = sr.varint() != 0;
        } else {
          sr.skip(w);
        }
      }
    } else {
      r.skip(wire);
    }
  }
  return s;
}

std::string build(const BuildSpec& spec) {
  std::string out;
  for (const Piece& p : spec.pieces) {
    std::string m;
    put_bytes(m, 1, p.piece);
    put_float(m, 2, p.score);
    put_int(m, 3, p.type);
    put_bytes(out, 1, m);
  }
  auto piece_at = [&](int32_t id) -> std::string_view {
    if (id < 0 || static_cast<size_t>(id) >= spec.pieces.size()) return {};
    return spec.pieces[id].piece;
  };
  std::string trainer;
  put_int(trainer, 3, spec.model_type);
  put_int(trainer, 4, static_cast<int64_t>(spec.pieces.size()));
  put_int(trainer, 35, spec.byte_fallback ? 1 : 0);
  put_int(trainer, 40, spec.unk_id);
  put_int(trainer, 41, spec.bos_id);
  put_int(trainer, 42, spec.eos_id);
  put_int(trainer, 43, spec.pad_id);
  if (!piece_at(spec.unk_id).empty()) put_bytes(trainer, 45, piece_at(spec.unk_id));
  if (!piece_at(spec.bos_id).empty()) put_bytes(trainer, 46, piece_at(spec.bos_id));
  if (!piece_at(spec.eos_id).empty()) put_bytes(trainer, 47, piece_at(spec.eos_id));
  if (!piece_at(spec.pad_id).empty()) put_bytes(trainer, 48, piece_at(spec.pad_id));
  put_bytes(out, 2, trainer);
  std::string norm;
  put_bytes(norm, 1, "identity");
  put_int(norm, 3, spec.add_dummy_prefix ? 1 : 0);
  put_int(norm, 4, 0);
  put_int(norm, 5, 1);
  put_bytes(out, 3, norm);
  return out;
}

}  // namespace cachet::spm_proto
