// SPDX-License-Identifier: Apache-2.0
// SocketBootstrap (transport layer, bootstrap internals): the Bootstrap of one rank once the root has sent the
// table of listen addresses. Outgoing connections are opened lazily by the calling thread; a service thread
// (cfx-bootstrap) accepts and authenticates incoming connections and files every arriving frame into an inbox
// keyed by (peer, kind, tag), where recv picks it up. The inbox is bounded per sending rank and in all
// (BootstrapOptions::inboxBytesPerPeer/Total): a rank that sends past either is refused, its connection closed,
// and a recv from it fails saying why.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/socket.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport::boot {

class SocketBootstrap final : public Bootstrap {
 public:
  struct Setup {
    int rank = 0;
    int nRanks = 0;
    Credentials cred;
    Secret sessionSecret{};      // secret(): derived from cred.secret and the root's session nonce
    bool authenticated = true;   // the id carried a secret
    BootstrapOptions options;
    net::Listener listener;
    std::vector<sockaddr_storage> table;  // every rank's listen address, by rank
  };

  // Starts the service thread. SystemError when the thread or its wake-up descriptor cannot be created.
  static Result<std::unique_ptr<SocketBootstrap>> start(Setup setup);
  // Stops and joins the service thread and closes every connection; peers blocked on this rank see
  // RemoteError naming it.
  ~SocketBootstrap() override;

  int rank() const override { return rank_; }
  int nRanks() const override { return nRanks_; }
  const Secret& secret() const override { return sessionSecret_; }
  bool authenticated() const override { return authenticated_; }
  const sockaddr_storage& localAddress() const override { return listenAddr_; }

  Status allGather(void* data, size_t bytesPerRank) override;
  Status barrier() override;
  Status send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  Status recv(int peer, uint64_t tag, void* data, size_t bytes) override;
  Status recv(int peer, uint64_t tag, void* data, size_t bytes, const std::function<Status()>& alive) override;
  void setPeerWatch(std::function<Status(int peer)> watch) override;
  void abort() override;

 private:
  explicit SocketBootstrap(Setup setup);

  struct Key {
    int peer;
    FrameKind kind;
    uint64_t tag;
    auto operator<=>(const Key&) const = default;
  };
  // What the service thread knows about frames from one peer. Guarded by mu_.
  struct Inbound {
    bool connected = false;
    bool closed = false;
    std::string reason;  // why it closed
    size_t bytes = 0;    // of its frames in the inbox (and the one being read), not yet taken by a recv
  };
  // One incoming connection being read by the service thread (service thread only).
  struct Incoming {
    net::Socket sock;
    crypto::FrameCipher key;  // opens the peer's frames
    int rank = -1;
    std::array<uint8_t, kFrameHeaderBytes> hdr{};
    size_t hdrHave = 0;
    bool inPayload = false;
    FrameHeader header;
    std::vector<uint8_t> payload;  // the payload, then the tag
    size_t payloadHave = 0;
  };

  // Caller-thread side.
  bool aborted();
  Status checkPeer(int peer, const char* op) const;
  Status sendTo(int peer, FrameKind kind, uint64_t tag, const void* data, size_t bytes, const Deadline& deadline,
                const std::string& what);
  Status recvFrom(int peer, FrameKind kind, uint64_t tag, void* data, size_t bytes, const Deadline& deadline,
                  const std::string& what, const std::function<Status()>* alive = nullptr);
  Status userRecv(int peer, uint64_t tag, void* data, size_t bytes, const std::function<Status()>* alive);
  Status connectTo(int peer, const Deadline& deadline);
  Status bruckAllGather(uint64_t seq, uint8_t* base, size_t bytesPerRank);
  std::string peerName(int peer) const;

  // Service-thread side.
  void serviceLoop();
  void acceptNew();
  void progressHandshakes();
  std::string admissionError(ConnKind kind, int peer, int nRanks) const;
  void admit(ServerHandshake& hs);
  // False once the connection is finished (closed, garbled or over its inbox bound); `why` says which.
  bool readIncoming(Incoming& in, std::string& why);
  // Counts `bytes` more from `peer` against the inbox bounds; false (nothing counted, *why set) past either.
  bool reserveInbox(int peer, size_t bytes, std::string* why);
  void deliver(int peer, const FrameHeader& h, std::vector<uint8_t> payload);
  void wake();

  const int rank_;
  const int nRanks_;
  const Credentials cred_;
  const Secret sessionSecret_;
  const bool authenticated_;
  const BootstrapOptions options_;
  const std::vector<sockaddr_storage> table_;
  sockaddr_storage listenAddr_{};

  // Raised by abort() or copied from options_.abortFlag; read by every wait. Relaxed everywhere: it carries no
  // data, and waits re-check it at least every net::kAbortPollInterval.
  std::atomic<bool> aborted_{false};
  // Set by the destructor, read by the service thread; relaxed for the same reason, and the wake-up eventfd
  // interrupts the service thread's poll.
  std::atomic<bool> stopping_{false};
  net::UniqueFd wakeFd_;

  // Caller-thread state, guarded by sendMu_.
  std::mutex sendMu_;
  std::vector<net::Socket> out_;
  std::vector<crypto::FrameCipher> outKey_;  // seals the frames on out_[peer]
  std::vector<std::string> outBroken_;  // non-empty: why the outgoing connection to that rank is unusable
  std::atomic<uint64_t> collSeq_{0};    // relaxed: only orders this rank's own collective calls
  std::function<Status(int)> watch_;     // setPeerWatch's; read by the caller thread's waits only

  // Shared with the service thread.
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::vector<uint8_t>>> inbox_;
  std::vector<Inbound> inbound_;
  size_t inboxBytes_ = 0;  // sum of inbound_[*].bytes

  // Service-thread state.
  net::Listener listener_;
  std::vector<ServerHandshake> pending_;
  std::vector<Incoming> incoming_;
  std::thread thread_;
};

}  // namespace cfx::transport::boot
