#include "cachet/cpu.h"

#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace cachet {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_ok) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.bmi2 = b & (1u << 8);
  f.fma = fma;
  f.f16c = f16c;
  if (zmm_ok) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vbmi = c & (1u << 1);
    f.avx512vnni = c & (1u << 11);
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512bf16 = a1 & (1u << 5);
    // XCR0 bits 17 and 18: the OS saves the tile configuration and data
    if ((xcr0 & (3u << 17)) == (3u << 17)) {
      f.amx_bf16 = d & (1u << 22);
      f.amx_tile = d & (1u << 24);
    }
  }
  return f;
}

Isa detect_best() {
  const auto& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16 &&
      f.avx512vbmi && f.avx2 && f.fma && f.f16c && f.bmi2)
    return Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c && f.bmi2) return Isa::Avx2;
  return Isa::Scalar;
}

Isa from_env(Isa best) {
  const char* e = std::getenv("CACHET_ISA");
  if (!e) return best;
  std::string s(e);
  Isa want = best;
  if (s == "scalar")
    want = Isa::Scalar;
  else if (s == "avx2")
    want = Isa::Avx2;
  else if (s == "avx512")
    want = Isa::Avx512;
  return want < best ? want : best;
}

std::atomic<int> g_isa{-1};

}  // namespace

bool amx_bf16_usable() {
  static const bool ok = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.amx_bf16) return false;
#ifdef __linux__
    // Linux hands out the 8 KiB tile data state only on request (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); the grant covers every thread of the process.
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

std::string cpu_name() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  std::string name;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    for (unsigned leaf = 0x80000002u; leaf <= 0x80000004u; ++leaf) {
      unsigned r[4];
      __get_cpuid(leaf, &r[0], &r[1], &r[2], &r[3]);
      name.append(reinterpret_cast<const char*>(r), sizeof r);
    }
    name.resize(std::min(name.size(), name.find('\0')));
  } else if (__get_cpuid(0, &a, &b, &c, &d)) {
    const unsigned r[3] = {b, d, c};  // the vendor: EBX, EDX, ECX
    name.assign(reinterpret_cast<const char*>(r), sizeof r);
  }
  // Trimmed, and runs of spaces (some brand strings pad with them) as one
  std::string out;
  for (char ch : name) {
    if (ch == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += ch;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string cpu_summary() {
  const CpuFeatures& f = cpu_features();
  std::string s = cpu_name() + ": ";
  if (f.avx512f) {
    s += "AVX-512";
    if (f.avx512vnni && f.avx512bf16)
      s += " with VNNI and BF16";
    else if (f.avx512vnni)
      s += " with VNNI";
  } else if (f.avx2) {
    s += "AVX2";
  } else {
    s += "no AVX2";
  }
  if (f.amx_tile && f.amx_bf16) s += ", AMX";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

Isa best_isa() {
  static const Isa b = detect_best();
  return b;
}

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(from_env(best_isa()));
    g_isa.store(v, std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

void set_isa(Isa isa) {
  Isa b = best_isa();
  g_isa.store(static_cast<int>(isa < b ? isa : b));
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace cachet
