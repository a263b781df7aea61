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
// still missing, so that rank's timeout error can say whom it waited for. A rank that gives up closes its
// connection, and the root then tells every other admitted rank who is missing (Failed (b)); where the root runs
// in that rank's own process, the rank waits for the root to have said so before its init returns, so the other
// ranks learn the missing ranks' names rather than only "connection closed".
//
// Every frame on a root connection is sealed with that connection's keys (wire.h); rejected connections and
// failed accepts are logged at WARN at most a few times a second, with a count of the lines left out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

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

// Set once a root's thread has finished: the table went out, or every admitted rank was told why not.
class RootDone {
 public:
  void set();
  // True once set; false when `timeout` passed first.
  bool wait(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Starts the root thread (named cfx-boot-root) and detaches it; it owns everything in `config`. The root is
// registered for this process under `commMagic` until it finishes (hostedRoot).
Status startRoot(RootConfig config);
// The root of communicator `commMagic` if it runs in this process and has not finished, else null.
std::shared_ptr<RootDone> hostedRoot(uint64_t commMagic);

}  // namespace cfx::transport::boot
