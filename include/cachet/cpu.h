// CPU feature detection and the instruction-set level that kernels dispatch on.
#pragma once
#include <string_view>

namespace cachet {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
};
const CpuFeatures& cpu_features();

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };
// The level kernels use: the best the CPU supports, capped by the CACHET_ISA environment
// variable (scalar|avx2|avx512) or by set_isa().
Isa active_isa();
// Caps the level (for tests and benchmarks); a level the CPU lacks is lowered to what it has.
void set_isa(Isa isa);
Isa best_isa();
std::string_view isa_name(Isa isa);

}  // namespace cachet
