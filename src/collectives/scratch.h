// SPDX-License-Identifier: Apache-2.0
// Scratch memory for algorithms that need a buffer of their own (collectives layer).
//
// The hierarchical reduce-scatters keep partial sums in H (or H D) blocks per rank. Allocated per op, a buffer of
// 32 MiB and more comes from mmap each time (glibc's threshold for reusing freed memory stops at 32 MiB), so every
// op paid a page fault and the kernel's zeroing per 4 KiB: at 64 MiB on 8 ranks the 3-level reduce-scatter lost
// its lead over the 2-level one to that. So blocks are kept for reuse: an op takes the smallest free block that is
// large enough (or allocates one, rounded up to a power of two), and gives it back when it ends. Blocks are only
// ever used by one op at a time. At most kScratchKeepBytes stay kept; beyond that a returned block is freed.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"

namespace cfx::coll {

inline constexpr size_t kScratchKeepBytes = size_t{512} << 20;

class ScratchBlock {
 public:
  ScratchBlock() = default;
  ScratchBlock(ScratchBlock&& other) noexcept;
  ScratchBlock& operator=(ScratchBlock&& other) noexcept;
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  ~ScratchBlock();  // back to the pool

  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  friend Result<ScratchBlock> takeScratch(size_t bytes);
  ScratchBlock(char* data, size_t capacity) : data_(data), capacity_(capacity) {}
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

// A block of at least `bytes` (at least 1) for one op. SystemError when memory runs out.
Result<ScratchBlock> takeScratch(size_t bytes);

// Bytes the pool keeps now (free blocks), for tests.
size_t scratchKeptBytes();

}  // namespace cfx::coll
