// SPDX-License-Identifier: Apache-2.0
// The bootstrap root (transport layer, bootstrap internals): a detached thread that serves exactly one
// communicator. It admits authenticated ranks, then sends every rank the table of all listen addresses.
//
// Life of a root:
//   Serving   accepts connections; each runs the server handshake without blocking the others. An admitted
//             rank's Hello carries its listen address. Rejected (logged at WARN, socket closed, the legitimate
//             ranks carry on): strangers, wrong HMACs, garbage, slow or silent clients (handshakeTimeout), a
//             duplicate or out-of-range rank, an nRanks that differs from the first rank's.
//   Done      all nRanks ranks admitted: the listener closes, every rank gets the Table frame, the thread exits.
//   Failed    (a) no rank arrived for `timeout` since the root started or since the last admission: WARN, every
//             admitted rank gets an Error frame (Timeout naming the missing ranks), the thread exits;
//             (b) an admitted rank closed its connection first: the others get an Error frame naming it
//             (Timeout when that rank gave up on its own deadline, RemoteError otherwise), the thread exits.
// A rank nearing its own deadline sends a Query frame; the root answers with a Status frame naming the ranks
// still missing, so that rank's timeout error can say whom it waited for.
#pragma once

#include <chrono>

#include "common/socket.h"
#include "common/status.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport::boot {

struct RootConfig {
  net::Listener listener;
  Credentials cred;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds handshakeTimeout{5000};
};

// Starts the root thread (named cfx-boot-root) and detaches it; it owns everything in `config`.
Status startRoot(RootConfig config);

}  // namespace cfx::transport::boot
