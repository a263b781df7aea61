// SPDX-License-Identifier: Apache-2.0
// The byte layout of one rank's shared-memory segment, format version 1 (transport layer, shm transport).
// Every process of a job maps its same-host peers' segments, so this layout is a wire format: change it only
// together with kLayoutVersion (incompatible) or by appending a header field announced by a `features` bit.
//
//   0                        SegmentHeader, kHeaderBytes reserved (identity, geometry, doorbell, closed flag)
//   directoryOffset          uint64_t fifoOffset[kNumChannels][nRanks]: the incoming FIFO from (channel, sender)
//                            rank, or 0 when that sender has none
//   each fifoOffset (4 KiB aligned), one FIFO per (channel, same-host sender):
//     +0                     head: slots posted, written by the sender only        (own 128-byte block)
//     +128                   tail: slots released, written by the receiver only    (own 128-byte block)
//     +256                   nSlots SlotDescriptors {bytes, tag}, 64 bytes apart, written by the sender
//     +256 + 64 * nSlots     nSlots slots of slotBytes, 64-byte aligned
//
// The FIFO lives in the receiver's segment: the sender writes data and head into it, the receiver reads the
// data in its own memory and writes tail. 128-byte blocks keep head and tail off each other's cache line and
// off the pair of lines that x86's adjacent-line prefetcher fetches together.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/transport.h"

namespace cfx::transport::shm {

inline constexpr uint64_t kSegmentMagic = 0x31304d4853584643ull;  // the bytes "CFXSHM01" on little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;  // reserved for the header, so fields can be appended in place
inline constexpr size_t kCounterBlock = 128;
inline constexpr size_t kSlotAlign = 64;
inline constexpr size_t kFifoAlign = 4096;

// Bits of SegmentHeader::features. Version 1 defines none; zero-copy buffer registration will add one here
// together with a table at extensionOffset.
inline constexpr uint64_t kKnownFeatures = 0;

struct alignas(kSlotAlign) SlotDescriptor {
  uint64_t bytes;
  uint64_t tag;
};
static_assert(sizeof(SlotDescriptor) == kSlotAlign,
              "one descriptor per cache line: sender and receiver never share one");

struct FifoControl {
  alignas(kCounterBlock) std::atomic<uint64_t> head;  // slots posted; written by the sender only
  alignas(kCounterBlock) std::atomic<uint64_t> tail;  // slots released; written by the receiver only
};
static_assert(sizeof(FifoControl) == 2 * kCounterBlock);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the counters are shared between processes");

// Who created a segment: what a peer needs to tell whether that process is still alive.
struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t startTime = 0;     // clock ticks after boot (/proc/<pid>/stat field 22); 0 when unknown
  uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid; 0 when unknown
};

struct SegmentHeader {
  // Written once by the owner before the segment's name is published; read-only afterwards.
  uint64_t magic;
  uint32_t version;
  uint32_t headerBytes;  // kHeaderBytes of the writer
  uint64_t segmentBytes;
  int32_t rank;
  int32_t nRanks;
  int32_t pid;
  uint32_t nChannels;
  uint64_t startTime;
  uint64_t pidNamespace;
  uint64_t slotBytes;
  uint64_t nSlots;
  uint64_t fifoBytes;  // bytes from one FIFO's start to the end of its last slot, rounded to kFifoAlign
  uint64_t directoryOffset;
  uint64_t features;         // kKnownFeatures bits
  uint64_t extensionOffset;  // start of the areas announced in `features`; 0 while there are none

  // The owner's doorbell: rung by peers that post into its FIFOs or release slots of FIFOs it sends on, and by
  // the owner's own local transports.
  alignas(kCounterBlock) Doorbell doorbell;
  // Set to 1 when the owner tears its transport down (destroy or abort); peers report it from check().
  alignas(kCounterBlock) std::atomic<uint32_t> closed;
};
static_assert(sizeof(SegmentHeader) <= kHeaderBytes);

struct SegmentLayout {
  size_t directoryOffset = 0;
  size_t fifoBytes = 0;
  size_t totalBytes = 0;
  std::vector<uint64_t> fifoOffsets;  // [channel * nRanks + sender]; 0 = no FIFO
};

// Where everything goes for a rank that receives from every rank marked in `incoming` (size nRanks).
SegmentLayout computeLayout(int nRanks, const FifoGeometry& geometry, const std::vector<bool>& incoming);

// Bytes of one FIFO (control block, descriptors and slots), rounded up to kFifoAlign.
size_t fifoBytes(const FifoGeometry& geometry);

// Smallest FIFO that scaledGeometry() shrinks to: two slots of 3,904 bytes.
inline constexpr size_t kMinScaledFifoBytes = size_t{8} << 10;
// Smallest slot scaledGeometry() leaves while it can still halve the slot count instead.
inline constexpr size_t kMinScaledSlotBytes = size_t{2} << 10;

// The geometry of every FIFO of a communicator whose busiest host holds `maxLocalRanks` ranks. Each rank has one
// incoming FIFO per (channel, same-host peer), so a host holds n(n-1)kNumChannels FIFOs: with the default 8 x
// 128 KiB that is 8 GiB at 64 ranks. When they would exceed `hostBytes` (0: never), the FIFOs shrink to an equal
// share of it, rounded down to kFifoAlign but not below kMinScaledFifoBytes: first fewer bytes per slot, then,
// below kMinScaledSlotBytes, half the slots (down to 2). `configured` is returned unchanged when it fits, so the
// few-rank fast paths keep their slots. A pure function of its arguments, so ranks that agree on the knobs and
// see the same peers pick the same geometry. Per host the FIFOs then take at most
// max(hostBytes, n(n-1) kNumChannels kMinScaledFifoBytes) bytes: hostBytes itself up to n = 128 at 256 MiB,
// growing with the square of n only beyond (1 GiB at 256 ranks).
FifoGeometry scaledGeometry(const FifoGeometry& configured, int maxLocalRanks, size_t hostBytes);

// Constructs the header, directory and FIFO counters in zero-filled memory of layout.totalBytes bytes.
SegmentHeader* initSegment(void* base, const SegmentLayout& layout, int rank, int nRanks, const FifoGeometry& geometry,
                           const ProcessIdentity& self);

// One FIFO inside a mapped segment.
struct FifoView {
  FifoControl* control = nullptr;
  SlotDescriptor* descriptors = nullptr;
  char* slots = nullptr;
};
FifoView fifoAt(void* segmentBase, uint64_t fifoOffset, int nSlots);

// Checks a peer's segment before anything in it is trusted: magic, version, that it belongs to `rank` of a
// communicator of `nRanks`, that its geometry is ours, and that every offset stays inside `bytes`. On success
// *fifoOffsets receives the FIFO offsets for sender `sender` per channel (0 where the peer has none).
Status validateSegment(const void* base, size_t bytes, int rank, int nRanks, const FifoGeometry& geometry, int sender,
                       std::vector<uint64_t>* fifoOffsets);

}  // namespace cfx::transport::shm
