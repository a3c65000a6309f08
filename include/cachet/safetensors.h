// safetensors: reader over a read-only mapping, sharded checkpoints, and a small writer.
//
// Layout: uint64 little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [begin, end]}, ...}
// then the data; offsets are relative to the start of the data (byte 8 + N).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cachet/dtype.h"
#include "cachet/tensor.h"

namespace cachet {

// "F32", "BF16", "F8_E4M3", ... <-> DType (nullopt / error for types safetensors lacks).
std::optional<DType> dtype_from_safetensors(std::string_view name);
// Throws for types that safetensors cannot store (the ggml block formats).
std::string_view safetensors_dtype_name(DType t);

struct SafetensorsInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets, relative to the data section
};

class SafetensorsFile {
 public:
  // Maps and parses path; every problem is a cachet::Error naming the path and the problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // Parses a copy of an in-memory image; name is used in error messages.
  static std::shared_ptr<SafetensorsFile> from_memory(const void* data, size_t size,
                                                      const std::string& name);

  const std::string& path() const { return path_; }
  size_t header_size() const { return header_size_; }
  size_t data_offset() const { return 8 + header_size_; }
  size_t file_size() const { return size_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Tensors in header order (views into the mapping; owner keeps it alive).
  const std::vector<SafetensorsInfo>& infos() const { return infos_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(std::string_view name) const;
  // Throws "PATH: missing tensor 'NAME'".
  const Tensor& get(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void parse();

  std::string path_;
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t header_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsInfo> infos_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A checkpoint split over shards listed by model.safetensors.index.json ("weight_map": tensor
// name -> shard file name, relative to the index's directory).
struct ShardedSafetensors {
  std::string index_path;
  std::vector<std::shared_ptr<SafetensorsFile>> shards;  // in order of first use
  std::map<std::string, Tensor> tensors;                 // every tensor of every shard
  // Opens the index and every shard; each listed tensor must be present in its shard, and a
  // tensor may not appear in two shards.
  static ShardedSafetensors open(const std::string& index_path);
};

class SafetensorsWriter {
 public:
  using Sink = std::function<void(const void* data, size_t size)>;
  using Producer = std::function<void(const Sink& sink)>;

  void add_metadata(const std::string& key, const std::string& value);
  // shape row-major; size must equal numel * element size. Duplicate names are an error.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const void* data, size_t size);             // copies the bytes
  void add_tensor(const std::string& name, const Tensor& t);  // borrows t's memory
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  Producer producer);

  // Atomic write (temporary beside the target, then rename).
  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t nbytes;
    Producer producer;
  };
  void write_to(const Sink& out) const;
  std::map<std::string, std::string> metadata_;
  std::vector<Entry> tensors_;
};

}  // namespace cachet
