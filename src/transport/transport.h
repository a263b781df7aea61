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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>
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
};

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
};

class RecvEnd {
 public:
  virtual ~RecvEnd() = default;
  // The oldest published slot, its byte count and tag, or nullptr. Repeated calls return the same slot.
  virtual const void* tryPeek(size_t* bytes, uint64_t* tag) = 0;
  // Returns the peeked slot to the sender and rings the sender.
  virtual void release() = 0;
  virtual Status check() = 0;
  virtual const char* kind() const = 0;
};

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
};

}  // namespace cfx::transport
