// Small non-cryptographic hashes and generators shared by the code that makes random weights,
// the samplers and the fingerprints.
#pragma once
#include <cstdint>
#include <string_view>

namespace cachet {

// One step of the splitmix64 generator: advances state and returns 64 random bits.
inline uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// splitmix64's output for state x: a well-mixed 64-bit hash of x.
inline uint64_t splitmix64_mix(uint64_t x) {
  return splitmix64_next(x);
}

// 64-bit FNV-1a of the bytes of s.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace cachet
