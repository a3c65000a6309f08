// Whether this build runs under AddressSanitizer (GCC: __SANITIZE_ADDRESS__; clang:
// __has_feature(address_sanitizer)), for code whose memory layout defeats its red zones.
#pragma once

namespace cachet {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace cachet
