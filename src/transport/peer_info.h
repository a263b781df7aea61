// SPDX-License-Identifier: Apache-2.0
// Facts about where peers run (transport layer), read from the PeerInfo records every rank exchanged at init: the
// transports that pick ports, rails or failure probes per peer use them, and so does the communicator's health setup.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/transport.h"

namespace cfx::transport {

// Whether b's pid names b's process in a's pid namespace too (same host, same known pid namespace). Ranks in
// containers on one host can share its network and /dev/shm but not their pid namespaces; a peer's pid then names
// another process of this namespace, or none, so probing it would declare a healthy peer gone.
inline bool pidVisible(const PeerInfo& a, const PeerInfo& b) {
  return a.hostHash == b.hostHash && a.pidNamespace != 0 && a.pidNamespace == b.pidNamespace;
}

// How many of `peers` (rank included) share rank's host.
inline int ranksOnHostOf(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (const PeerInfo& p : peers) n += p.hostHash == peers[static_cast<size_t>(rank)].hostHash ? 1 : 0;
  return n;
}

// Rank's position among the ranks of `peers` that share its host, in rank order.
inline int localIndexOf(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (int r = 0; r < rank; ++r)
    n += peers[static_cast<size_t>(r)].hostHash == peers[static_cast<size_t>(rank)].hostHash;
  return n;
}

}  // namespace cfx::transport
