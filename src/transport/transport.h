// SPDX-License-Identifier: Apache-2.0
// The transport interface (transport layer): one direction of a connection to one peer is a bounded FIFO of
// equally sized slots. Transports move bytes; they know nothing of datatypes, reductions or collectives.
//
// Every slot carries a 64-bit tag next to its bytes. primitives/ stamps it with the operation's sequence
// number and size, so a receiver can detect calls that do not match across ranks instead of reading garbage.
//
// Threading: an end is driven by one thread at a time (the executor running the owning rank's work).
// Blocking:  nothing here blocks. A rank that cannot progress sleeps on its Doorbell; every transport rings
//            the doorbell of the rank it made progress possible for (data arrived, slot freed, peer failed).
// Lifetime:  ends are owned by the communicator's Connections and outlive every operation that uses them.
//
// Direct (single-copy) transfers: where both ends support it (directThreshold() > 0), a sender may post one slot
// holding a DirectRegion {pid, address, bytes} instead of the message's bytes, and flag it in the tag
// (kDirectTagFlag). The receiver copies straight out of the sender's memory with RecvEnd::readDirect(), then
// releases the slot; the sender must keep the region unchanged until drained() says every posted slot was
// released. Ends that do not support it (tcp) keep the defaults below and never see such a slot.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"

namespace cfx::transport {

// What ranks tell each other at init (exchanged once through the bootstrap).
struct PeerInfo {
  int rank = -1;
  pid_t pid = 0;
  uint64_t hostHash = 0;  // same value <=> same host (hostname + boot id, or NCCL_HOSTID)
  int cudaDev = -1;
  char hostName[64] = {};
  uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid; 0 when unknown
  // Settings of the layers above that every rank must share (their owner fills and checks them; transports pass
  // them along with the rest, so checking costs no exchange of its own): CFX_HOST_LANES and CFX_CHECK_CALLS.
  int32_t hostLanes = 0;
  int32_t checkCalls = 0;
};

// The payload of a direct slot: `bytes` bytes at `address` in the address space of process `pid`. The sending end may
// say more about where the bytes lie in `detail`, for its own kind of receiver only (shm names the exported block
// holding them, so the receiver can map it and read with plain loads: shm_fifo.cc); all zeros when it says nothing.
struct DirectRegion {
  uint64_t magic = 0;  // kDirectMagic
  uint64_t address = 0;
  uint64_t bytes = 0;
  int32_t pid = 0;
  unsigned char detail[36] = {};
};
static_assert(sizeof(DirectRegion) == 64, "a DirectRegion fills one cache line of a slot");
inline constexpr uint64_t kDirectMagic = 0x3230544345524944ull;  // "DIRECT02"
// Set in a slot's tag when the slot holds a DirectRegion (bit 31: primitives/ keep message sizes in bits 0..30).
inline constexpr uint64_t kDirectTagFlag = uint64_t{1} << 31;

class SendEnd {
 public:
  virtual ~SendEnd() = default;
  // A writable slot of slotBytes() capacity, or nullptr while every slot is in flight. Repeated calls without
  // post() return the same slot.
  virtual void* tryAcquire() = 0;
  // Publishes the acquired slot with `bytes` (<= slotBytes()) valid bytes and `tag`, then rings the peer.
  virtual void post(size_t bytes, uint64_t tag) = 0;
  virtual size_t slotBytes() const = 0;
  virtual int nSlots() const = 0;
  // Ok while the peer is believed alive; RemoteError naming the peer (rank, host, pid) once it is known gone.
  // May cost a system call: the executor calls it only after it has waited a while without progress.
  virtual Status check() = 0;
  virtual const char* kind() const = 0;  // "shm", "tcp", "self": for logs

  // Direct transfers: messages of at least this many bytes may be posted as a DirectRegion; 0 (the default) when
  // this connection does not support them. The value is the same at both ends of every connection.
  virtual size_t directThreshold() const { return 0; }
  // True once the peer has released every slot posted so far (loads the peer's counter: not for a spin loop
  // without a doorbell). A sender waits for it before it lets a posted DirectRegion change.
  virtual bool drained() { return true; }
  // Sending from the caller's memory: where this is true, postFrom(src, bytes, tag) may take the place of writing the
  // acquired slot and post(): the end reads the bytes at src before it returns, handing them to the wire from
  // there when it can (tcp, where the owner drives an idle one-socket link), which saves the copy into the slot.
  virtual bool sendsFromCaller() const { return false; }
  // After tryAcquire() returned a slot, like copying `bytes` bytes from src into it and post(bytes, tag).
  virtual void postFrom(const void* src, size_t bytes, uint64_t tag);
  // Whether a message of `bytes` (>= directThreshold()) at `p` goes as a DirectRegion, and if so the region to
  // post. An end may decide per buffer (shm: by default only memory it can read back fast). The default: always,
  // naming the address in this process.
  virtual bool describeDirect(const void* p, size_t bytes, DirectRegion* region);
};

inline void SendEnd::postFrom(const void* src, size_t bytes, uint64_t tag) {
  std::memcpy(tryAcquire(), src, bytes);
  post(bytes, tag);
}

inline bool SendEnd::describeDirect(const void* p, size_t bytes, DirectRegion* region) {
  *region = DirectRegion{};
  region->magic = kDirectMagic;
  region->address = reinterpret_cast<uintptr_t>(p);
  region->bytes = bytes;
  region->pid = static_cast<int32_t>(::getpid());
  return true;
}

class RecvEnd {
 public:
  virtual ~RecvEnd() = default;
  // The oldest published slot, its byte count and tag, or nullptr. Repeated calls return the same slot.
  virtual const void* tryPeek(size_t* bytes, uint64_t* tag) = 0;
  // Returns the peeked slot to the sender and rings the sender.
  virtual void release() = 0;
  virtual Status check() = 0;
  virtual const char* kind() const = 0;

  // Direct transfers: copies `bytes` bytes at `offset` of `region` (the payload of a peeked slot flagged with
  // kDirectTagFlag) into `dst`, from the sender's memory. Blocks for the copy only. RemoteError when the region is
  // out of bounds, names another process, or the sender's memory cannot be read (it exited); InternalError on
  // ends without direct support (the default).
  virtual Status readDirect(const DirectRegion& region, size_t offset, void* dst, size_t bytes);
  // The region's first byte, readable with plain loads in this process until unmapDirect(region), or nullptr
  // when it cannot be mapped here (then readDirect() serves). RemoteError for a region the sender could not
  // have posted (the same checks as readDirect()).
  virtual Result<const char*> mapDirect(const DirectRegion& region) {
    (void)region;
    return static_cast<const char*>(nullptr);
  }
  virtual void unmapDirect(const DirectRegion& region) { (void)region; }
};

inline Status RecvEnd::readDirect(const DirectRegion&, size_t, void*, size_t) {
  return Status::error(Errc::InternalError, "a direct (single-copy) slot arrived on a connection without direct support");
}

// Channels: independent FIFO sets so that concurrent work never interleaves bytes on one FIFO.
inline constexpr int kCollChannel = 0;  // collectives, executed in call order
inline constexpr int kP2pChannel = 1;   // point-to-point, progressed concurrently with collectives
inline constexpr int kNumChannels = 2;

// Slot geometry shared by every transport of a communicator, so every hop slices a message identically.
struct FifoGeometry {
  size_t slotBytes = 128 * 1024;  // a multiple of 64
  int nSlots = 8;
};

// All ends of one rank: indexed [channel][peer]; entries for self or unconnected peers are null.
struct Endpoints {
  std::vector<std::vector<std::unique_ptr<SendEnd>>> send;
  std::vector<std::vector<std::unique_ptr<RecvEnd>>> recv;
  void resize(int nRanks) {
    send.resize(kNumChannels);
    recv.resize(kNumChannels);
    for (auto& v : send) v.resize(static_cast<size_t>(nRanks));
    for (auto& v : recv) v.resize(static_cast<size_t>(nRanks));
  }
  // Whether channel `ch` to `peer` already has an end in either direction (out-of-range indices have none), so a
  // transport filling in its pairs can refuse to overwrite another transport's.
  bool has(int ch, int peer) const {
    const auto set = [&](const auto& ends) {
      return ch >= 0 && peer >= 0 && ch < static_cast<int>(ends.size()) &&
             peer < static_cast<int>(ends[static_cast<size_t>(ch)].size()) &&
             ends[static_cast<size_t>(ch)][static_cast<size_t>(peer)] != nullptr;
    };
    return set(send) || set(recv);
  }
};

}  // namespace cfx::transport
