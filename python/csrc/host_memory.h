// SPDX-License-Identifier: Apache-2.0
// Shared host memory for CPU tensors: PyTorch's CPU allocator, except that blocks of at least a threshold come from
// ncclMemAlloc, whose host blocks same-host peers map.
//
// Why: between processes of one host, Conflux reads a peer's buffer in place only when that buffer is one peers can
// map (an ncclMemAlloc block); any other buffer travels through the shared-memory FIFOs, copied in by its sender and
// out by its receiver. For DDP that is the gradient buckets: a 4-rank all-reduce of a malloc'd bucket copies about
// 2.25 times its size per rank, of one that peers map about 0.75 times (the direct all-reduce reduces block r
// straight out of the peers' buckets). On a host whose ranks share few cores, those copies are CPU the model's own
// step needs.
//
// Blocks freed by PyTorch go to a cache by size class and are handed out again, so a block keeps its identity
// (peers map each block once, and a peer's cache of mappings is bounded) and the system calls of making one are
// paid once. The cache holds at most kMaxCachedBytes of free blocks; beyond that a freed block goes back to the
// library.
//
// Caveat, why this is opted into rather than the default: the blocks are MAP_SHARED, so a child made by fork (a
// DataLoader worker) that writes into a tensor it inherited writes into the parent's memory too, where malloc'd
// memory would be copied on write.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cfx::torchext {

struct SharedHostStats {
  bool installed = false;
  size_t minBytes = 0;      // allocations of at least this many bytes take shared blocks
  uint64_t blocksMade = 0;  // ncclMemAlloc calls that succeeded
  uint64_t reuses = 0;      // allocations served from the cache
  uint64_t fallbacks = 0;   // ncclMemAlloc failures served by PyTorch's allocator instead
  size_t liveBytes = 0;     // bytes of shared blocks held by tensors now
  size_t cachedBytes = 0;   // bytes of free shared blocks kept for reuse
};

// Makes PyTorch's CPU allocator hand out shared blocks for allocations of at least `minBytes` (> 0) bytes, the rest
// from the allocator that was in place. Calling it again changes the threshold. The Conflux library must be loaded
// (loadApi). Throws c10::Error when PyTorch keeps another CPU allocator at a higher priority.
void useSharedHostMemory(size_t minBytes);
// Puts the previous allocator back; blocks already handed out stay valid and are freed as their tensors go.
void stopSharedHostMemory();
SharedHostStats sharedHostStats();

}  // namespace cfx::torchext
