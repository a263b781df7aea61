// SPDX-License-Identifier: Apache-2.0
// ThreadSanitizer annotations (common layer). Ranks in one process talk through shared memory that each maps
// at its own address, so TSan cannot pair a release on one mapping with the acquire on the other. Where data
// outside those mappings depends on such a handoff (single-copy reads of a peer's buffer), the two sides
// name the handoff explicitly. Outside TSan builds these compile to nothing.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace cfx {

inline void tsanRelease([[maybe_unused]] const void* addr) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(addr));
#endif
}

inline void tsanAcquire([[maybe_unused]] const void* addr) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(addr));
#endif
}

}  // namespace cfx
