// Reader for PyTorch checkpoints written by torch.save (the zip format: ARCHIVE/data.pkl,
// a pickle of protocol 2, and ARCHIVE/data/N holding the storages). Supports the pickle subset
// torch.save emits for state dicts: dicts (also collections.OrderedDict), lists, tuples,
// strings, ints, floats, bools, None and tensors rebuilt by torch._utils._rebuild_tensor_v2
// over persistent-id storages (Float, Half, BFloat16, Double, Long, Int, ... storages).
// Hostile files give cachet::Error naming the file and the problem.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "cachet/tensor.h"

namespace cachet {

// The tensors of checkpoint[key] (key "" = the whole unpickled object; "a.b" descends into
// nested dicts), flattened to names joined by '.', in file order. Each tensor is contiguous
// and owns its memory; dtypes are those of the storages (F32, F16, BF16, F64, I64, I32, ...).
// Non-tensor leaves (ints, strings, ...) are skipped.
std::vector<Tensor> read_torch_checkpoint(const std::string& pt_path, const std::string& key);

// The same on an in-memory image of a .pt file; name is used in error messages.
std::vector<Tensor> read_torch_checkpoint_memory(const void* data, size_t size,
                                                 const std::string& name, const std::string& key);

// read_torch_checkpoint + a safetensors file with the same names, shapes and dtypes.
void convert_torch_checkpoint(const std::string& pt_path, const std::string& key,
                              const std::string& out_safetensors);

}  // namespace cachet
