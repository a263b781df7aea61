// SPDX-License-Identifier: Apache-2.0
// The per-thread cache of coroutine frames behind Coro (primitives layer); see coro.h.
#include "primitives/coro.h"

#include <new>

namespace cfx::prims::frame_cache {

namespace {

struct FreeFrame {
  FreeFrame* next;
};

struct Cache {
  FreeFrame* head[kFrameClasses] = {};
  int count[kFrameClasses] = {};
  // Set once this thread's cache is destroyed: a Coro destroyed later on the same thread (a communicator freed by a
  // static destructor after main's thread-locals) goes straight to the global allocator.
  bool dead = false;
  ~Cache() {
    dead = true;
    for (size_t c = 0; c < kFrameClasses; ++c) {
      while (FreeFrame* f = head[c]) {
        head[c] = f->next;
        ::operator delete(f);
      }
      count[c] = 0;
    }
  }
};

thread_local Cache tCache;

// Under AddressSanitizer every frame goes back to the allocator, so a use of a destroyed frame is still caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kBypass = true;
#elif defined(__has_feature)
constexpr bool kBypass = __has_feature(address_sanitizer);
#else
constexpr bool kBypass = false;
#endif

// Class c holds frames of (c, c + 1] * kFrameClass bytes, each allocated with the class's full size so any frame of
// the class fits any cached block.
size_t classOf(size_t bytes) { return (bytes + kFrameClass - 1) / kFrameClass - 1; }

}  // namespace

void* allocate(size_t bytes) {
  const size_t c = classOf(bytes);
  Cache& cache = tCache;
  if (kBypass || c >= kFrameClasses || cache.dead) return ::operator new((c + 1) * kFrameClass);
  if (FreeFrame* f = cache.head[c]) {
    cache.head[c] = f->next;
    --cache.count[c];
    return f;
  }
  return ::operator new((c + 1) * kFrameClass);
}

void release(void* p, size_t bytes) noexcept {
  const size_t c = classOf(bytes);
  Cache& cache = tCache;
  if (kBypass || c >= kFrameClasses || cache.dead || cache.count[c] >= kFramesPerClass) {
    ::operator delete(p);
    return;
  }
  auto* f = static_cast<FreeFrame*>(p);
  f->next = cache.head[c];
  cache.head[c] = f;
  ++cache.count[c];
}

}  // namespace cfx::prims::frame_cache
