// SPDX-License-Identifier: Apache-2.0
// Bootstrap wire format and the mutual HMAC handshake (transport layer, bootstrap internals).
#include "transport/bootstrap/wire.h"

#include <netinet/in.h>
#include <poll.h>

#include <cstring>

namespace cfx::transport::boot {

namespace {

constexpr std::string_view kClientLabel = "cfx-boot-v1/client";
constexpr std::string_view kServerLabel = "cfx-boot-v1/server";

constexpr uint16_t kWireV4 = 4;
constexpr uint16_t kWireV6 = 6;

std::span<const uint8_t> asSpan(const Secret& s) { return {s.data(), s.size()}; }

Result<crypto::Digest> clientMac(const Credentials& cred, const uint8_t* serverNonce, ConnKind kind, int rank,
                                 int nRanks) {
  uint8_t fields[18];
  Writer w(fields);
  w.u64(cred.commMagic);
  w.u16(static_cast<uint16_t>(kind));
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nRanks));
  return crypto::hmacSha256(asSpan(cred.secret),
                            {crypto::bytesOf(kClientLabel), {serverNonce, kNonceBytes}, {fields, sizeof(fields)}});
}

Result<crypto::Digest> serverMac(const Credentials& cred, const uint8_t* clientNonce, const uint8_t* serverNonce) {
  uint8_t fields[8];
  Writer(fields).u64(cred.commMagic);
  return crypto::hmacSha256(asSpan(cred.secret), {crypto::bytesOf(kServerLabel),
                                                  {clientNonce, kNonceBytes},
                                                  {serverNonce, kNonceBytes},
                                                  {fields, sizeof(fields)}});
}

}  // namespace

void Writer::u16(uint16_t v) {
  p_[0] = static_cast<uint8_t>(v >> 8);
  p_[1] = static_cast<uint8_t>(v);
  p_ += 2;
}
void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) p_[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  p_ += 4;
}
void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) p_[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  p_ += 8;
}
void Writer::bytes(const void* data, size_t n) {
  if (n != 0) std::memcpy(p_, data, n);
  p_ += n;
}

uint16_t Reader::u16() {
  const uint16_t v = static_cast<uint16_t>((p_[0] << 8) | p_[1]);
  p_ += 2;
  return v;
}
uint32_t Reader::u32() {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p_[i];
  p_ += 4;
  return v;
}
uint64_t Reader::u64() {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p_[i];
  p_ += 8;
  return v;
}
void Reader::bytes(void* data, size_t n) {
  if (n != 0) std::memcpy(data, p_, n);
  p_ += n;
}

// ---- addresses and frames -----------------------------------------------------------------------------------

void encodeAddress(const sockaddr_storage& addr, uint8_t out[kAddressBytes]) {
  std::memset(out, 0, kAddressBytes);
  Writer w(out);
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
  Reader r(in);
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
  std::memset(out, 0, kFrameHeaderBytes);
  Writer w(out);
  w.u32(kFrameMagic);
  const uint8_t kind = static_cast<uint8_t>(h.kind);
  w.bytes(&kind, 1);
  w.bytes("\0\0\0", 3);
  w.u64(h.tag);
  w.u64(h.bytes);
}

Result<FrameHeader> decodeFrameHeader(const uint8_t in[kFrameHeaderBytes], size_t maxBytes) {
  Reader r(in);
  const uint32_t magic = r.u32();
  if (magic != kFrameMagic) return Status::error(Errc::RemoteError, strprintf("bad frame magic 0x%08x", magic));
  uint8_t kind = 0;
  r.bytes(&kind, 1);
  uint8_t pad[3];
  r.bytes(pad, 3);
  FrameHeader h;
  h.tag = r.u64();
  h.bytes = r.u64();
  const bool known = (kind >= 1 && kind <= 3) || (kind >= 16 && kind <= 19);
  if (!known || pad[0] != 0 || pad[1] != 0 || pad[2] != 0) {
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

std::array<uint8_t, kChallengeBytes> encodeChallenge(std::span<const uint8_t, kNonceBytes> serverNonce) {
  std::array<uint8_t, kChallengeBytes> out{};
  Writer w(out.data());
  w.u32(kHandshakeMagic);
  w.u16(kProtocolVersion);
  w.u16(0);
  w.bytes(serverNonce.data(), kNonceBytes);
  return out;
}

Result<std::array<uint8_t, kAuthBytes>> encodeAuth(const Credentials& cred,
                                                   std::span<const uint8_t, kNonceBytes> serverNonce, ConnKind kind,
                                                   int rank, int nRanks,
                                                   std::span<const uint8_t, kNonceBytes> clientNonce) {
  CFX_TRY_ASSIGN(const crypto::Digest mac, clientMac(cred, serverNonce.data(), kind, rank, nRanks));
  std::array<uint8_t, kAuthBytes> out{};
  Writer w(out.data());
  w.u32(kHandshakeMagic);
  w.u16(kProtocolVersion);
  w.u16(static_cast<uint16_t>(kind));
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nRanks));
  w.bytes(clientNonce.data(), kNonceBytes);
  w.bytes(mac.data(), mac.size());
  return out;
}

Result<std::array<uint8_t, kProofBytes>> encodeServerProof(const Credentials& cred,
                                                           std::span<const uint8_t, kNonceBytes> clientNonce,
                                                           std::span<const uint8_t, kNonceBytes> serverNonce) {
  CFX_TRY_ASSIGN(const crypto::Digest mac, serverMac(cred, clientNonce.data(), serverNonce.data()));
  static_assert(crypto::kDigestBytes == kProofBytes);
  return mac;
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
  Reader r(in.data());
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

Result<std::array<uint8_t, kNonceBytes>> decodeChallenge(std::span<const uint8_t> in) {
  if (in.size() != kChallengeBytes) {
    return Status::error(Errc::RemoteError,
                         strprintf("a handshake challenge is %zu bytes, not %zu", kChallengeBytes, in.size()));
  }
  CFX_TRY(checkMagicAndVersion(in, "handshake challenge"));
  std::array<uint8_t, kNonceBytes> nonce{};
  std::memcpy(nonce.data(), in.data() + 8, kNonceBytes);
  return nonce;
}

Status checkServerProof(const Credentials& cred, std::span<const uint8_t, kNonceBytes> clientNonce,
                        std::span<const uint8_t, kNonceBytes> serverNonce, std::span<const uint8_t> proof) {
  CFX_TRY_ASSIGN(const crypto::Digest expected, serverMac(cred, clientNonce.data(), serverNonce.data()));
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
  Reader r(in.data() + kAuthPrefixBytes);
  const uint16_t kind = r.u16();
  Auth auth;
  auth.rank = static_cast<int>(r.u32());
  auth.nRanks = static_cast<int>(r.u32());
  r.bytes(auth.clientNonce.data(), kNonceBytes);
  uint8_t mac[crypto::kDigestBytes];
  r.bytes(mac, sizeof(mac));
  if (kind != static_cast<uint16_t>(ConnKind::RootJoin) && kind != static_cast<uint16_t>(ConnKind::Peer)) {
    return Status::error(Errc::RemoteError, strprintf("asked for an unknown connection kind %u", kind));
  }
  auth.kind = static_cast<ConnKind>(kind);
  CFX_TRY_ASSIGN(const crypto::Digest expected, clientMac(cred, serverNonce.data(), auth.kind, auth.rank, auth.nRanks));
  if (!crypto::constantTimeEqual(mac, expected)) {
    return Status::error(Errc::RemoteError,
                         "failed authentication: wrong HMAC (a different secret or communicator, a handshake "
                         "recorded from another connection, or not a Conflux peer)");
  }
  return auth;
}

Result<RootAnswer> decodeRootAnswer(const FrameHeader& h, std::span<const uint8_t> payload, int nRanks) {
  if (payload.size() != h.bytes) {
    return Status::error(Errc::RemoteError, strprintf("the frame promised %llu bytes but carries %zu",
                                                      static_cast<unsigned long long>(h.bytes), payload.size()));
  }
  RootAnswer answer;
  answer.kind = h.kind;
  switch (h.kind) {
    case FrameKind::Table: {
      const size_t tableBytes = static_cast<size_t>(nRanks) * kAddressBytes;
      if (nRanks < 1 || h.tag != static_cast<uint64_t>(nRanks) || h.bytes != tableBytes) {
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

Status sendFrame(net::Socket& sock, const FrameHeader& h, const void* payload, const Deadline& deadline,
                 const std::atomic<bool>* abortFlag) {
  constexpr size_t kCoalesceBytes = 64 * 1024;
  if (h.bytes <= kCoalesceBytes) {
    uint8_t buf[kFrameHeaderBytes + kCoalesceBytes];
    encodeFrameHeader(h, buf);
    if (h.bytes != 0) std::memcpy(buf + kFrameHeaderBytes, payload, h.bytes);
    return sock.sendAll(buf, kFrameHeaderBytes + h.bytes, deadline, abortFlag);
  }
  uint8_t hdr[kFrameHeaderBytes];
  encodeFrameHeader(h, hdr);
  CFX_TRY(sock.sendAll(hdr, sizeof(hdr), deadline, abortFlag));
  return sock.sendAll(payload, h.bytes, deadline, abortFlag);
}

// ---- client handshake ---------------------------------------------------------------------------------------

Status clientHandshake(net::Socket& sock, const Credentials& cred, ConnKind kind, int rank, int nRanks,
                       const sockaddr_storage* hello, const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  uint8_t challenge[kChallengeBytes];
  CFX_TRY(sock.recvAll(challenge, sizeof(challenge), deadline, abortFlag));
  Result<std::array<uint8_t, kNonceBytes>> challenged = decodeChallenge(challenge);
  if (!challenged.ok()) {
    return Status::error(Errc::RemoteError, strprintf("%s is not a Conflux bootstrap endpoint of this version: it %s",
                                                      sock.peerName().c_str(), challenged.status().message().c_str()));
  }
  const std::array<uint8_t, kNonceBytes> serverNonce = *challenged;

  std::array<uint8_t, kNonceBytes> clientNonce{};
  CFX_TRY(crypto::randomBytes(clientNonce));
  CFX_TRY_ASSIGN(const auto auth, encodeAuth(cred, serverNonce, kind, rank, nRanks, clientNonce));
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
  if (Status st = checkServerProof(cred, clientNonce, serverNonce, proof); !st.ok()) {
    return Status::error(st.code(), sock.peerName() + " " + st.message());
  }
  if (hello != nullptr) {
    uint8_t addr[kAddressBytes];
    encodeAddress(*hello, addr);
    CFX_TRY(sock.sendAll(addr, sizeof(addr), deadline, abortFlag));
  }
  return {};
}

// ---- server handshake ---------------------------------------------------------------------------------------

ServerHandshake::ServerHandshake(net::Socket sock, const Credentials& cred, std::chrono::milliseconds timeout,
                                 Admission admission)
    : sock_(std::move(sock)), cred_(&cred), admission_(std::move(admission)), deadline_(timeout) {
  if (Status st = crypto::randomBytes(serverNonce_); !st.ok()) {
    fail("cannot draw a nonce: " + st.message());
    return;
  }
  const auto challenge = encodeChallenge(serverNonce_);
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
        startRecv(kAddressBytes, Stage::RecvHello);
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
    if (stage_ == Stage::RecvAuth) {
      if (onAuth() != State::Running) return state_;
    } else {
      Result<sockaddr_storage> addr = decodeAddress(std::span<const uint8_t>(in_.data(), kAddressBytes));
      if (!addr.ok()) return fail("sent a bad listen address: " + addr.status().message());
      hello_ = *addr;
      state_ = State::Done;
    }
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
  Result<std::array<uint8_t, kProofBytes>> proof = encodeServerProof(*cred_, auth->clientNonce, serverNonce_);
  if (!proof.ok()) return fail("cannot compute the HMAC: " + proof.status().message());
  startSend(proof->data(), proof->size(), Stage::SendProof);
  return state_;
}

}  // namespace cfx::transport::boot
