#include "cachet/torch_checkpoint.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>

#include "cachet/error.h"
#include "cachet/mmap.h"
#include "cachet/safetensors.h"

namespace cachet {

namespace {

// ---------------------------------------------------------------------------------------------
// Zip archive (stored entries only, as torch.save writes them; zip64 records supported).

struct ZipEntry {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

class Zip {
 public:
  Zip(const uint8_t* data, size_t size, const std::string& name) : d_(data), n_(size), name_(name) {
    parse();
  }
  const std::map<std::string, ZipEntry>& entries() const { return entries_; }

 private:
  [[noreturn]] void bad(std::string_view what) const {
    fail(name_, ": not a valid PyTorch zip checkpoint (", what, ")");
  }
  uint64_t rd(uint64_t off, int bytes) const {
    if (off > n_ || static_cast<uint64_t>(bytes) > n_ - off) bad("truncated record");
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | d_[off + i];
    return v;
  }

  void parse() {
    if (n_ < 22) bad("file too small for a zip archive");
    // End of central directory: scan backwards over a possible comment.
    int64_t eocd = -1;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(n_) - 22 - 65535);
    for (int64_t p = static_cast<int64_t>(n_) - 22; p >= lo; --p)
      if (rd(p, 4) == 0x06054b50) {
        eocd = p;
        break;
      }
    if (eocd < 0) {
      if (n_ >= 2 && d_[0] == 0x80) {
        fail(name_,
             ": a legacy (non-zip) torch.save file; save it again with a current PyTorch "
             "(torch.save uses the zip format since 1.6)");
      }
      bad("no end of central directory record");
    }
    uint64_t count = rd(eocd + 10, 2);
    uint64_t cd_size = rd(eocd + 12, 4);
    uint64_t cd_off = rd(eocd + 16, 4);
    if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
      if (eocd < 20 || rd(eocd - 20, 4) != 0x07064b50) bad("missing zip64 locator");
      const uint64_t z = rd(eocd - 20 + 8, 8);
      if (rd(z, 4) != 0x06064b50) bad("bad zip64 end of central directory");
      count = rd(z + 32, 8);
      cd_size = rd(z + 40, 8);
      cd_off = rd(z + 48, 8);
    }
    if (cd_off > n_ || cd_size > n_ - cd_off) bad("central directory outside the file");
    if (count > cd_size / 46 + 1) bad("implausible entry count");
    uint64_t p = cd_off;
    for (uint64_t i = 0; i < count; ++i) {
      if (rd(p, 4) != 0x02014b50) bad("bad central directory entry");
      const uint64_t method = rd(p + 10, 2);
      uint64_t csize = rd(p + 20, 4), usize = rd(p + 24, 4);
      const uint64_t name_len = rd(p + 28, 2), extra_len = rd(p + 30, 2),
                     comment_len = rd(p + 32, 2);
      uint64_t local = rd(p + 42, 4);
      if (p + 46 + name_len > n_) bad("truncated entry name");
      std::string name(reinterpret_cast<const char*>(d_ + p + 46), name_len);
      // Zip64 extended information.
      uint64_t e = p + 46 + name_len;
      const uint64_t e_end = e + extra_len;
      if (e_end > n_) bad("truncated extra field");
      while (e + 4 <= e_end) {
        const uint64_t id = rd(e, 2), len = rd(e + 2, 2);
        if (e + 4 + len > e_end) bad("truncated extra field");
        if (id == 0x0001) {
          uint64_t q = e + 4;
          auto take = [&](uint64_t* v) {
            if (*v == 0xFFFFFFFFu) {
              if (q + 8 > e + 4 + len) bad("short zip64 extra field");
              *v = rd(q, 8);
              q += 8;
            }
          };
          take(&usize);
          take(&csize);
          take(&local);
        }
        e += 4 + len;
      }
      p = e_end + comment_len;
      if (method != 0)
        fail(name_, ": entry '", name, "' is compressed (method ", method,
             "); only stored entries, as torch.save writes, are supported");
      if (csize != usize) bad("stored entry with different sizes");
      if (rd(local, 4) != 0x04034b50) bad("bad local header of '" + name + "'");
      const uint64_t data = local + 30 + rd(local + 26, 2) + rd(local + 28, 2);
      if (data > n_ || usize > n_ - data) fail(name_, ": entry '", name, "' lies outside the file");
      entries_[name] = ZipEntry{d_ + data, usize};
    }
  }

  const uint8_t* d_;
  size_t n_;
  const std::string& name_;
  std::map<std::string, ZipEntry> entries_;
};

// ---------------------------------------------------------------------------------------------
// Unpickler for the subset torch.save emits.

struct Obj {
  enum Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kGlobal,
    kStorage,
    kTensor,
    kOpaque,
    kMark
  } kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                            // str, bytes, "module.name" of a global
  std::vector<Obj*> items;                  // list / tuple
  std::vector<std::pair<Obj*, Obj*>> dict;  // dict, in insertion order
  // kStorage
  DType dtype = DType::F32;
  std::string key;
  // kTensor
  Obj* storage = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> shape, strides;
};

struct StorageInfo {
  const char* name;
  DType dtype;
};
constexpr StorageInfo kStorages[] = {
    {"FloatStorage", DType::F32},  {"HalfStorage", DType::F16}, {"BFloat16Storage", DType::BF16},
    {"DoubleStorage", DType::F64}, {"LongStorage", DType::I64}, {"IntStorage", DType::I32},
    {"ShortStorage", DType::I16},  {"CharStorage", DType::I8},  {"ByteStorage", DType::U8},
    {"BoolStorage", DType::BOOL},
};

class Unpickler {
 public:
  Unpickler(const uint8_t* d, size_t n, const std::string& name, const Zip& zip,
            const std::string& prefix)
      : d_(d), n_(n), name_(name), zip_(zip), prefix_(prefix) {}

  Obj* load() {
    while (true) {
      const uint8_t op = u8();
      switch (op) {
        case 0x80:
          u8();
          break;  // PROTO
        case 0x95:
          take(8);
          break;     // FRAME
        case '.': {  // STOP
          if (stack_.size() != 1 || stack_[0]->kind == Obj::kMark) bad("unbalanced stack at STOP");
          return stack_[0];
        }
        case '}':
          push(make(Obj::kDict));
          break;
        case ']':
          push(make(Obj::kList));
          break;
        case ')':
          push(make(Obj::kTuple));
          break;
        case 0x8f:
          push(make(Obj::kOpaque));
          break;  // EMPTY_SET
        case '(':
          push(make(Obj::kMark));
          break;
        case 'N':
          push(make(Obj::kNone));
          break;
        case 0x88:
        case 0x89: {
          Obj* o = make(Obj::kBool);
          o->i = op == 0x88;
          push(o);
          break;
        }
        case 'J':
          push_int(static_cast<int32_t>(le(4)));
          break;
        case 'K':
          push_int(static_cast<int64_t>(le(1)));
          break;
        case 'M':
          push_int(static_cast<int64_t>(le(2)));
          break;
        case 0x8a: {  // LONG1
          const size_t len = le(1);
          if (len > 8) bad("integer wider than 64 bits");
          const uint8_t* p = take(len);
          uint64_t v = 0;
          for (size_t k = len; k-- > 0;) v = (v << 8) | p[k];
          if (len > 0 && len < 8 && (p[len - 1] & 0x80)) v |= ~uint64_t{0} << (8 * len);
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const uint8_t* p = take(8);
          uint64_t v = 0;
          for (int k = 0; k < 8; ++k) v = (v << 8) | p[k];
          Obj* o = make(Obj::kFloat);
          std::memcpy(&o->f, &v, 8);
          push(o);
          break;
        }
        case 'X':
          push_str(Obj::kStr, le(4));
          break;  // BINUNICODE
        case 0x8c:
          push_str(Obj::kStr, le(1));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push_str(Obj::kStr, le(8));
          break;  // BINUNICODE8
        case 'T':
          push_str(Obj::kStr, le(4));
          break;  // BINSTRING
        case 'U':
          push_str(Obj::kStr, le(1));
          break;  // SHORT_BINSTRING
        case 'B':
          push_str(Obj::kBytes, le(4));
          break;  // BINBYTES
        case 'C':
          push_str(Obj::kBytes, le(1));
          break;  // SHORT_BINBYTES
        case 0x8e:
          push_str(Obj::kBytes, le(8));
          break;  // BINBYTES8
        case 'q':
          memo_[le(1)] = top();
          break;  // BINPUT
        case 'r':
          memo_[le(4)] = top();
          break;  // LONG_BINPUT
        case 0x94:
          memo_[memo_.size()] = top();
          break;  // MEMOIZE
        case 'h':
          push(memo(le(1)));
          break;  // BINGET
        case 'j':
          push(memo(le(4)));
          break;  // LONG_BINGET
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_mark();
          break;  // POP_MARK
        case '2':
          push(top());
          break;     // DUP
        case 'c': {  // GLOBAL
          std::string mod = line(), nm = line();
          push_global(mod + "." + nm);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Obj* nm = pop();
          Obj* mod = pop();
          if (nm->kind != Obj::kStr || mod->kind != Obj::kStr) bad("STACK_GLOBAL needs strings");
          push_global(mod->s + "." + nm->s);
          break;
        }
        case 't': {
          Obj* o = make(Obj::kTuple);
          o->items = pop_mark();
          push(o);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
          const size_t k = op - 0x84;
          Obj* o = make(Obj::kTuple);
          o->items.resize(k);
          for (size_t j = k; j-- > 0;) o->items[j] = pop();
          push(o);
          break;
        }
        case 'l': {
          Obj* o = make(Obj::kList);
          o->items = pop_mark();
          push(o);
          break;
        }
        case 'd': {
          auto items = pop_mark();
          if (items.size() % 2) bad("DICT with an odd number of items");
          Obj* o = make(Obj::kDict);
          for (size_t j = 0; j < items.size(); j += 2) o->dict.emplace_back(items[j], items[j + 1]);
          push(o);
          break;
        }
        case 'a': {
          Obj* v = pop();
          Obj* l = top();
          if (l->kind != Obj::kList) bad("APPEND to a non-list");
          l->items.push_back(v);
          break;
        }
        case 'e': {
          auto items = pop_mark();
          Obj* l = top();
          if (l->kind == Obj::kOpaque) break;
          if (l->kind != Obj::kList) bad("APPENDS to a non-list");
          l->items.insert(l->items.end(), items.begin(), items.end());
          break;
        }
        case 0x90:
          pop_mark();
          break;  // ADDITEMS (sets are opaque)
        case 's': {
          Obj* v = pop();
          Obj* k = pop();
          set_item(top(), k, v);
          break;
        }
        case 'u': {
          auto items = pop_mark();
          if (items.size() % 2) bad("SETITEMS with an odd number of items");
          Obj* dct = top();
          for (size_t j = 0; j < items.size(); j += 2) set_item(dct, items[j], items[j + 1]);
          break;
        }
        case 'b': {  // BUILD: state of objects is not needed (e.g. OrderedDict._metadata)
          pop();
          top();
          break;
        }
        case 'R': {  // REDUCE
          Obj* args = pop();
          Obj* fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 0x81: {  // NEWOBJ
          Obj* args = pop();
          Obj* cls = pop();
          push(reduce(cls, args));
          break;
        }
        case 'Q': {  // BINPERSID
          Obj* pid = pop();
          push(persistent(pid));
          break;
        }
        default:
          bad("unsupported pickle opcode 0x" + hex(op));
      }
    }
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail(name_, ": data.pkl at byte ", pos_, ": ", what);
  }
  static std::string hex(unsigned v) {
    const char* h = "0123456789abcdef";
    return std::string{h[(v >> 4) & 15], h[v & 15]};
  }
  uint8_t u8() {
    if (pos_ >= n_) bad("unexpected end of the pickle");
    return d_[pos_++];
  }
  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_) bad("unexpected end of the pickle");
    const uint8_t* p = d_ + pos_;
    pos_ += k;
    return p;
  }
  uint64_t le(int k) {
    const uint8_t* p = take(k);
    uint64_t v = 0;
    for (int j = k - 1; j >= 0; --j) v = (v << 8) | p[j];
    return v;
  }
  std::string line() {
    std::string s;
    while (true) {
      const uint8_t c = u8();
      if (c == '\n') return s;
      if (s.size() > 256) bad("GLOBAL name too long");
      s.push_back(static_cast<char>(c));
    }
  }
  Obj* make(Obj::Kind k) {
    pool_.push_back(std::make_unique<Obj>());
    pool_.back()->kind = k;
    return pool_.back().get();
  }
  void push(Obj* o) { stack_.push_back(o); }
  void push_int(int64_t v) {
    Obj* o = make(Obj::kInt);
    o->i = v;
    push(o);
  }
  void push_str(Obj::Kind k, uint64_t len) {
    const uint8_t* p = take(len);
    Obj* o = make(k);
    o->s.assign(reinterpret_cast<const char*>(p), len);
    push(o);
  }
  void push_global(const std::string& qual) {
    Obj* o = make(Obj::kGlobal);
    o->s = qual;
    push(o);
  }
  Obj* top() {
    if (stack_.empty() || stack_.back()->kind == Obj::kMark) bad("stack underflow");
    return stack_.back();
  }
  Obj* pop() {
    Obj* o = top();
    stack_.pop_back();
    return o;
  }
  std::vector<Obj*> pop_mark() {
    size_t k = stack_.size();
    while (k > 0 && stack_[k - 1]->kind != Obj::kMark) --k;
    if (k == 0) bad("no MARK on the stack");
    std::vector<Obj*> items(stack_.begin() + k, stack_.end());
    stack_.resize(k - 1);
    return items;
  }
  Obj* memo(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) bad("memo key " + std::to_string(k) + " was never stored");
    return it->second;
  }
  void set_item(Obj* dct, Obj* k, Obj* v) {
    if (dct->kind == Obj::kOpaque) return;
    if (dct->kind != Obj::kDict) bad("SETITEM on a non-dict");
    dct->dict.emplace_back(k, v);
  }

  int64_t as_int(Obj* o, const char* what) {
    if (o->kind != Obj::kInt && o->kind != Obj::kBool)
      bad(std::string(what) + " is not an integer");
    return o->i;
  }
  std::vector<int64_t> int_tuple(Obj* o, const char* what) {
    if (o->kind != Obj::kTuple && o->kind != Obj::kList) bad(std::string(what) + " is not a tuple");
    if (o->items.size() > 16) bad(std::string(what) + " has more than 16 dimensions");
    std::vector<int64_t> v;
    for (Obj* x : o->items) v.push_back(as_int(x, what));
    return v;
  }

  Obj* reduce(Obj* fn, Obj* args) {
    if (fn->kind != Obj::kGlobal) return make(Obj::kOpaque);
    if (args->kind != Obj::kTuple) bad("REDUCE arguments are not a tuple");
    const std::string& f = fn->s;
    const auto& a = args->items;
    if (f == "collections.OrderedDict" || f == "builtins.dict" || f == "__builtin__.dict") {
      Obj* o = make(Obj::kDict);
      if (!a.empty()) {
        copied_ += a[0]->dict.size() + a[0]->items.size();
        if (copied_ > 10000000) bad("too many dict items copied");
      }
      if (!a.empty() && a[0]->kind == Obj::kDict) o->dict = a[0]->dict;
      if (!a.empty() && a[0]->kind == Obj::kList)
        for (Obj* it : a[0]->items)
          if (it->kind == Obj::kTuple && it->items.size() == 2)
            o->dict.emplace_back(it->items[0], it->items[1]);
      return o;
    }
    if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") {
      if (a.size() < 4) bad("_rebuild_tensor_v2 needs (storage, offset, size, stride, ...)");
      if (a[0]->kind != Obj::kStorage) bad("_rebuild_tensor_v2: first argument is not a storage");
      Obj* t = make(Obj::kTensor);
      t->storage = a[0];
      t->offset = as_int(a[1], "storage offset");
      t->shape = int_tuple(a[2], "tensor size");
      t->strides = int_tuple(a[3], "tensor stride");
      if (t->shape.size() != t->strides.size()) bad("tensor size and stride differ in rank");
      return t;
    }
    if (f == "torch._utils._rebuild_parameter" ||
        f == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty()) bad("_rebuild_parameter without arguments");
      return a[0];
    }
    if (f == "torch._tensor._rebuild_from_type_v2") {
      // (func, type, args, state): the plain tensor rebuilt by func(*args).
      if (a.size() < 3) bad("_rebuild_from_type_v2 needs (func, type, args, state)");
      return reduce(a[0], a[2]);
    }
    return make(Obj::kOpaque);
  }

  Obj* persistent(Obj* pid) {
    if (pid->kind != Obj::kTuple || pid->items.size() < 5 || pid->items[0]->kind != Obj::kStr ||
        pid->items[0]->s != "storage")
      bad("unsupported persistent id (expected ('storage', type, key, location, numel))");
    Obj* type = pid->items[1];
    Obj* key = pid->items[2];
    if (type->kind != Obj::kGlobal) bad("storage type is not a class");
    if (key->kind != Obj::kStr) bad("storage key is not a string");
    const std::string& q = type->s;
    const size_t dot = q.rfind('.');
    const std::string cls = dot == std::string::npos ? q : q.substr(dot + 1);
    Obj* s = make(Obj::kStorage);
    bool found = false;
    for (const auto& info : kStorages)
      if (cls == info.name) s->dtype = info.dtype, found = true;
    if (!found) bad("unsupported storage type '" + q + "'");
    s->key = key->s;
    s->i = as_int(pid->items[4], "storage size");
    if (s->i < 0) bad("negative storage size");
    return s;
  }

  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& name_;
  [[maybe_unused]] const Zip& zip_;
  [[maybe_unused]] const std::string& prefix_;
  std::vector<Obj*> stack_;
  std::unordered_map<uint64_t, Obj*> memo_;
  std::vector<std::unique_ptr<Obj>> pool_;
  size_t copied_ = 0;
};

size_t elem_size(DType t) {
  return static_cast<size_t>(dtype_info(t).block_bytes);
}

struct Reader {
  const std::string& name;
  const Zip& zip;
  std::string prefix;  // "archive/"
  std::vector<Tensor> out;
  std::set<std::string> names;
  int64_t visited = 0;
  uint64_t file_size = 0;
  uint64_t total_bytes = 0;

  Tensor materialize(const Obj* t, const std::string& tname) {
    const Obj* s = t->storage;
    auto it = zip.entries().find(prefix + "data/" + s->key);
    CACHET_CHECK(it != zip.entries().end(), name, ": tensor '", tname, "': storage '", s->key,
                 "' has no entry ", prefix, "data/", s->key);
    const size_t es = elem_size(s->dtype);
    const uint64_t storage_elems = it->second.size / es;
    CACHET_CHECK(static_cast<uint64_t>(s->i) <= storage_elems, name, ": tensor '", tname,
                 "': storage '", s->key, "' holds ", it->second.size, " bytes, less than ", s->i,
                 " elements");
    int64_t numel = 1;
    int64_t max_off = t->offset;
    CACHET_CHECK(t->offset >= 0, name, ": tensor '", tname, "': negative storage offset");
    for (size_t d = 0; d < t->shape.size(); ++d) {
      const int64_t n = t->shape[d], st = t->strides[d];
      CACHET_CHECK(n >= 0 && st >= 0, name, ": tensor '", tname, "': negative size or stride");
      if (n == 0) {
        numel = 0;
        continue;
      }
      CACHET_CHECK(numel <= (int64_t{1} << 40) / n, name, ": tensor '", tname, "' is too large");
      numel *= n;
      CACHET_CHECK(st <= (int64_t{1} << 40) / n, name, ": tensor '", tname, "': stride too large");
      max_off += (n - 1) * st;
    }
    if (numel > 0)
      CACHET_CHECK(max_off < s->i, name, ": tensor '", tname, "' (shape ",
                   Tensor::view(DType::F32, t->shape, nullptr).shape_str(), ", offset ", t->offset,
                   ") reaches past the end of its storage of ", s->i, " elements");
    CACHET_CHECK(static_cast<uint64_t>(numel) * es <= 2 * it->second.size + (64u << 20), name,
                 ": tensor '", tname, "' is far larger than its storage");
    total_bytes += static_cast<uint64_t>(numel) * es;
    CACHET_CHECK(total_bytes <= 2 * file_size + (64u << 20), name,
                 ": the tensors would take far more memory than the file holds (tensor '", tname,
                 "')");
    Tensor out = Tensor::zeros(s->dtype, t->shape, tname);
    if (numel == 0) return out;
    const uint8_t* base = it->second.data;
    uint8_t* dst = static_cast<uint8_t*>(out.data);
    const size_t nd = t->shape.size();
    std::vector<int64_t> idx(nd, 0);
    // Innermost run copied per contiguous stretch.
    const bool inner_contig = nd == 0 || t->strides[nd - 1] == 1;
    const int64_t inner = nd == 0 ? 1 : t->shape[nd - 1];
    const int64_t outer = numel / inner;
    for (int64_t o = 0; o < outer; ++o) {
      int64_t off = t->offset;
      for (size_t d = 0; d + 1 < nd; ++d) off += idx[d] * t->strides[d];
      if (inner_contig) {
        std::memcpy(dst, base + off * es, inner * es);
        dst += inner * es;
      } else {
        const int64_t st = t->strides[nd - 1];
        for (int64_t k = 0; k < inner; ++k, dst += es)
          std::memcpy(dst, base + (off + k * st) * es, es);
      }
      for (size_t d = nd == 0 ? 0 : nd - 1; d-- > 0;) {
        if (++idx[d] < t->shape[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }

  void walk(const Obj* o, const std::string& path, int depth) {
    CACHET_CHECK(depth < 64, name, ": objects nested too deeply at '", path, "'");
    CACHET_CHECK(++visited < 10000000, name, ": too many objects (shared references?)");
    if (o->kind == Obj::kTensor) {
      CACHET_CHECK(names.insert(path).second, name, ": two tensors named '", path, "'");
      out.push_back(materialize(o, path.empty() ? "tensor" : path));
      return;
    }
    auto join = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
    if (o->kind == Obj::kDict) {
      for (const auto& [k, v] : o->dict) {
        std::string ks;
        if (k->kind == Obj::kStr)
          ks = k->s;
        else if (k->kind == Obj::kInt)
          ks = std::to_string(k->i);
        else
          continue;
        walk(v, join(ks), depth + 1);
      }
    } else if (o->kind == Obj::kList || o->kind == Obj::kTuple) {
      for (size_t j = 0; j < o->items.size(); ++j)
        walk(o->items[j], join(std::to_string(j)), depth + 1);
    }
  }
};

}  // namespace

std::vector<Tensor> read_torch_checkpoint_memory(const void* data, size_t size,
                                                 const std::string& name, const std::string& key) {
  const Zip zip(static_cast<const uint8_t*>(data), size, name);
  std::string pkl;
  for (const auto& [n, e] : zip.entries()) {
    const std::string suffix = "data.pkl";
    if (n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (n.size() == suffix.size() || n[n.size() - suffix.size() - 1] == '/') &&
        n.find('/') == n.size() - suffix.size() - 1) {
      CACHET_CHECK(pkl.empty(), name, ": two data.pkl entries in the archive");
      pkl = n;
    }
  }
  CACHET_CHECK(!pkl.empty(), name, ": no data.pkl in the archive (not a torch.save file)");
  const std::string prefix = pkl.substr(0, pkl.size() - 8);
  if (auto bo = zip.entries().find(prefix + "byteorder"); bo != zip.entries().end()) {
    const std::string v(reinterpret_cast<const char*>(bo->second.data), bo->second.size);
    CACHET_CHECK(v == "little", name, ": byte order '", v, "' is not supported");
  }
  const ZipEntry& pe = zip.entries().at(pkl);
  Unpickler up(pe.data, pe.size, name, zip, prefix);
  const Obj* root = up.load();
  // Descend into key ("a.b.c").
  std::string walked;
  size_t p = 0;
  while (!key.empty() && p <= key.size()) {
    const size_t q = std::min(key.find('.', p), key.size());
    const std::string part = key.substr(p, q - p);
    CACHET_CHECK(root->kind == Obj::kDict, name, ": '", walked.empty() ? "(top level)" : walked,
                 "' is not a dict, cannot look up '", part, "'");
    const Obj* next = nullptr;
    std::string keys;
    for (const auto& [k, v] : root->dict)
      if (k->kind == Obj::kStr) {
        if (k->s == part) next = v;
        if (keys.size() < 200) keys += (keys.empty() ? "" : ", ") + k->s;
      }
    CACHET_CHECK(next, name, ": no key '", part, "' in ",
                 walked.empty() ? "the checkpoint" : walked, " (keys: ", keys, ")");
    walked += (walked.empty() ? "" : ".") + part;
    root = next;
    p = q + 1;
  }
  Reader r{name, zip, prefix, {}, {}, 0, size, 0};
  r.walk(root, "", 0);
  CACHET_CHECK(!r.out.empty(), name, ": no tensors in ",
               key.empty() ? std::string("the checkpoint") : "'" + key + "'");
  return std::move(r.out);
}

std::vector<Tensor> read_torch_checkpoint(const std::string& pt_path, const std::string& key) {
  auto m = MappedFile::open(pt_path);
  return read_torch_checkpoint_memory(m->data(), m->size(), pt_path, key);
}

void convert_torch_checkpoint(const std::string& pt_path, const std::string& key,
                              const std::string& out_safetensors) {
  const std::vector<Tensor> tensors = read_torch_checkpoint(pt_path, key);
  SafetensorsWriter w;
  w.add_metadata("source", "torch checkpoint");
  for (const Tensor& t : tensors) {
    (void)safetensors_dtype_name(t.dtype);
    w.add_tensor(t.name, t);
  }
  w.write(out_safetensors);
}

}  // namespace cachet
