// SPDX-License-Identifier: Apache-2.0
// Exported host memory (transport layer, shm transport): the blocks ncclMemAlloc hands out on host memory, which
// same-host peers can map, and the cache of peers' blocks this process has mapped.
//
// Why: a direct (single-copy) message read with process_vm_readv costs a system call per piece and copies with
// the kernel's plain stores. A block that lives in a memfd can instead be mapped once by every same-host peer
// (through /proc/<pid>/fd/<fd>, which needs the same permission as process_vm_readv), and from then on a
// receiver reads, or reduces straight out of, the sender's buffer with ordinary loads: no system call, no
// scratch copy before a reduction.
//
// Identity: a block is named by (pid, process nonce, block id). Ids only grow within a process and the nonce is
// random per process, so a cached mapping can never stand for another block, even after the sender freed it or
// its pid was reused. Mapping is safe while a message naming the block is in flight: the sender keeps its fd
// open until ncclMemFree, and a user may not free a buffer an operation still uses.
//
// Lifetime of cached mappings: a mapping keeps the peer's pages alive after the peer freed them. So every miss
// first drops the mappings whose fd no longer names the same file in the owner's /proc (freed blocks, exited
// processes), and the cache holds at most kMaxMappedBlocks, dropping the least recently used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sys/types.h>

#include "common/status.h"

namespace cfx::transport::shm {

inline constexpr size_t kMaxMappedBlocks = 64;

// One exported block of this process, as a DirectRegion describes it to peers.
struct ExportedBlock {
  uint64_t id = 0;  // > 0
  int fd = -1;
  uintptr_t base = 0;
  uint64_t bytes = 0;
};

// A page-aligned, zero-filled block of `bytes` (> 0) bytes that peers can map. SystemError naming the failing
// call (memfd_create, ftruncate, mmap) and the size.
Result<void*> allocExported(size_t bytes);
// Frees a block returned by allocExported. False (and nothing done) when `p` is not the start of one.
bool freeExported(void* p);
// The exported block holding all of [p, p + bytes), if there is one.
std::optional<ExportedBlock> findExported(const void* p, size_t bytes);
// Random per process, fixed for its lifetime.
uint64_t processNonce();

// This process's read-only view of `block` of process `pid` (whose processNonce() is `nonce`): the address of
// its first byte here. Maps it on first use, and pins it: it stays mapped until unpinPeerBlock() with the same
// names (a pin that is never released only keeps the mapping, and the peer's pages, alive). Errors: SystemError naming the pid and the failing call when the
// block cannot be opened or mapped (no permission, process gone, block smaller than announced).
Result<const char*> mapPeerBlock(pid_t pid, uint64_t nonce, const ExportedBlock& block);
void unpinPeerBlock(pid_t pid, uint64_t nonce, uint64_t id);
// How many peer blocks are mapped now (for tests).
size_t mappedPeerBlocks();

}  // namespace cfx::transport::shm
