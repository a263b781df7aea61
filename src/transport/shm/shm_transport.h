// SPDX-License-Identifier: Apache-2.0
// The shared-memory transport (transport layer): FIFOs between ranks on the same host, and every rank's
// Doorbell, all in one POSIX shared-memory segment per rank.
//
// Each rank owns one segment holding its header (identity, doorbell, closed flag) and one incoming FIFO per
// (channel, same-host peer): senders write into the receiver's memory. Segments are exchanged by name through
// the bootstrap, mapped by every same-host peer, and unlinked before create() returns, so /dev/shm holds
// nothing of ours after init even if a process is SIGKILLed later. Layout: shm_layout.h; FIFO protocol:
// shm_fifo.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace cfx::transport::shm {

class ShmPeer;
class ShmSegment;

// Which ranks mapped which peers' segments, as gathered from every rank during create(): the same on every rank.
class PairMap {
 public:
  PairMap() = default;
  explicit PairMap(int nRanks);
  size_t rowBytes() const { return rowBytes_; }
  // Row `rank`: a bitmap of rowBytes() bytes, bit p set when `rank` mapped p's segment.
  void setRow(int rank, const uint8_t* bitmap);
  // Both directions mapped; false for a == b and out-of-range ranks.
  bool connects(int a, int b) const;

 private:
  bool mapped(int from, int to) const;
  int nRanks_ = 0;
  size_t rowBytes_ = 0;
  std::vector<uint8_t> rows_;
};

// Default direct thresholds (CFX_SHM_DIRECT_THRESHOLD_BYTES=0): where receivers read mapped memory with plain
// loads, one copy beats the FIFO's two from about 4 KiB per message (2 ranks, all-gather, measured); where a read
// may be a process_vm_readv call, only large messages repay the system call.
inline constexpr size_t kMappedDirectThreshold = size_t{4} << 10;
inline constexpr size_t kSyscallDirectThreshold = size_t{1} << 20;

// Default CFX_SHM_HOST_BYTES: up to 11 ranks per host keep the default 8 x 128 KiB FIFOs (11 x 10 x 2 of them
// fit), and 64 or 128 ranks map 256 MiB of FIFOs instead of 8 or 32 GiB (docs/notes/scale.md).
inline constexpr size_t kDefaultHostBytes = size_t{256} << 20;

struct ShmOptions {
  // Slot geometry of every FIFO. Tests may use any slotBytes that is a positive multiple of 64 and any
  // nSlots >= 1; the knobs restrict users to 4 KiB..16 MiB and 2..64.
  FifoGeometry geometry;
  // CFX_SHM_HOST_BYTES: what the FIFOs of the busiest host may take in all; beyond it they shrink
  // (scaledGeometry(), shm_layout.h). 0: never shrink.
  size_t hostBytes = kDefaultHostBytes;
  // NCCL_SHM_DISABLE: no FIFOs at all; the doorbell still exists (in anonymous memory).
  bool disabled = false;
  // Segment names are /<prefix>-<pid>-<rank>-<random hex>. 1 to 32 characters of [A-Za-z0-9._-].
  std::string segmentPrefix = "cfx";
  // CFX_SHM_DIRECT: which messages this rank sends as direct (single-copy) transfers (transport.h). A pair uses
  // them only if both ranks offer them and each could read the other's memory at init (process_vm_readv, or the
  // same process); then each sender decides per message by its own mode.
  enum class Direct : uint8_t {
    Off,       // "0": never; and this rank refuses direct messages from its peers
    Exported,  // "auto", the default: only buffers peers can map (ncclMemAlloc's host blocks), or any buffer
               // when the receiver is a thread of this process
    Always,    // "1": any buffer; peers read what they cannot map with process_vm_readv
  };
  Direct direct = Direct::Exported;
  // CFX_SHM_DIRECT_THRESHOLD_BYTES: smallest message a sender may post as a DirectRegion. Ranks agree on the
  // largest value any rank asks for, so both ends of every connection report the same directThreshold().
  size_t directThresholdBytes = kMappedDirectThreshold;

  // NCCL_SHM_DISABLE, CFX_SHM_SLOT_BYTES, CFX_SHM_SLOTS, CFX_SHM_DIRECT and CFX_SHM_DIRECT_THRESHOLD_BYTES, read
  // once per process.
  static ShmOptions fromParams();
};

class ShmTransport {
 public:
  // Collective over every rank of `bootstrap` (two allGathers, whatever the options say, so ranks that disagree
  // about NCCL_SHM_DISABLE still match up). `peers` holds every rank's PeerInfo, indexed by rank.
  //
  // Creates this rank's segment: a named one in /dev/shm when shm is enabled and some peer shares this host
  // (same hostHash), otherwise anonymous memory that only holds the doorbell. Maps the segment of every
  // same-host peer that has shm enabled too, and fills out.send[ch][p] and out.recv[ch][p] for every channel and
  // every such peer p; other entries are left untouched (out is resized to nRanks first). A pair is connected
  // only if both ranks could map each other's segment: peers that report the same host but cannot see each
  // other's /dev/shm (containers with separate IPC namespaces) are logged at INFO and left to other transports.
  // Before returning, every rank's segment name is removed from /dev/shm, on success and on error.
  //
  // Errors (the same on every rank when the cause is shared): InvalidArgument for bad options or peers;
  // SystemError with the name, size, errno text and a hint when shm_open, ftruncate, fallocate or mmap fail
  // (e.g. a full /dev/shm); InvalidUsage when ranks use different geometries or Conflux builds; RemoteError
  // naming the rank when another rank failed; any error of the bootstrap.
  static Result<std::unique_ptr<ShmTransport>> create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                      const ShmOptions& options, Endpoints& out);

  // Whether ranks a and b are connected over shm (both directions, every channel). Every rank gets the same
  // answer for every pair, so callers can decide collective steps (does any pair need another transport?)
  // without another exchange, even when ranks disagree about NCCL_SHM_DISABLE or some same-host pair fell back.
  bool connects(int a, int b) const;
  // Whether connected ranks a and b use direct transfers with each other; the same answer on every rank.
  bool direct(int a, int b) const;
  // The FIFOs' geometry: options.geometry, shrunk by scaledGeometry() when many ranks share a host. The same on
  // every rank.
  const FifoGeometry& geometry() const { return geometry_; }
  // Bytes of this rank's own segment (header, directory and incoming FIFOs): what it adds to its host's shared
  // memory.
  size_t segmentBytes() const;
  // The agreed threshold of direct transfers (the same on every rank); 0 when no pair uses them.
  size_t directThreshold() const { return directThreshold_; }
  // Whether every direct pair sends any buffer direct (ranks that are threads of one process, or CFX_SHM_DIRECT=1
  // on all), not only exported blocks; the same on every rank.
  bool directAnyBuffer() const { return directAnyBuffer_; }

  // This rank's doorbell, in shared memory: shm peers ring it when they post into or release a FIFO of ours;
  // the other transports and the executor of this rank use it too. Valid until this object is destroyed.
  Doorbell& doorbell();

  // Marks this rank closed for its peers (their check() then reports RemoteError naming this rank) and drops
  // this object's mappings. Ends handed out by create() keep what they use mapped, so destruction order does
  // not matter, and nothing here waits for or touches a peer process: safe with peers gone.
  ~ShmTransport();

  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

 private:
  ShmTransport(std::shared_ptr<ShmSegment> own, std::vector<std::shared_ptr<ShmPeer>> peers, PairMap pairs,
               PairMap directPairs, size_t directThreshold, bool directAnyBuffer, const FifoGeometry& geometry);

  std::shared_ptr<ShmSegment> own_;
  std::vector<std::shared_ptr<ShmPeer>> peers_;  // connected peers only
  PairMap pairs_;
  PairMap directPairs_;  // row r, bit p: r offers direct transfers and could read p's memory
  size_t directThreshold_;
  bool directAnyBuffer_;
  FifoGeometry geometry_;
};

}  // namespace cfx::transport::shm
