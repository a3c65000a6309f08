// Small helpers shared by the MetaVoice GPT stages.
#pragma once
#include <cstdint>
#include <string>

#include "cachet/model.h"
#include "cachet/model_files.h"
#include "mv_state.h"

namespace cachet::models {

// The files with the "_orig_mod." prefix (left by torch.compile) removed from tensor names.
ModelFiles strip_orig_mod(ModelFiles files);
// Fails naming the first tensor "<prefix><i>." with i >= n_layer.
void reject_extra_layers(const ModelFiles& files, const std::string& prefix, int64_t n_layer,
                         const char* field);
// The MvKvState of s, checked to belong to the model of `layout`; `what` prefixes errors.
MvKvState& own_kv_state(State& s, const MvKvLayout& layout, const char* what);

}  // namespace cachet::models
