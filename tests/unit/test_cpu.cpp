// The CPU's name and summary (cpu.h): the `cpu:` line of the benchmarks.
#include <gtest/gtest.h>

#include <string>

#include "cachet/cpu.h"

namespace cachet {
namespace {

TEST(Cpu, NameIsTrimmedWithSingleSpaces) {
  const std::string n = cpu_name();
  ASSERT_FALSE(n.empty());
  EXPECT_NE(n.front(), ' ');
  EXPECT_NE(n.back(), ' ');
  EXPECT_EQ(n.find("  "), std::string::npos) << n;
  EXPECT_EQ(n.find('\0'), std::string::npos);
  for (char c : n) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "unprintable byte in " << n;
}

TEST(Cpu, SummaryNamesWhatTheKernelsCanUse) {
  const std::string s = cpu_summary();
  const std::string n = cpu_name();
  ASSERT_EQ(s.rfind(n + ": ", 0), 0u) << s;
  const CpuFeatures& f = cpu_features();
  const std::string rest = s.substr(n.size() + 2);
  if (f.avx512f)
    EXPECT_EQ(rest.rfind("AVX-512", 0), 0u) << s;
  else if (f.avx2)
    EXPECT_EQ(rest.rfind("AVX2", 0), 0u) << s;
  else
    EXPECT_EQ(rest.rfind("no AVX2", 0), 0u) << s;
  EXPECT_EQ(rest.find("VNNI") != std::string::npos, f.avx512f && f.avx512vnni) << s;
  EXPECT_EQ(rest.find("BF16") != std::string::npos, f.avx512f && f.avx512vnni && f.avx512bf16) << s;
  EXPECT_EQ(rest.find(", AMX") != std::string::npos, f.amx_tile && f.amx_bf16) << s;
}

}  // namespace
}  // namespace cachet
