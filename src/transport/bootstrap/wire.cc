// SPDX-License-Identifier: Apache-2.0
// Bootstrap wire format, frame protection and the mutual HMAC handshake (transport layer, bootstrap internals).
#include "transport/bootstrap/wire.h"

#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/wire.h"

namespace cfx::transport::boot {

namespace {

constexpr std::string_view kClientLabel = "cfx-boot-v2/client";
constexpr std::string_view kServerLabel = "cfx-boot-v2/server";
constexpr std::string_view kKeyLabel = "cfx-boot-v2/key";

constexpr uint16_t kWireV4 = 4;
constexpr uint16_t kWireV6 = 6;

std::span<const uint8_t> asSpan(const Secret& s) { return {s.data(), s.size()}; }

bool knownProtection(uint8_t p) { return p <= static_cast<uint8_t>(crypto::Protection::Encryption); }

crypto::Protection stricter(crypto::Protection a, crypto::Protection b) { return std::max(a, b); }

Result<crypto::Digest> clientMac(const Credentials& cred, const uint8_t* serverNonce, ConnKind kind, int rank,
                                 int nRanks, crypto::Protection protection) {
  uint8_t fields[19];
  wire::Writer w(fields, sizeof(fields));
  w.u64(cred.commMagic);
  w.u16(static_cast<uint16_t>(kind));
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nRanks));
  w.u8(static_cast<uint8_t>(protection));
  return crypto::hmacSha256(asSpan(cred.secret),
                            {crypto::bytesOf(kClientLabel), {serverNonce, kNonceBytes}, {fields, sizeof(fields)}});
}

Result<crypto::Digest> serverMac(const Credentials& cred, const uint8_t* clientNonce, const uint8_t* serverNonce,
                                 crypto::Protection clientProtection, crypto::Protection serverProtection) {
  uint8_t fields[10];
  wire::Writer w(fields, sizeof(fields));
  w.u64(cred.commMagic);
  w.u8(static_cast<uint8_t>(clientProtection));
  w.u8(static_cast<uint8_t>(serverProtection));
  return crypto::hmacSha256(asSpan(cred.secret), {crypto::bytesOf(kServerLabel),
                                                  {clientNonce, kNonceBytes},
                                                  {serverNonce, kNonceBytes},
                                                  {fields, sizeof(fields)}});
}

}  // namespace

// ---- addresses and frames -----------------------------------------------------------------------------------

void encodeAddress(const sockaddr_storage& addr, uint8_t out[kAddressBytes]) {
  std::memset(out, 0, kAddressBytes);
  wire::Writer w(out, kAddressBytes);
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    w.u16(kWireV4);
    w.u16(ntohs(in.sin_port));
    w.u32(0);
    w.bytes(&in.sin_addr, 4);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    w.u16(kWireV6);
    w.u16(ntohs(in6.sin6_port));
    w.u32(in6.sin6_scope_id);
    w.bytes(&in6.sin6_addr, 16);
  }
}

Result<sockaddr_storage> decodeAddress(const uint8_t in[kAddressBytes]) {
  wire::Reader r(in, kAddressBytes);
  const uint16_t family = r.u16();
  const uint16_t port = r.u16();
  const uint32_t scope = r.u32();
  sockaddr_storage out{};
  if (family == kWireV4) {
    auto& a = reinterpret_cast<sockaddr_in&>(out);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    r.bytes(&a.sin_addr, 4);
  } else if (family == kWireV6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(out);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_scope_id = scope;
    r.bytes(&a.sin6_addr, 16);
  } else {
    return Status::error(Errc::InvalidArgument, strprintf("unknown address family code %u", family));
  }
  if (port == 0) return Status::error(Errc::InvalidArgument, "address without a port");
  return out;
}

void encodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  wire::Writer w(out, kFrameHeaderBytes);
  w.u32(kFrameMagic);
  w.u8(static_cast<uint8_t>(h.kind));
  w.zeros(3);
  w.u64(h.tag);
  w.u64(h.bytes);
}

Result<FrameHeader> decodeFrameHeader(const uint8_t in[kFrameHeaderBytes], size_t maxBytes) {
  wire::Reader r(in, kFrameHeaderBytes);
  const uint32_t magic = r.u32();
  if (magic != kFrameMagic) return Status::error(Errc::RemoteError, strprintf("bad frame magic 0x%08x", magic));
  const uint8_t kind = r.u8();
  const uint8_t pad0 = r.u8();
  const uint8_t pad1 = r.u8();
  const uint8_t pad2 = r.u8();
  FrameHeader h;
  h.tag = r.u64();
  h.bytes = r.u64();
  const bool known = (kind >= 1 && kind <= 3) || (kind >= 16 && kind <= 22);
  if (!known || pad0 != 0 || pad1 != 0 || pad2 != 0) {
    return Status::error(Errc::RemoteError, strprintf("bad frame kind %u", kind));
  }
  h.kind = static_cast<FrameKind>(kind);
  if (h.bytes > maxBytes) {
    return Status::error(Errc::RemoteError, strprintf("frame of %llu bytes exceeds the limit of %zu",
                                                      static_cast<unsigned long long>(h.bytes), maxBytes));
  }
  return h;
}

// ---- handshake messages -------------------------------------------------------------------------------------

std::array<uint8_t, kChallengeBytes> encodeChallenge(std::span<const uint8_t, kNonceBytes> serverNonce,
                                                     crypto::Protection serverProtection) {
  std::array<uint8_t, kChallengeBytes> out{};
  wire::Writer w(out);
  w.u32(kHandshakeMagic);
  w.u16(kProtocolVersion);
  w.u8(static_cast<uint8_t>(serverProtection));
  w.u8(0);
  w.bytes(serverNonce);
  return out;
}

Result<std::array<uint8_t, kAuthBytes>> encodeAuth(const Credentials& cred,
                                                   std::span<const uint8_t, kNonceBytes> serverNonce, ConnKind kind,
                                                   int rank, int nRanks,
                                                   std::span<const uint8_t, kNonceBytes> clientNonce) {
  CFX_TRY_ASSIGN(const crypto::Digest mac, clientMac(cred, serverNonce.data(), kind, rank, nRanks, cred.protection));
  std::array<uint8_t, kAuthBytes> out{};
  wire::Writer w(out);
  w.u32(kHandshakeMagic);
  w.u16(kProtocolVersion);
  w.u16(static_cast<uint16_t>(kind));
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nRanks));
  w.u8(static_cast<uint8_t>(cred.protection));
  w.zeros(3);
  w.bytes(clientNonce);
  w.bytes(mac);
  return out;
}

Result<std::array<uint8_t, kProofBytes>> encodeServerProof(const Credentials& cred,
                                                           std::span<const uint8_t, kNonceBytes> clientNonce,
                                                           std::span<const uint8_t, kNonceBytes> serverNonce,
                                                           crypto::Protection clientProtection) {
  CFX_TRY_ASSIGN(const crypto::Digest mac,
                 serverMac(cred, clientNonce.data(), serverNonce.data(), clientProtection, cred.protection));
  static_assert(crypto::kDigestBytes == kProofBytes);
  return mac;
}

Result<FrameKeys> deriveFrameKeys(const Secret& secret, uint64_t commMagic, crypto::Protection protection,
                                  std::span<const uint8_t, kNonceBytes> clientNonce,
                                  std::span<const uint8_t, kNonceBytes> serverNonce, bool isClient) {
  uint8_t fields[9];
  wire::Writer w(fields, sizeof(fields));
  w.u64(commMagic);
  w.u8(static_cast<uint8_t>(protection));
  return crypto::connectionKeys(asSpan(secret), protection, isClient,
                                {crypto::bytesOf(kKeyLabel), clientNonce, serverNonce, {fields, sizeof(fields)}});
}

// ---- parsers of received bytes ------------------------------------------------------------------------------

Result<sockaddr_storage> decodeAddress(std::span<const uint8_t> in) {
  if (in.size() != kAddressBytes) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("an address is %zu bytes, not %zu", kAddressBytes, in.size()));
  }
  return decodeAddress(in.data());
}

Result<FrameHeader> decodeFrameHeader(std::span<const uint8_t> in, size_t maxBytes) {
  if (in.size() != kFrameHeaderBytes) {
    return Status::error(Errc::RemoteError,
                         strprintf("a frame header is %zu bytes, not %zu", kFrameHeaderBytes, in.size()));
  }
  return decodeFrameHeader(in.data(), maxBytes);
}

namespace {

// Magic and version of a Challenge or an Auth; `what` names the message for the error.
Status checkMagicAndVersion(std::span<const uint8_t> in, const char* what) {
  if (in.size() < kAuthPrefixBytes) {
    return Status::error(Errc::RemoteError,
                         strprintf("a %s starts with %zu bytes, not %zu", what, kAuthPrefixBytes, in.size()));
  }
  wire::Reader r(in);
  const uint32_t magic = r.u32();
  const uint16_t version = r.u16();
  if (magic != kHandshakeMagic) {
    return Status::error(Errc::RemoteError, strprintf("sent garbage instead of a %s (0x%08x)", what, magic));
  }
  if (version != kProtocolVersion) {
    return Status::error(Errc::RemoteError,
                         strprintf("speaks bootstrap protocol %u, this library speaks %u", version, kProtocolVersion));
  }
  return {};
}

}  // namespace

Result<Challenge> decodeChallenge(std::span<const uint8_t> in) {
  if (in.size() != kChallengeBytes) {
    return Status::error(Errc::RemoteError,
                         strprintf("a handshake challenge is %zu bytes, not %zu", kChallengeBytes, in.size()));
  }
  CFX_TRY(checkMagicAndVersion(in, "handshake challenge"));
  wire::Reader r(in.subspan(kAuthPrefixBytes));
  const uint8_t protection = r.u8();
  const uint8_t pad = r.u8();
  Challenge c;
  r.bytes(c.nonce);
  if (!knownProtection(protection) || pad != 0) {
    return Status::error(Errc::RemoteError, strprintf("asks for an unknown frame protection %u", protection));
  }
  c.protection = static_cast<crypto::Protection>(protection);
  return c;
}

Status checkServerProof(const Credentials& cred, std::span<const uint8_t, kNonceBytes> clientNonce,
                        const Challenge& challenge, std::span<const uint8_t> proof) {
  CFX_TRY_ASSIGN(const crypto::Digest expected, serverMac(cred, clientNonce.data(), challenge.nonce.data(),
                                                          cred.protection, challenge.protection));
  if (proof.size() != kProofBytes || !crypto::constantTimeEqual(proof, expected)) {
    return Status::error(Errc::RemoteError, "failed to prove it knows the communicator's secret");
  }
  return {};
}

Status checkAuthPrefix(std::span<const uint8_t> in) { return checkMagicAndVersion(in, "handshake"); }

Result<Auth> checkAuth(const Credentials& cred, std::span<const uint8_t, kNonceBytes> serverNonce,
                       std::span<const uint8_t> in) {
  if (in.size() != kAuthBytes) {
    return Status::error(Errc::RemoteError, strprintf("a handshake is %zu bytes, not %zu", kAuthBytes, in.size()));
  }
  CFX_TRY(checkAuthPrefix(in));
  wire::Reader r(in.subspan(kAuthPrefixBytes));
  const uint16_t kind = r.u16();
  Auth auth;
  auth.rank = static_cast<int>(r.u32());
  auth.nRanks = static_cast<int>(r.u32());
  const uint8_t protection = r.u8();
  const uint8_t pad0 = r.u8();
  const uint8_t pad1 = r.u8();
  const uint8_t pad2 = r.u8();
  r.bytes(auth.clientNonce);
  uint8_t mac[crypto::kDigestBytes];
  r.bytes(mac, sizeof(mac));
  if (kind != static_cast<uint16_t>(ConnKind::RootJoin) && kind != static_cast<uint16_t>(ConnKind::Peer) &&
      kind != static_cast<uint16_t>(ConnKind::GroupJoin)) {
    return Status::error(Errc::RemoteError, strprintf("asked for an unknown connection kind %u", kind));
  }
  if (!knownProtection(protection) || (pad0 | pad1 | pad2) != 0) {
    return Status::error(Errc::RemoteError, strprintf("asked for an unknown frame protection %u", protection));
  }
  auth.kind = static_cast<ConnKind>(kind);
  auth.protection = static_cast<crypto::Protection>(protection);
  CFX_TRY_ASSIGN(const crypto::Digest expected,
                 clientMac(cred, serverNonce.data(), auth.kind, auth.rank, auth.nRanks, auth.protection));
  if (!crypto::constantTimeEqual(mac, expected)) {
    return Status::error(Errc::RemoteError,
                         "failed authentication: wrong HMAC (a different secret or communicator, a handshake "
                         "recorded from another connection, or not a Conflux peer)");
  }
  return auth;
}

// ---- several roots -------------------------------------------------------------------------------------------

int groupOf(int rank, int nRanks, int groups) { return static_cast<int>(static_cast<int64_t>(rank) * groups / nRanks); }

GroupRange groupRange(int group, int nRanks, int groups) {
  // The smallest rank r with r * groups / nRanks >= g is ceil(g * nRanks / groups).
  const auto firstOf = [&](int g) {
    return static_cast<int>((static_cast<int64_t>(g) * nRanks + groups - 1) / groups);
  };
  const int first = firstOf(group);
  return {first, firstOf(group + 1) - first};
}

std::array<uint8_t, kHelloBytes> encodeHello(const JoinHello& hello) {
  std::array<uint8_t, kHelloBytes> out{};
  encodeAddress(hello.listen, out.data());
  wire::Writer w(std::span<uint8_t>(out).subspan(kAddressBytes));
  w.u32(static_cast<uint32_t>(hello.group));
  w.u32(static_cast<uint32_t>(hello.groups));
  return out;
}

Result<JoinHello> decodeHello(std::span<const uint8_t> in) {
  if (in.size() != kHelloBytes) {
    return Status::error(Errc::RemoteError, strprintf("a Hello is %zu bytes, not %zu", kHelloBytes, in.size()));
  }
  Result<sockaddr_storage> addr = decodeAddress(in.first(kAddressBytes));
  if (!addr.ok()) return Status::error(Errc::RemoteError, "sent a bad listen address: " + addr.status().message());
  wire::Reader r(in.subspan(kAddressBytes));
  const uint32_t group = r.u32();
  const uint32_t groups = r.u32();
  if (groups < 1 || groups > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) || group >= groups) {
    return Status::error(Errc::RemoteError, strprintf("names group %u of %u", group, groups));
  }
  return JoinHello{*addr, static_cast<int>(group), static_cast<int>(groups)};
}

std::vector<uint8_t> encodeGroupAddresses(std::span<const sockaddr_storage> addresses) {
  std::vector<uint8_t> out(addresses.size() * kAddressBytes);
  for (size_t i = 0; i < addresses.size(); ++i) encodeAddress(addresses[i], out.data() + i * kAddressBytes);
  return out;
}

Result<GroupBlock> decodeGroup(const FrameHeader& h, std::span<const uint8_t> payload, int nRanks, int groups) {
  if (h.kind != FrameKind::Group) return Status::error(Errc::RemoteError, "sent a frame other than a Group frame");
  if (payload.size() != h.bytes) {
    return Status::error(Errc::RemoteError, strprintf("the frame promised %llu bytes but carries %zu",
                                                      static_cast<unsigned long long>(h.bytes), payload.size()));
  }
  const uint64_t claimedGroups = h.tag >> 32;
  const uint64_t group = h.tag & 0xffffffffu;
  if (nRanks < 1 || claimedGroups < 2 || claimedGroups > static_cast<uint64_t>(nRanks) || group >= claimedGroups ||
      (groups >= 1 && claimedGroups != static_cast<uint64_t>(groups))) {
    return Status::error(
        Errc::RemoteError,
        strprintf("sent a Group frame for group %llu of %llu, which does not fit %d ranks%s",
                  static_cast<unsigned long long>(group), static_cast<unsigned long long>(claimedGroups), nRanks,
                  groups >= 1 ? strprintf(" in %d groups", groups).c_str() : ""));
  }
  GroupBlock block;
  block.group = static_cast<int>(group);
  block.groups = static_cast<int>(claimedGroups);
  const GroupRange range = groupRange(block.group, nRanks, block.groups);
  if (payload.size() != static_cast<size_t>(range.count) * kAddressBytes) {
    return Status::error(Errc::RemoteError, strprintf("sent %zu bytes for the %d addresses of group %d", payload.size(),
                                                      range.count, block.group));
  }
  block.addresses.resize(static_cast<size_t>(range.count));
  for (int i = 0; i < range.count; ++i) {
    Result<sockaddr_storage> a = decodeAddress(payload.subspan(static_cast<size_t>(i) * kAddressBytes, kAddressBytes));
    if (!a.ok()) {
      return Status::error(Errc::RemoteError,
                           strprintf("bad address for rank %d: %s", range.first + i, a.status().message().c_str()));
    }
    block.addresses[static_cast<size_t>(i)] = *a;
  }
  return block;
}

Result<RootAnswer> decodeRootAnswer(const FrameHeader& h, std::span<const uint8_t> payload, int nRanks) {
  if (payload.size() != h.bytes) {
    return Status::error(Errc::RemoteError, strprintf("the frame promised %llu bytes but carries %zu",
                                                      static_cast<unsigned long long>(h.bytes), payload.size()));
  }
  RootAnswer answer;
  answer.kind = h.kind;
  switch (h.kind) {
    case FrameKind::Table:
    case FrameKind::Forward: {
      if (nRanks < 1 || h.tag != static_cast<uint64_t>(nRanks) || h.bytes != tablePayloadBytes(nRanks)) {
        return Status::error(Errc::RemoteError, "sent a table of the wrong size");
      }
      answer.table.resize(static_cast<size_t>(nRanks));
      for (int r = 0; r < nRanks; ++r) {
        Result<sockaddr_storage> a =
            decodeAddress(payload.subspan(static_cast<size_t>(r) * kAddressBytes, kAddressBytes));
        if (!a.ok())
          return Status::error(Errc::RemoteError,
                               strprintf("bad address for rank %d: %s", r, a.status().message().c_str()));
        answer.table[static_cast<size_t>(r)] = *a;
      }
      std::memcpy(answer.sessionNonce.data(), payload.data() + static_cast<size_t>(nRanks) * kAddressBytes,
                  kSessionNonceBytes);
      return answer;
    }
    case FrameKind::Error:
    case FrameKind::Status: {
      if (payload.size() > kMaxControlBytes) {
        return Status::error(Errc::RemoteError, strprintf("sent a %zu-byte message, over the %zu-byte limit",
                                                          payload.size(), kMaxControlBytes));
      }
      // The text ends up in an error message and a log line: nothing in it may forge or break a line.
      answer.text.reserve(payload.size());
      for (const uint8_t c : payload) answer.text.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
      if (h.kind == FrameKind::Error) {
        // InProgress would make a failed init look pending to a non-blocking caller, which would then poll forever.
        const bool known = h.tag >= static_cast<uint64_t>(Errc::SystemError) &&
                           h.tag <= static_cast<uint64_t>(Errc::Timeout) &&
                           h.tag != static_cast<uint64_t>(Errc::InProgress);
        answer.code = known ? static_cast<Errc>(h.tag) : Errc::RemoteError;
      }
      return answer;
    }
    default:
      return Status::error(Errc::RemoteError, "sent an unexpected frame");
  }
}

// ---- frames on a connection ---------------------------------------------------------------------------------

Status sendFrame(net::Socket& sock, crypto::FrameCipher& key, const FrameHeader& h, const void* payload,
                 const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const size_t tagBytes = key.tagBytes();
  const auto* src = static_cast<const uint8_t*>(payload);
  uint8_t hdr[kFrameHeaderBytes];
  encodeFrameHeader(h, hdr);
  if (h.bytes <= kCoalesceBytes) {
    std::vector<uint8_t> buf(kFrameHeaderBytes + h.bytes + tagBytes);
    std::memcpy(buf.data(), hdr, kFrameHeaderBytes);
    uint8_t* body = buf.data() + kFrameHeaderBytes;
    if (h.bytes != 0) std::memcpy(body, src, h.bytes);
    CFX_TRY(key.seal(hdr, body, body, h.bytes, body + h.bytes));
    return sock.sendAll(buf.data(), buf.size(), deadline, abortFlag);
  }
  uint8_t tag[crypto::kTagBytes];
  std::vector<uint8_t> sealed;
  if (key.protection() == crypto::Protection::Encryption) {
    sealed.resize(h.bytes);
    CFX_TRY(key.seal(hdr, src, sealed.data(), h.bytes, tag));
    src = sealed.data();
  } else {
    CFX_TRY(key.seal(hdr, src, nullptr, h.bytes, tag));
  }
  CFX_TRY(sock.sendAll(hdr, sizeof(hdr), deadline, abortFlag));
  CFX_TRY(sock.sendAll(src, h.bytes, deadline, abortFlag));
  return tagBytes == 0 ? Status() : sock.sendAll(tag, tagBytes, deadline, abortFlag);
}

Status openFrame(crypto::FrameCipher& key, const uint8_t header[kFrameHeaderBytes], std::span<uint8_t> payload,
                 const uint8_t* tag) {
  CFX_TRY_ASSIGN(const bool authentic,
                 key.open({header, kFrameHeaderBytes}, payload.data(), payload.size(), tag));
  if (!authentic) {
    return Status::error(Errc::RemoteError,
                         strprintf("sent frame #%llu that fails authentication: it was changed, replayed or "
                                   "reordered on the way (or the sender does not hold this connection's key)",
                                   static_cast<unsigned long long>(key.frames() - 1)));
  }
  return {};
}

Result<Frame> recvFrame(net::Socket& sock, crypto::FrameCipher& key, size_t maxBytes, const Deadline& deadline,
                        const std::atomic<bool>* abortFlag) {
  uint8_t hdr[kFrameHeaderBytes];
  CFX_TRY(sock.recvAll(hdr, sizeof(hdr), deadline, abortFlag));
  CFX_TRY_ASSIGN(const FrameHeader h, decodeFrameHeader(hdr, maxBytes));
  Frame f;
  f.header = h;
  f.payload.resize(h.bytes + key.tagBytes());
  if (!f.payload.empty()) CFX_TRY(sock.recvAll(f.payload.data(), f.payload.size(), deadline, abortFlag));
  CFX_TRY(openFrame(key, hdr, {f.payload.data(), h.bytes}, f.payload.data() + h.bytes));
  f.payload.resize(h.bytes);
  return f;
}

// ---- client handshake ---------------------------------------------------------------------------------------

Result<FrameKeys> clientHandshake(net::Socket& sock, const Credentials& cred, ConnKind kind, int rank, int nRanks,
                                  const JoinHello* hello, const Deadline& deadline,
                                  const std::atomic<bool>* abortFlag) {
  uint8_t challengeBytes[kChallengeBytes];
  CFX_TRY(sock.recvAll(challengeBytes, sizeof(challengeBytes), deadline, abortFlag));
  Result<Challenge> challenge = decodeChallenge(challengeBytes);
  if (!challenge.ok()) {
    return Status::error(Errc::RemoteError, strprintf("%s is not a Conflux bootstrap endpoint of this version: it %s",
                                                      sock.peerName().c_str(), challenge.status().message().c_str()));
  }
  std::array<uint8_t, kNonceBytes> clientNonce{};
  CFX_TRY(crypto::randomBytes(clientNonce));
  CFX_TRY_ASSIGN(const auto auth, encodeAuth(cred, challenge->nonce, kind, rank, nRanks, clientNonce));
  CFX_TRY(sock.sendAll(auth.data(), auth.size(), deadline, abortFlag));

  uint8_t proof[kProofBytes];
  if (Status st = sock.recvAll(proof, sizeof(proof), deadline, abortFlag); !st.ok()) {
    if (st.code() != Errc::RemoteError || (abortFlag != nullptr && abortFlag->load(std::memory_order_relaxed))) {
      return st;
    }
    return Status::error(Errc::RemoteError,
                         strprintf("%s rejected this connection during the handshake (%s): a different secret or "
                                   "communicator, a duplicate or out-of-range rank, or a mismatched nRanks; the "
                                   "process serving %s logs the reason",
                                   sock.peerName().c_str(), st.message().c_str(), sock.peerName().c_str()));
  }
  if (Status st = checkServerProof(cred, clientNonce, *challenge, proof); !st.ok()) {
    return Status::error(st.code(), sock.peerName() + " " + st.message());
  }
  CFX_TRY_ASSIGN(FrameKeys keys, deriveFrameKeys(cred.secret, cred.commMagic,
                                                 stricter(cred.protection, challenge->protection), clientNonce,
                                                 challenge->nonce, /*isClient=*/true));
  if (hello != nullptr) {
    const auto payload = encodeHello(*hello);
    CFX_TRY(
        sendFrame(sock, keys.send, FrameHeader{FrameKind::Hello, 0, kHelloBytes}, payload.data(), deadline, abortFlag));
  }
  return keys;
}

// ---- server handshake ---------------------------------------------------------------------------------------

ServerHandshake::ServerHandshake(net::Socket sock, const Credentials& cred, std::chrono::milliseconds timeout,
                                 Admission admission)
    : sock_(std::move(sock)), cred_(&cred), admission_(std::move(admission)), deadline_(timeout) {
  if (Status st = crypto::randomBytes(serverNonce_); !st.ok()) {
    fail("cannot draw a nonce: " + st.message());
    return;
  }
  const auto challenge = encodeChallenge(serverNonce_, cred.protection);
  startSend(challenge.data(), challenge.size(), Stage::SendChallenge);
}

ServerHandshake::State ServerHandshake::fail(std::string why) {
  state_ = State::Failed;
  failure_ = std::move(why);
  sock_.close();
  return state_;
}

void ServerHandshake::startSend(const uint8_t* data, size_t n, Stage sendStage) {
  std::memcpy(out_.data(), data, n);
  outLen_ = n;
  outPos_ = 0;
  stage_ = sendStage;
}

void ServerHandshake::startRecv(size_t n, Stage next) {
  inNeed_ = n;
  inHave_ = 0;
  stage_ = next;
}

short ServerHandshake::pollEvents() const {
  return stage_ == Stage::SendChallenge || stage_ == Stage::SendProof ? POLLOUT : POLLIN;
}

ServerHandshake::State ServerHandshake::progress() {
  while (state_ == State::Running) {
    if (stage_ == Stage::SendChallenge || stage_ == Stage::SendProof) {
      Result<size_t> n = sock_.sendSome(out_.data() + outPos_, outLen_ - outPos_);
      if (!n.ok()) return fail("connection lost during the handshake: " + n.status().message());
      outPos_ += *n;
      if (outPos_ < outLen_) break;
      if (stage_ == Stage::SendChallenge) {
        startRecv(kAuthBytes, Stage::RecvAuth);
      } else if (kind_ == ConnKind::RootJoin) {
        startRecv(kFrameHeaderBytes + kHelloBytes + keys_.recv.tagBytes(), Stage::RecvHello);
      } else {
        state_ = State::Done;
      }
      continue;
    }
    Result<size_t> n = sock_.recvSome(in_.data() + inHave_, inNeed_ - inHave_);
    if (!n.ok()) {
      return fail(strprintf("closed the connection during the handshake after %zu bytes", inHave_));
    }
    if (*n == 0) break;
    const size_t before = inHave_;
    inHave_ += *n;
    // Reject garbage (an HTTP probe, a port scanner) as soon as the first words are in, not at the deadline.
    if (stage_ == Stage::RecvAuth && before < kAuthPrefixBytes && inHave_ >= kAuthPrefixBytes) {
      if (Status st = checkAuthPrefix({in_.data(), kAuthPrefixBytes}); !st.ok()) return fail(st.message());
    }
    if (inHave_ < inNeed_) continue;
    if ((stage_ == Stage::RecvAuth ? onAuth() : onHello()) != State::Running) return state_;
  }
  if (state_ == State::Running && deadline_.expired()) {
    return fail(strprintf(
        "timed out during the handshake (%s)",
        pollEvents() == POLLIN ? strprintf("%zu of %zu bytes arrived", inHave_, inNeed_).c_str() : "it does not read"));
  }
  return state_;
}

ServerHandshake::State ServerHandshake::onAuth() {
  Result<Auth> auth = checkAuth(*cred_, serverNonce_, {in_.data(), kAuthBytes});
  if (!auth.ok()) return fail(auth.status().message());
  kind_ = auth->kind;
  rank_ = auth->rank;
  nRanks_ = auth->nRanks;
  if (admission_) {
    if (std::string why = admission_(kind_, rank_, nRanks_); !why.empty()) return fail("authenticated, but " + why);
  }
  Result<std::array<uint8_t, kProofBytes>> proof =
      encodeServerProof(*cred_, auth->clientNonce, serverNonce_, auth->protection);
  if (!proof.ok()) return fail("cannot compute the HMAC: " + proof.status().message());
  Result<FrameKeys> keys = deriveFrameKeys(cred_->secret, cred_->commMagic,
                                           stricter(cred_->protection, auth->protection), auth->clientNonce,
                                           serverNonce_, /*isClient=*/false);
  if (!keys.ok()) return fail("cannot derive the frame keys: " + keys.status().message());
  keys_ = std::move(*keys);
  startSend(proof->data(), proof->size(), Stage::SendProof);
  return state_;
}

ServerHandshake::State ServerHandshake::onHello() {
  Result<FrameHeader> h = decodeFrameHeader(std::span<const uint8_t>(in_.data(), kFrameHeaderBytes), kHelloBytes);
  if (!h.ok() || h->kind != FrameKind::Hello || h->bytes != kHelloBytes) {
    return fail("sent something other than its Hello after the handshake" +
                (h.ok() ? std::string() : ": " + h.status().message()));
  }
  uint8_t* payload = in_.data() + kFrameHeaderBytes;
  if (Status st = openFrame(keys_.recv, in_.data(), {payload, kHelloBytes}, payload + kHelloBytes); !st.ok()) {
    return fail(st.message());
  }
  Result<JoinHello> hello = decodeHello(std::span<const uint8_t>(payload, kHelloBytes));
  if (!hello.ok()) return fail(hello.status().message());
  hello_ = *hello;
  state_ = State::Done;
  return state_;
}

}  // namespace cfx::transport::boot
