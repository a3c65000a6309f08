// `cachet torch-extract`: the tensors of a PyTorch checkpoint (.pt, torch.save zip format) as
// safetensors, e.g. speaker_encoder.pt's "model_state".
#include <cstdio>
#include <memory>
#include <string>

#include "cachet/error.h"
#include "cachet/torch_checkpoint.h"
#include "cli.h"

namespace cachet::cli {
namespace {

Register torch_extract_cmd{
    Command{"torch-extract", "Write the tensors of a PyTorch .pt checkpoint to a safetensors file",
            [](CLI::App* sub) {
              struct Args {
                std::string in, key, out;
                bool list = false;
              };
              auto a = std::make_shared<Args>();
              sub->add_option("checkpoint", a->in, "A file written by torch.save")->required();
              sub->add_option("-k,--key", a->key,
                              "Nested dict key to extract, e.g. model_state (default: everything)");
              sub->add_option("-o,--output", a->out, "Output safetensors file");
              sub->add_flag("--list", a->list, "Print the tensor names, dtypes and shapes instead");
              return [a]() -> int {
                CACHET_CHECK(a->list || !a->out.empty(), "torch-extract: give -o OUT or --list");
                if (a->list) {
                  for (const Tensor& t : read_torch_checkpoint(a->in, a->key))
                    std::printf("%s %s %s\n", t.name.c_str(),
                                std::string(dtype_name(t.dtype)).c_str(), t.shape_str().c_str());
                  return 0;
                }
                check_output(a->out, {a->in});
                convert_torch_checkpoint(a->in, a->key, a->out);
                return 0;
              };
            }}};

}  // namespace
}  // namespace cachet::cli
