// CPU feature detection and the instruction-set level that kernels dispatch on.
#pragma once
#include <string>
#include <string_view>

namespace cachet {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
  bool amx_tile = false, amx_bf16 = false;  // the CPU has them and the OS saves their state
};
const CpuFeatures& cpu_features();
// Whether AMX tiles (with bf16 dot products) can be used: the CPU and OS have them and Linux
// granted this process the tile data state (asked for once, on the first call).
bool amx_bf16_usable();
// The processor's name as CPUID gives it (the brand string, spaces trimmed), or its vendor
// where there is no brand string; "unknown" without either.
std::string cpu_name();
// One line for benchmark outputs: the name, then what the kernels can use of it, e.g.
// "AMD EPYC 9B45: AVX-512 with VNNI and BF16" or "Intel(R) Xeon(R) Processor: AVX-512 with VNNI
// and BF16, AMX". Figures taken on one host are read beside it.
std::string cpu_summary();

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };
// The level kernels use: the best the CPU supports, capped by the CACHET_ISA environment
// variable (scalar|avx2|avx512) or by set_isa().
Isa active_isa();
// Caps the level (for tests and benchmarks); a level the CPU lacks is lowered to what it has.
void set_isa(Isa isa);
Isa best_isa();
std::string_view isa_name(Isa isa);

}  // namespace cachet
