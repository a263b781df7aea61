// SPDX-License-Identifier: Apache-2.0
// The two ends of one shared-memory FIFO (transport layer, shm transport): a single-producer, single-consumer
// ring of slots living in the receiver's segment (layout in shm_layout.h).
//
// Protocol. head counts slots posted (written by the sender only), tail counts slots released (written by the
// receiver only); both only grow, and slot i lives at index i % nSlots.
//   sender:   tryAcquire: head - tail < nSlots (tail acquire-loaded)  ->  write data into slot head % nSlots
//             post:       write descriptor {bytes, tag}; head.store(head + 1, release); ring the receiver's doorbell
//   receiver: tryPeek:    tail < head (head acquire-loaded)  ->  read descriptor and data of slot tail % nSlots
//             release:    tail.store(tail + 1, release); ring the sender's doorbell
// Each side keeps a private copy of its own counter and a cached copy of the other's, and reads the shared
// counter of the other side only when the cached value says it must wait: a busy FIFO costs no cross-core
// traffic beyond the slot data, the descriptor and one counter line per slot.
//
// Direct transfers (transport.h): enabled per pair by ShmTransport::create() after both processes proved they can
// read each other's memory. The receiver reads a DirectRegion in place when the sender is this very process (ranks
// as threads) or the region lies in a block the sender exported (shm_export.h), which it maps once; otherwise
// it copies with process_vm_readv(2). drained() is "tail == head".
#pragma once

#include <memory>

#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_peer.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace cfx::transport::shm {

class ShmSendEnd final : public SendEnd {
 public:
  // `fifo` is this rank's FIFO inside `receiver`'s segment; `receiver` keeps that mapping alive.
  // `directThreshold` 0 disables direct transfers on this end.
  // `anyBuffer`: post any large buffer as a DirectRegion, not only exported blocks (CFX_SHM_DIRECT=1, or a
  // receiver in this process, which reads any of our memory with memcpy).
  ShmSendEnd(FifoView fifo, const FifoGeometry& geometry, std::shared_ptr<const ShmPeer> receiver,
             size_t directThreshold = 0, bool anyBuffer = true);

  void* tryAcquire() override;
  void post(size_t bytes, uint64_t tag) override;
  size_t slotBytes() const override { return slotBytes_; }
  int nSlots() const override { return nSlots_; }
  Status check() override { return receiver_->check(); }
  const char* kind() const override { return "shm"; }
  size_t directThreshold() const override { return directThreshold_; }
  bool drained() override;
  bool describeDirect(const void* p, size_t bytes, DirectRegion* region) override;

 private:
  FifoView fifo_;
  size_t slotBytes_;
  int nSlots_;
  std::shared_ptr<const ShmPeer> receiver_;
  size_t directThreshold_;
  bool anyBuffer_;
  uint64_t head_;          // slots posted: the private copy of fifo_.control->head, which only we write
  uint64_t cachedTail_;    // the last tail we loaded; reloaded only when the FIFO looks full
  bool acquired_ = false;  // tryAcquire() handed out the slot at head_ (checked by post() in debug builds)
};

class ShmRecvEnd final : public RecvEnd {
 public:
  // `fifo` is the FIFO from `sender` inside this rank's segment `own`.
  ShmRecvEnd(FifoView fifo, const FifoGeometry& geometry, std::shared_ptr<ShmSegment> own,
             std::shared_ptr<const ShmPeer> sender, bool direct = false, bool sameProcess = false);

  const void* tryPeek(size_t* bytes, uint64_t* tag) override;
  void release() override;
  // Also reports RemoteError when the sender published a descriptor larger than a slot (corrupt memory).
  Status check() override;
  const char* kind() const override { return "shm"; }
  Status readDirect(const DirectRegion& region, size_t offset, void* dst, size_t bytes) override;
  Result<const char*> mapDirect(const DirectRegion& region) override;
  void unmapDirect(const DirectRegion& region) override;

 private:
  Status checkRegion(const DirectRegion& region, size_t offset, size_t bytes) const;
  std::string who() const;
  FifoView fifo_;
  size_t slotBytes_;
  int nSlots_;
  std::shared_ptr<ShmSegment> own_;
  std::shared_ptr<const ShmPeer> sender_;
  bool direct_;
  bool sameProcess_;  // the sender is this process (ranks as threads): plain memcpy
  uint64_t tail_;          // slots released: the private copy of fifo_.control->tail, which only we write
  uint64_t cachedHead_;    // the last head we loaded; reloaded only when the FIFO looks empty
  bool peeked_ = false;    // tryPeek() returned the slot at tail_ (checked by release() in debug builds)
  bool mapFailureLogged_ = false;
  uint64_t badBytes_ = 0;  // the first out-of-range byte count the sender published, 0 if none
};

}  // namespace cfx::transport::shm
