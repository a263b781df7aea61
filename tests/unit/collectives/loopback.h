// SPDX-License-Identifier: Apache-2.0
// Ranks as threads over in-memory FIFOs, for algorithm tests (test support, collectives layer).
//
// A LoopbackWorld is a full mesh of bounded FIFOs with the geometry the test asks for: tiny slots and two of
// them push small inputs through the multi-loop and deadlock-prone paths. With a direct threshold it also
// offers direct (single-copy) messages, read straight from the sender's buffer. runRanks() starts one thread per rank,
// each running prims::execute() on a Work whose task the test supplies, with a timeout so that a deadlock
// fails the test with the executor's message instead of hanging it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"
#include "primitives/prims.h"
#include "primitives/coro.h"
#include "transport/transport.h"

namespace cfx::testing {

class LoopbackWorld {
 public:
  // directThreshold: SendEnd::directThreshold() of every connection; 0 turns direct messages off.
  LoopbackWorld(int nRanks, transport::FifoGeometry geometry, size_t directThreshold = 0);
  ~LoopbackWorld();
  LoopbackWorld(const LoopbackWorld&) = delete;
  LoopbackWorld& operator=(const LoopbackWorld&) = delete;

  int nRanks() const { return nRanks_; }
  // Direct (single-copy) reads served so far, over all connections.
  size_t directReads() const { return directReads_->load(std::memory_order_relaxed); }
  size_t sliceBytes() const { return geometry_.slotBytes; }
  // Prims::ringChunkSlices() of every rank (1 unless set; at most nSlots - 1).
  void setRingChunkSlices(int slices) { ringChunkSlices_ = slices; }

  using CoroFactory = std::function<prims::Coro(int rank, prims::Prims& prims)>;
  // From now on, what `from` posts to `to` stays unseen until `to` asks whether `from` lives (RecvEnd::check);
  // then, once something was posted, it shows and `from` reports as exited: a peer that posts its last message
  // and exits between the receiver's look and its check.
  void senderExitsAsItIsChecked(int from, int to);
  // `to`'s checks of `from` report it exited (a peer gone with nothing posted).
  void senderHasExited(int from, int to);
  // From now on, what `from` posts to `to` rings no doorbell and stays unseen until `to` checks `from`
  // (RecvEnd::check), which shows it: a transport whose end reads the message in on the receiver's own thread while
  // it is checked (tcp's owner-driven I/O), so nobody rings for it.
  void messagesShowOnlyWhenChecked(int from, int to);
  // True while a message of `from` that a check showed waits unread and `to` sleeps on its doorbell: the receiver
  // slept through a message it had in hand. (Polled by a test's watcher thread.)
  bool asleepOnShownMessage(int from, int to);
  // Whether a check of `to` has shown a message of `from` yet.
  bool shownByCheck(int from, int to);
  Doorbell& bell(int rank) { return bells_[rank]; }

  // Runs `makeCoro` on every rank, one thread each, on the collective channel; returns each rank's Status.
  // Operation numbers continue across calls, as on a communicator. Bytes left in a FIFO by one call are seen
  // by the next (a test of mismatched calls relies on this).
  // checkInterval: ExecOptions::checkInterval, the longest a rank sleeps without a ring.
  std::vector<Status> runRanks(const CoroFactory& makeCoro,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10),
                               std::chrono::milliseconds checkInterval = std::chrono::milliseconds(200));

 private:
  int nRanks_;
  transport::FifoGeometry geometry_;
  std::unique_ptr<Doorbell[]> bells_;
  std::vector<transport::Endpoints> endpoints_;
  uint32_t opSeq_ = 0;
  int ringChunkSlices_ = 1;
  std::shared_ptr<std::atomic<size_t>> directReads_;
};

}  // namespace cfx::testing
