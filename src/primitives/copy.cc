// SPDX-License-Identifier: Apache-2.0
// Large copies with streaming stores (primitives layer); see copy.h.
#include "primitives/copy.h"

#include <cstdint>
#include <cstring>

// Sanitizer builds keep memcpy, which they check.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#include <emmintrin.h>
#define CFX_STREAMING_STORES 1
#endif

namespace cfx::prims {

void copyPiece(void* dst, const void* src, size_t bytes, size_t messageBytes) {
#ifdef CFX_STREAMING_STORES
  if (messageBytes >= kStreamingCopyBytes && bytes >= 256) {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    // Streaming stores need 16-byte aligned destinations: copy the head up to the next boundary plainly.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    size_t left = bytes - head;
    for (; left >= 64; left -= 64, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, left);
    // Streaming stores are weakly ordered: make them visible before anything that publishes the destination
    // (a FIFO counter, a doorbell, the end of the operation) is stored.
    _mm_sfence();
    return;
  }
#else
  (void)messageBytes;
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace cfx::prims
