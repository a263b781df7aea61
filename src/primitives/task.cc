// SPDX-License-Identifier: Apache-2.0
// The per-thread cache of coroutine frames behind Task (primitives layer); see task.h.
#include "primitives/task.h"

#include <new>

namespace cfx::prims::frame_cache {

namespace {

struct FreeFrame {
  FreeFrame* next;
};

struct Cache {
  FreeFrame* head[kFrameClasses] = {};
  int count[kFrameClasses] = {};
  ~Cache() {
    for (size_t c = 0; c < kFrameClasses; ++c) {
      while (FreeFrame* f = head[c]) {
        head[c] = f->next;
        ::operator delete(f);
      }
    }
  }
};

thread_local Cache tCache;

// Class c holds frames of (c, c + 1] * kFrameClass bytes, each allocated with the class's full size so any frame of
// the class fits any cached block.
size_t classOf(size_t bytes) { return (bytes + kFrameClass - 1) / kFrameClass - 1; }

}  // namespace

void* allocate(size_t bytes) {
  const size_t c = classOf(bytes);
  if (c >= kFrameClasses) return ::operator new(bytes);
  Cache& cache = tCache;
  if (FreeFrame* f = cache.head[c]) {
    cache.head[c] = f->next;
    --cache.count[c];
    return f;
  }
  return ::operator new((c + 1) * kFrameClass);
}

void release(void* p, size_t bytes) noexcept {
  const size_t c = classOf(bytes);
  if (c >= kFrameClasses) {
    ::operator delete(p);
    return;
  }
  Cache& cache = tCache;
  if (cache.count[c] >= kFramesPerClass) {
    ::operator delete(p);
    return;
  }
  auto* f = static_cast<FreeFrame*>(p);
  f->next = cache.head[c];
  cache.head[c] = f;
  ++cache.count[c];
}

}  // namespace cfx::prims::frame_cache
