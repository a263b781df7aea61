// SPDX-License-Identifier: Apache-2.0
// Bootstrap entry points (transport layer): the unique id's wire form, createUniqueId, uniqueIdFromAddress and
// Bootstrap::init, which joins a rank at the root and hands over to SocketBootstrap.
#include "transport/bootstrap/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "common/crypto.h"
#include "common/log.h"
#include "common/socket.h"
#include "common/wire.h"
#include "transport/bootstrap/root.h"
#include "transport/bootstrap/socket_bootstrap.h"
#include "transport/bootstrap/wire.h"

namespace cfx::transport {

namespace {

constexpr uint32_t kIdMagic = 0x43465849;  // "CFXI"
constexpr uint16_t kIdVersion = 2;
constexpr uint16_t kIdFlagRootInInit = 1;
constexpr size_t kIdCheckedBytes = 72;  // everything before the check word
constexpr size_t kIdCheckBytes = 8;

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The deadline `timeout` after `start` (Deadline counts from now, and treats <= 0 as "never").
Deadline deadlineFrom(Clock::time_point start, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return Deadline::never();
  const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return Deadline(std::max(left, std::chrono::milliseconds(1)));
}

Status withContext(const Status& st, const std::string& prefix) {
  return Status::error(st.code(), prefix + st.message());
}

// NCCL prints the bootstrap interface once per process; users grep this line first when a job hangs.
void logInterfaceOnce(const net::Interface& itf) {
  static std::once_flag once;
  std::call_once(once, [&] {
    CFX_INFO(log::Sys::Bootstrap, "Bootstrap: Using [0]%s:%s<0>", itf.name.c_str(), net::ipToString(itf.addr).c_str());
  });
}

Result<net::Interface> pickInterface(const BootstrapOptions& options, const sockaddr_storage* reachable) {
  net::InterfaceQuery q;
  q.ifName = options.ifName;
  q.family = options.family;
  if (reachable != nullptr) q.reachable = *reachable;
  Result<net::Interface> itf = net::findInterface(q);
  if (!itf.ok()) return withContext(itf.status(), "Bootstrap: ");
  logInterfaceOnce(*itf);
  return itf;
}

boot::Credentials credentialsOf(const UniqueId& id, const BootstrapOptions& options) {
  return boot::Credentials{id.secret, id.magic, options.protection};
}

Status startRootOn(net::Listener listener, const UniqueId& id, const BootstrapOptions& options) {
  boot::RootConfig cfg;
  cfg.listener = std::move(listener);
  cfg.cred = credentialsOf(id, options);
  cfg.timeout = options.timeout;
  cfg.handshakeTimeout = options.handshakeTimeout;
  return boot::startRoot(std::move(cfg));
}

// Waits for the root's answer to this rank's Hello: the table, or an error naming whom the communicator lacks. With
// `groups` > 1 and this rank its group's leader (root k > 0), the answer is the group's addresses (kind Group).
Result<boot::RootAnswer> awaitTable(net::Socket& root, boot::FrameKeys& keys, int rank, int nRanks, int groups,
                                    const BootstrapOptions& options, Clock::time_point start,
                                    const std::atomic<bool>* abortFlag) {
  const std::string prefix = strprintf("rank %d: bootstrap root %s: ", rank, root.peerName().c_str());
  // Ask "who is missing?" shortly before the deadline, so the timeout can name the ranks that never came.
  const std::chrono::milliseconds grace = std::min(std::chrono::milliseconds(1000), options.timeout / 4);
  const Deadline deadline = deadlineFrom(start, options.timeout);
  const Deadline early = deadlineFrom(start, options.timeout - grace);
  Status st = root.waitReadable(early, abortFlag);
  if (st.code() == Errc::Timeout) {
    const boot::FrameHeader query{boot::FrameKind::Query, 0, 0};
    // A closed root is reported by the read.
    (void)boot::sendFrame(root, keys.send, query, nullptr, deadline, abortFlag);
  } else if (!st.ok()) {
    return withContext(st, prefix);
  }
  Result<boot::Frame> frame = boot::recvFrame(
      root, keys.recv, std::max(boot::tablePayloadBytes(nRanks), boot::kMaxControlBytes), deadline, abortFlag);
  if (!frame.ok()) {
    if (frame.status().code() == Errc::Timeout) {
      return Status::error(Errc::Timeout,
                           strprintf("%stimed out after %lld ms waiting for all %d ranks to join "
                                     "(the root did not say which are missing)",
                                     prefix.c_str(), static_cast<long long>(options.timeout.count()), nRanks));
    }
    return withContext(frame.status(), prefix);
  }
  if (frame->header.kind == boot::FrameKind::Group && groups > 1) {
    Result<boot::GroupBlock> block = boot::decodeGroup(frame->header, frame->payload, nRanks, groups);
    if (!block.ok()) return withContext(block.status(), prefix);
    if (block->group != boot::groupOf(rank, nRanks, groups)) {
      return Status::error(Errc::RemoteError,
                           strprintf("%ssent the addresses of group %d to a rank of group %d", prefix.c_str(),
                                     block->group, boot::groupOf(rank, nRanks, groups)));
    }
    boot::RootAnswer answer;
    answer.kind = boot::FrameKind::Group;
    answer.table = std::move(block->addresses);
    return answer;
  }
  Result<boot::RootAnswer> answer = boot::decodeRootAnswer(frame->header, frame->payload, nRanks);
  if (!answer.ok()) return withContext(answer.status(), prefix);
  switch (answer->kind) {
    case boot::FrameKind::Table:
      return std::move(*answer);
    case boot::FrameKind::Error:
      return Status::error(answer->code, prefix + answer->text);
    case boot::FrameKind::Status:
      return Status::error(Errc::Timeout,
                           strprintf("%stimed out after %lld ms waiting for all %d ranks to join: %s", prefix.c_str(),
                                     static_cast<long long>(options.timeout.count()), nRanks, answer->text.c_str()));
    default:
      return Status::error(Errc::RemoteError, prefix + "answered with a Forward frame");
  }
}

// A group leader's part of an init through several roots (boot/wire.h): takes its group's addresses from its root
// (`root`, group `group` of `groups`) to root 0, and root 0's table back to its root, which hands it to the group.
Result<boot::RootAnswer> leadGroup(const UniqueId& id, net::Socket& root, boot::FrameKeys& keys, int rank, int nRanks,
                                   int group, int groups, const BootstrapOptions& options, Clock::time_point start,
                                   const std::atomic<bool>* abortFlag) {
  CFX_TRY_ASSIGN(boot::RootAnswer block, awaitTable(root, keys, rank, nRanks, groups, options, start, abortFlag));
  if (block.kind != boot::FrameKind::Group) {
    return Status::error(Errc::RemoteError, strprintf("rank %d: bootstrap root %s: sent the table, not its group's "
                                                      "addresses, to the leader of group %d",
                                                      rank, root.peerName().c_str(), group));
  }
  const UniqueId& first = id.allIds[0];
  const Deadline deadline = deadlineFrom(start, options.timeout);
  const std::string rootName = net::addressToString(first.root);
  Result<boot::RootAnswer> table = [&]() -> Result<boot::RootAnswer> {
    Result<net::Socket> root0 =
        net::Socket::connect(first.root, {options.connectRetries, options.retrySleep}, deadline, abortFlag);
    if (!root0.ok()) {
      return withContext(root0.status(), strprintf("rank %d (the leader of group %d): cannot reach bootstrap root 0 "
                                                   "at %s: ",
                                                   rank, group, rootName.c_str()));
    }
    CFX_TRY_ASSIGN(boot::FrameKeys keys0,
                   boot::clientHandshake(*root0, credentialsOf(first, options), boot::ConnKind::GroupJoin, group,
                                         nRanks, nullptr, deadline, abortFlag));
    const std::vector<uint8_t> payload = boot::encodeGroupAddresses(block.table);
    const boot::FrameHeader h{boot::FrameKind::Group,
                              (static_cast<uint64_t>(groups) << 32) | static_cast<uint64_t>(group), payload.size()};
    CFX_TRY(boot::sendFrame(*root0, keys0.send, h, payload.data(), deadline, abortFlag));
    return awaitTable(*root0, keys0, rank, nRanks, 1, options, start, abortFlag);
  }();
  if (!table.ok()) {
    // Tell the group why it will not form (best effort: its root also notices this rank leave).
    const std::string text = table.status().message().substr(0, boot::kMaxControlBytes);
    const boot::FrameHeader h{boot::FrameKind::Error, static_cast<uint64_t>(table.status().code()), text.size()};
    (void)boot::sendFrame(root, keys.send, h, text.data(), deadline, abortFlag);
    return table.status();
  }
  std::vector<uint8_t> forward = boot::encodeGroupAddresses(table->table);
  forward.insert(forward.end(), table->sessionNonce.begin(), table->sessionNonce.end());
  const boot::FrameHeader h{boot::FrameKind::Forward, static_cast<uint64_t>(nRanks), forward.size()};
  if (Status st = boot::sendFrame(root, keys.send, h, forward.data(), deadline, abortFlag); !st.ok()) {
    return withContext(st, strprintf("rank %d (the leader of group %d): passing the table to bootstrap root %s: ", rank,
                                     group, root.peerName().c_str()));
  }
  return table;
}

}  // namespace

// ---- UniqueId -----------------------------------------------------------------------------------------------

bool UniqueId::insecure() const {
  return std::all_of(secret.begin(), secret.end(), [](uint8_t b) { return b == 0; });
}

void UniqueId::encode(uint8_t out[kBytes]) const {
  std::memset(out, 0, kBytes);
  wire::Writer w(out, kBytes);
  w.u32(kIdMagic);
  w.u16(kIdVersion);
  w.u16(startRootInInit ? kIdFlagRootInInit : 0);
  uint8_t address[boot::kAddressBytes];
  boot::encodeAddress(root, address);
  w.bytes(address, sizeof(address));
  w.bytes(secret);
  w.u64(magic);
  Result<crypto::Digest> check = crypto::sha256(std::span<const uint8_t>(out, kIdCheckedBytes));
  // SHA-256 fails only if OpenSSL is broken; decode() then rejects the id, so the failure still surfaces.
  if (check.ok()) w.bytes(check->data(), kIdCheckBytes);
}

Result<UniqueId> UniqueId::decode(const uint8_t in[kBytes]) {
  wire::Reader r(in, kBytes);
  const uint32_t magic = r.u32();
  const uint16_t version = r.u16();
  const uint16_t flags = r.u16();
  if (magic != kIdMagic) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("not a Conflux unique id (magic 0x%08x): pass every rank the bytes that "
                                   "ncclGetUniqueId of this library produced",
                                   magic));
  }
  if (version != kIdVersion) {
    return Status::error(Errc::InvalidArgument, strprintf("unique id version %u, this library reads %u (mixed library "
                                                          "versions?)",
                                                          version, kIdVersion));
  }
  if ((flags & ~kIdFlagRootInInit) != 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("unique id flags 0x%04x, this library knows only 0x%04x (mixed library versions?)",
                                   flags, kIdFlagRootInInit));
  }
  CFX_TRY_ASSIGN(const crypto::Digest check, crypto::sha256(std::span<const uint8_t>(in, kIdCheckedBytes)));
  if (std::memcmp(check.data(), in + kIdCheckedBytes, kIdCheckBytes) != 0) {
    return Status::error(Errc::InvalidArgument, "the unique id is corrupted (its check word does not match)");
  }
  UniqueId id;
  Result<sockaddr_storage> root = boot::decodeAddress(r.view(boot::kAddressBytes));
  if (!root.ok()) return withContext(root.status(), "the unique id holds a bad root address: ");
  id.root = *root;
  r.bytes(id.secret);
  id.magic = r.u64();
  id.startRootInInit = (flags & kIdFlagRootInInit) != 0;
  return id;
}

// ---- creating ids -------------------------------------------------------------------------------------------

Result<sockaddr_storage> listenAddress(const BootstrapOptions& options) {
  CFX_TRY_ASSIGN(const net::Interface itf, pickInterface(options, nullptr));
  return itf.addr;
}

Result<UniqueId> createUniqueId(const BootstrapOptions& options) {
  CFX_TRY_ASSIGN(const net::Interface itf, pickInterface(options, nullptr));
  CFX_TRY_ASSIGN(net::Listener listener, net::Listener::listen(itf.addr));
  UniqueId id;
  id.root = listener.address();
  CFX_TRY(crypto::randomBytes(id.secret));
  CFX_TRY(crypto::randomBytes(std::span<uint8_t>(reinterpret_cast<uint8_t*>(&id.magic), sizeof(id.magic))));
  CFX_TRY(startRootOn(std::move(listener), id, options));
  CFX_INFO(log::Sys::Bootstrap, "Bootstrap: root listening on %s (%s) for one communicator, magic 0x%llx",
           net::addressToString(id.root).c_str(), itf.name.c_str(), static_cast<unsigned long long>(id.magic));
  return id;
}

Result<UniqueId> uniqueIdFromAddress(const std::string& hostPort, const std::string& secretText, bool startRoot) {
  Result<sockaddr_storage> addr = net::parseAddress(hostPort);
  if (!addr.ok()) return withContext(addr.status(), "NCCL_COMM_ID: ");
  if (net::addressPort(*addr) == 0) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("NCCL_COMM_ID '%s' needs a port other than 0", hostPort.c_str()));
  }
  UniqueId id;
  id.root = *addr;
  id.startRootInInit = startRoot;
  if (secretText.empty()) {
    static std::once_flag once;
    std::call_once(once, [] {
      CFX_WARN("Bootstrap: this job has no secret (neither CFX_SECRET nor CFX_SECRET_FILE is set), so its "
               "connections are not authenticated: anyone who can reach its ports can join it, feed it data or "
               "stop it. Set CFX_SECRET (or CFX_SECRET_FILE) to the same random text on every rank (cfxrun does "
               "it for you); across hosts the job refuses to start without one unless CFX_ALLOW_INSECURE=1.");
    });
  } else {
    CFX_TRY_ASSIGN(const crypto::Digest s, crypto::sha256(secretText));
    std::copy(s.begin(), s.end(), id.secret.begin());
  }
  // Every rank derives the same magic from the same text, without talking to anyone.
  const std::string seed = "cfx-comm-id/v1|" + hostPort + "|" + secretText;
  CFX_TRY_ASSIGN(const crypto::Digest h, crypto::sha256(seed));
  id.magic = wire::getU64(h.data());
  return id;
}

crypto::Protection resolveProtection(WireProtection setting, bool sameHost) {
  switch (setting) {
    case WireProtection::Off: return crypto::Protection::Off;
    case WireProtection::Integrity: return crypto::Protection::Integrity;
    case WireProtection::Encryption: return crypto::Protection::Encryption;
    case WireProtection::Auto: break;
  }
  // Between ranks of one host the bytes never leave the kernel: nobody but root can change them on the way.
  return sameHost ? crypto::Protection::Off : crypto::Protection::Integrity;
}

// ---- joining ------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Bootstrap>> Bootstrap::init(const UniqueId& id, int rank, int nRanks,
                                                   const BootstrapOptions& options) {
  if (nRanks < 1 || rank < 0 || rank >= nRanks) {
    return Status::error(Errc::InvalidArgument, strprintf("bootstrap: rank %d is outside [0, %d)", rank, nRanks));
  }
  const int groups = id.allIds.empty() ? 1 : static_cast<int>(id.allIds.size());
  if (groups > nRanks) {
    return Status::error(Errc::InvalidArgument, strprintf("bootstrap: %d ids for %d ranks: every id's root needs at "
                                                          "least one rank, so pass at most nRanks ids",
                                                          groups, nRanks));
  }
  const int group = boot::groupOf(rank, nRanks, groups);
  const boot::GroupRange range = boot::groupRange(group, nRanks, groups);
  const UniqueId& mine = groups == 1 ? id : id.allIds[static_cast<size_t>(group)];
  const Clock::time_point start = Clock::now();
  const Deadline deadline(options.timeout);
  const std::atomic<bool>* abortFlag = options.abortFlag;
  const std::string rootName = net::addressToString(mine.root);

  CFX_TRY_ASSIGN(const net::Interface itf, pickInterface(options, &mine.root));
  Result<net::Listener> listener = net::Listener::listen(itf.addr);
  if (!listener.ok()) return withContext(listener.status(), strprintf("rank %d: bootstrap: ", rank));

  if (mine.startRootInInit && rank == range.first) {
    Result<net::Listener> rootListener = net::Listener::listen(mine.root);
    if (!rootListener.ok()) {
      return withContext(rootListener.status(),
                         strprintf("rank %d: cannot serve the bootstrap root at %s (NCCL_COMM_ID must name an address "
                                   "of rank %d's host): ",
                                   rank, rootName.c_str(), rank));
    }
    CFX_TRY(startRootOn(std::move(*rootListener), mine, options));
  }

  Result<net::Socket> root =
      net::Socket::connect(mine.root, {options.connectRetries, options.retrySleep}, deadline, abortFlag);
  if (!root.ok()) {
    return withContext(root.status(),
                       strprintf("rank %d: cannot reach the bootstrap root at %s: ", rank, rootName.c_str()));
  }
  const boot::JoinHello hello{listener->address(), group, groups};
  Result<boot::FrameKeys> keys = boot::clientHandshake(*root, credentialsOf(mine, options), boot::ConnKind::RootJoin,
                                                       rank, nRanks, &hello, deadline, abortFlag);
  if (!keys.ok()) return withContext(keys.status(), strprintf("rank %d: joining at the bootstrap root: ", rank));
  const double connectSecs = secondsSince(start);
  Result<boot::RootAnswer> table =
      groups > 1 && group > 0 && rank == range.first
          ? leadGroup(id, *root, *keys, rank, nRanks, group, groups, options, start, abortFlag)
          : awaitTable(*root, *keys, rank, nRanks, 1, options, start, abortFlag);
  root->close();
  if (!table.ok()) {
    // Where the root runs in this process, let it tell the other ranks whom they wait for (root.h) before this
    // rank returns and its process perhaps exits, taking the root with it. Not after an abort, which must be prompt.
    const bool abortRaised = abortFlag != nullptr && abortFlag->load(std::memory_order_relaxed);
    if (const std::shared_ptr<boot::RootDone> hosted = abortRaised ? nullptr : boot::hostedRoot(mine.magic)) {
      (void)hosted->wait(std::max(options.handshakeTimeout, std::chrono::milliseconds(1000)));
    }
    return table.status();
  }

  const boot::Credentials cred = credentialsOf(id, options);
  const sockaddr_storage listenAddr = listener->address();
  boot::SocketBootstrap::Setup setup;
  setup.rank = rank;
  setup.nRanks = nRanks;
  setup.cred = cred;
  setup.authenticated = !id.insecure() && std::none_of(id.allIds.begin(), id.allIds.end(),
                                                       [](const UniqueId& other) { return other.insecure(); });
  CFX_TRY_ASSIGN(const crypto::Digest session,
                 crypto::hmacSha256(id.secret, {crypto::bytesOf("cfx-session-v1"), table->sessionNonce}));
  std::copy(session.begin(), session.end(), setup.sessionSecret.begin());
  setup.options = options;
  setup.listener = std::move(*listener);
  setup.table = std::move(table->table);
  CFX_TRY_ASSIGN(std::unique_ptr<boot::SocketBootstrap> b, boot::SocketBootstrap::start(std::move(setup)));
  CFX_INFO(
      log::Sys::Bootstrap,
      "Bootstrap timings total %.6f (connect %.6f, wait for ranks %.6f) rank %d nRanks %d root %s (group %d of %d) "
      "listen %s",
      secondsSince(start), connectSecs, secondsSince(start) - connectSecs, rank, nRanks, rootName.c_str(), group,
      groups, net::addressToString(listenAddr).c_str());
  return std::unique_ptr<Bootstrap>(std::move(b));
}

}  // namespace cfx::transport
