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

// The proxy's side: at each wake-up, whether the owner is driving: its count moved since the last look, and that
// look was recent (at most two park steps ago) or the proxy was parked. After a long sleep a moved count says only
// that the owner drove at some time, so the proxy then takes a round itself first. Proxy thread only.
class OwnerWatch {
 public:
  explicit OwnerWatch(uint64_t ticks) : seen_(ticks), lastLook_(std::chrono::steady_clock::now()) {}
  bool ownerDriving(uint64_t ticks, bool parked) {
    const auto now = std::chrono::steady_clock::now();
    const bool driving = ticks != seen_ && (parked || now - lastLook_ <= 2 * kOwnerParkStep);
    seen_ = ticks;
    lastLook_ = now;
    return driving;
  }

 private:
  uint64_t seen_;
  std::chrono::steady_clock::time_point lastLook_;
};

}  // namespace cfx::transport
