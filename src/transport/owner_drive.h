// SPDX-License-Identifier: Apache-2.0
// Owner-driven I/O (transport layer): what the network transports whose owners move their links' bytes themselves
// (tcp owner-driven I/O, ucx inline progress) share about when an owner drives and when their proxy thread does.
#pragma once

#include <chrono>
#include <cstdint>

namespace cfx::transport {

// Inline polling (tcp owner-driven I/O, ucx inline progress): an owner whose recv ring is empty drives its transport
// itself on every this many empty polls. A system call or a worker progress that finds nothing costs about as much
// as 10-20 polls of the ring, and the executor's spin before it sleeps stays short this way.
inline constexpr uint32_t kInlinePollEvery = 8;

// Owner-driven I/O (tcp_connection.h, ucx_proxy.h): an owner that moves its links' bytes itself ticks a counter at
// every drive, and the transport's proxy thread keeps off the sockets (or the worker) while the count moves, looking
// again every park step; once it stands still for a step (the owner sleeps, or went back to its application with
// bytes in flight) the proxy works as before. The step is long enough that an owner reducing a slot between two
// drives keeps them (a 128 KiB reduction takes 10-40 us) and short against the owner's spin before it sleeps; the
// measurements that chose it are in docs/notes/tcp_transport.md ("The park step").
inline constexpr std::chrono::microseconds kOwnerParkStep{200};

// The proxy's side: at each wake-up, whether the owner may be driving: its count moved since the last look. Then
// the proxy parks, and a park step in which the count stands still hands the sockets back to it.
//
// After a long sleep a moved count says only that the owner drove at some time, which is also what an owner that
// starts an operation after a pause looks like. Taking a round then (as the proxy once did) cost every such
// operation a tussle over its first slots: collectives rotating over a communicator's host lanes, each lane idle
// between its turns, ran at 0.65-0.95 ms against 0.55 ms on one lane (64 KiB all-to-all, 2 x 2 bed at 1 Gbit/s;
// docs/notes/tcp_transport.md). Parking first costs an owner that left bytes queued one park step (a shorter first
// step, 50 us, measured no better). Proxy thread.
class OwnerWatch {
 public:
  explicit OwnerWatch(uint64_t ticks) : seen_(ticks) {}
  bool ownerDriving(uint64_t ticks) {
    const bool driving = ticks != seen_;
    seen_ = ticks;
    return driving;
  }

 private:
  uint64_t seen_;
};

}  // namespace cfx::transport
