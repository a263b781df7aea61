// SPDX-License-Identifier: Apache-2.0
// Bootstrap (transport layer): the out-of-band TCP network that forms a communicator before any data
// transport exists, and that transports use to exchange their connection descriptors.
//
// The unique id (128 bytes, ncclUniqueId) carries the root's address and a random 32-byte session secret.
// Every bootstrap connection proves knowledge of the secret with an HMAC-SHA256 challenge/response before a
// single byte of payload is trusted; a stranger or a garbled frame gets one WARN line and a closed socket,
// and the legitimate ranks carry on.
//
// Threading: one Bootstrap is used by one thread at a time (the thread driving its communicator), except
//            abort(), which any thread may call to make every pending and future call fail quickly. Each
//            Bootstrap runs one service thread (cfx-bootstrap) that accepts and authenticates incoming
//            connections and buffers every frame that arrives, so a sender never waits for its receiver to call
//            recv, and ranks never deadlock on each other's socket buffers.
// Blocking:  every call blocks, and every call is bounded by options.timeout (counted from the call's start);
//            a timeout names the peer and the operation.
// Errors:    Timeout (a deadline passed; names the rank(s) waited for), RemoteError (a peer closed or broke its
//            connection, or abort was raised; names the rank and its address), InvalidUsage (sizes that do not
//            match between sender and receiver; names the peer), InvalidArgument (bad rank, id or address),
//            SystemError (a local failure: no interface, bind, thread creation).
// Connections: every rank listens on one socket. Rank r sends to rank p over one outgoing connection it opens
//            to p's listener on first use; frames from p arrive on p's own outgoing connection. allGather is a
//            Bruck all-gather over these (r sends to r+2^k; a ring for blocks too large for it), barrier a
//            dissemination (r sends to r+2^k).
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/status.h"

namespace cfx::transport {

inline constexpr size_t kSecretBytes = 32;
using Secret = std::array<uint8_t, kSecretBytes>;

// The decoded form of ncclUniqueId. encode()/decode() give the exact 128-byte wire form.
//
// Wire form (version 2, little-endian): magic "CFXI" u32 | version u16 | flags u16 | root address (family u16,
// port u16, IPv6 scope u32, IP 16 bytes) | secret[32] | magic u64 | first 8 bytes of SHA-256 over the preceding
// 72 bytes | 48 zero bytes. decode() rejects a wrong magic or version, a failed check and an address without a
// port. An all-zero secret means "no secret" (NCCL_COMM_ID or a launcher without CFX_SECRET): see insecure().
struct UniqueId {
  sockaddr_storage root{};  // where the root listener accepts ranks
  Secret secret{};
  uint64_t magic = 0;  // random: tells apart two communicators created from the same root address
  // NCCL_COMM_ID mode: no root runs yet; Bootstrap::init of rank 0 (of its group's first rank, below) binds `root`
  // and serves it.
  bool startRootInInit = false;
  // ncclCommInitRankScalable with m > 1 distinct ids: all m, in the order given (this id is allIds[0], whose secret
  // and magic the communicator uses); empty otherwise. Not part of the wire form. Bootstrap::init then joins rank r
  // at root groupOf(r, nRanks, m) and the roots combine their groups (boot/wire.h); m must not exceed nRanks.
  std::vector<UniqueId> allIds;
  static constexpr size_t kBytes = 128;
  // No secret: anyone who can reach the root can join (uniqueIdFromAddress without a secret text).
  bool insecure() const;
  void encode(uint8_t out[kBytes]) const;
  static Result<UniqueId> decode(const uint8_t in[kBytes]);
};

struct BootstrapOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // bounds every blocking call (CFX_BOOTSTRAP_TIMEOUT_MS)
  std::string ifName;                         // NCCL_SOCKET_IFNAME syntax: prefixes, ^ excludes, = exact
  int family = AF_UNSPEC;                     // NCCL_SOCKET_FAMILY
  int connectRetries = 34;                    // NCCL_SOCKET_RETRY_CNT
  std::chrono::milliseconds retrySleep{100};  // NCCL_SOCKET_RETRY_SLEEP_MSEC
  // How long an incoming connection may take to authenticate before it is dropped, so a silent stranger cannot
  // hold a listener. Not a knob: tests shorten it.
  std::chrono::milliseconds handshakeTimeout{5000};
  // Optional, e.g. the communicator's abort flag: once raised, init and every call fail promptly (RemoteError),
  // as if abort() had been called. Must outlive the Bootstrap.
  const std::atomic<bool>* abortFlag = nullptr;
  // Frame protection after each handshake: encryption unless CFX_WIRE_PROTECTION=off (bootstrap_params.cc says
  // why). The stricter of the two ends' settings applies to a connection.
  crypto::Protection protection = crypto::Protection::Encryption;
  // Bytes that arrived and that no recv has taken yet, per sending rank and in all: past either, the sender is
  // refused (its connection closed, WARN naming it, and a recv from it fails naming why), so a peer that floods
  // this rank cannot grow its memory without bound. Not knobs: tests shrink them. Each must hold at least a
  // frame of kMaxFrameBytes.
  size_t inboxBytesPerPeer = size_t{128} << 20;
  size_t inboxBytesTotal = size_t{512} << 20;
};

// The frame protection CFX_WIRE_PROTECTION asks for of the data transport: auto lets each connection choose
// (integrity between hosts, off between ranks of one host: docs/notes/security.md has the figures behind it).
enum class WireProtection { Auto, Off, Integrity, Encryption };
// What `setting` means for a connection between two ranks, `sameHost` saying whether they share a host.
crypto::Protection resolveProtection(WireProtection setting, bool sameHost);

// What core/ reads from the knob registry when it creates a communicator (bootstrap_params.cc owns the knobs).
struct BootstrapParams {
  BootstrapOptions options;
  WireProtection wireProtection = WireProtection::Auto;  // CFX_WIRE_PROTECTION
  bool allowInsecure = false;                            // CFX_ALLOW_INSECURE
  std::string commId;                                    // NCCL_COMM_ID, "" when unset
  std::string secretText;                                // CFX_SECRET, "" when unset; never logged
  std::string secretFile;                                // CFX_SECRET_FILE, "" when unset
};
BootstrapParams readBootstrapParams();

// The shared secret of a launcher-started job (NCCL_COMM_ID, cfxCommInitFromEnv): CFX_SECRET's text, else the
// contents of CFX_SECRET_FILE, which must be a regular file of this user that nobody else may read or write
// (mode 0600 or 0400). "" when neither is set: the job then runs without authentication, which
// uniqueIdFromAddress says in one WARN per process. InvalidUsage naming the file and what is wrong with it (its
// mode, owner or size; an empty file), SystemError when it cannot be read.
Result<std::string> launchSecret(const BootstrapParams& params);

// ncclGetUniqueId: picks an interface, opens a root listener served by a background thread in this process
// (it serves exactly one communicator and then exits, or gives up after options.timeout), and returns the id.
Result<UniqueId> createUniqueId(const BootstrapOptions& options);
// Where a listener of this process that ranks must reach binds: the bootstrap interface's address, port 0.
Result<sockaddr_storage> listenAddress(const BootstrapOptions& options);

// NCCL_COMM_ID / launcher mode: an id every rank can build locally from "host:port" or "[v6]:port". With
// `startRoot`, the rank that calls Bootstrap::init with rank 0 starts the root listener on that address itself
// (the address must be local to it). The secret comes from `secretText` (launchSecret()) hashed to 32 bytes;
// empty means an all-zero secret, which still frames and checks every connection but authenticates nothing: one
// WARN per process says so and names the fix, and a communicator that spans hosts then refuses to form unless
// CFX_ALLOW_INSECURE=1 (core). The magic is derived from the address and the text, so every rank computes the
// same id.
Result<UniqueId> uniqueIdFromAddress(const std::string& hostPort, const std::string& secretText, bool startRoot);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // Joins the communicator: connects to the root (its group's root, with id.allIds), learns every rank's bootstrap
  // address, and links this rank into the bootstrap network. Collective over all nRanks ranks. InvalidArgument when
  // id.allIds holds more ids than nRanks.
  static Result<std::unique_ptr<Bootstrap>> init(const UniqueId& id, int rank, int nRanks,
                                                 const BootstrapOptions& options);

  virtual int rank() const = 0;
  virtual int nRanks() const = 0;
  // The session secret of this communicator, HMAC(id secret, a nonce the root drew for this communicator): data
  // transports and the health monitor key their connections and datagrams with it, so nothing recorded from
  // another communicator (another run of the same job, with the same CFX_SECRET) is accepted here, and a
  // stranger without the id's secret cannot compute it even where that secret is empty unless it saw the
  // root's table.
  virtual const Secret& secret() const = 0;
  // False when the id carried no secret (insecure launcher mode).
  virtual bool authenticated() const = 0;
  // This rank's bootstrap listen address family and IP (data transports listen on the same interface).
  virtual const sockaddr_storage& localAddress() const = 0;

  // Every rank contributes `bytesPerRank` bytes at data + rank * bytesPerRank; afterwards all hold all.
  // Collective: every rank calls allGather and barrier in the same order. bytesPerRank <= 64 MiB.
  virtual Status allGather(void* data, size_t bytesPerRank) = 0;
  virtual Status barrier() = 0;
  // Point-to-point messages, matched by (peer, tag) in order; peer may be this rank. send returns once the
  // bytes are handed to the kernel (the receiver buffers them; it need not be in recv). A size that differs
  // from the sender's makes recv fail with InvalidUsage naming the peer and both sizes (the frame is consumed).
  // bytes <= 64 MiB.
  virtual Status send(int peer, uint64_t tag, const void* data, size_t bytes) = 0;
  virtual Status recv(int peer, uint64_t tag, void* data, size_t bytes) = 0;
  // recv that also gives up when `alive` returns an error, and returns that error. `alive` runs between waits (at
  // least every 50 ms) on the calling thread, with no lock of this bootstrap held. It is for waits on a peer whose
  // failure another part of the communicator learns first: heartbeats find a stopped rank long before options.timeout.
  virtual Status recv(int peer, uint64_t tag, void* data, size_t bytes, const std::function<Status()>& alive) = 0;
  // What the peers' heartbeats know, for every later wait: `watch(peer)` runs between its polls (at least every 50 ms,
  // no bootstrap lock held) with the rank a recv waits for, or -1 in allGather and barrier, which need every rank;
  // an error ends the wait with that failure. The communicator sets it once its health monitor runs, so a split, a
  // shrink or the lanes' setup does not wait out options.timeout for a peer known to have died or stopped. nullptr
  // clears it. Set only while no other call of this bootstrap runs.
  virtual void setPeerWatch(std::function<Status(int peer)> watch) = 0;

  // Makes every blocked and future call return RemoteError promptly. Idempotent, thread-safe, never blocks.
  virtual void abort() = 0;
};

}  // namespace cfx::transport
