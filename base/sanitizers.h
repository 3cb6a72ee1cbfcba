// Whether this build runs under AddressSanitizer, which reserves terabytes of address space for its
// shadow memory up front: an address-space limit (RLIMIT_AS) stops such a process before it starts.
#ifndef GANTRY_BASE_SANITIZERS_H_
#define GANTRY_BASE_SANITIZERS_H_

// Code compiled with -fsanitize=address knows it by itself; the tests' own code in the sanitizer build
// is not instrumented but runs in an ASan process, so the build defines GANTRY_ADDRESS_SANITIZER for
// it (tests/CMakeLists.txt).

namespace gantry {

#if !defined(GANTRY_ADDRESS_SANITIZER)
#if defined(__SANITIZE_ADDRESS__)
#define GANTRY_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GANTRY_ADDRESS_SANITIZER 1
#endif
#endif
#endif

#ifdef GANTRY_ADDRESS_SANITIZER
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace gantry

#endif  // GANTRY_BASE_SANITIZERS_H_
