// SPDX-License-Identifier: Apache-2.0
// Health datagrams: encoding, decoding and the MAC (faulttol layer).
#include "faulttol/health_wire.h"

#include <algorithm>
#include <cstring>

#include "common/crypto.h"
#include "common/wire.h"

namespace cfx::ft::wire {

namespace {

using In = ::cfx::wire::Reader;
using Out = ::cfx::wire::Out;

constexpr std::string_view kHealthLabel = "cfx-health-v3";
constexpr size_t kFailureFixedBytes = 32;
constexpr size_t kRevokeFixedBytes = 12;

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n); }

}  // namespace

std::vector<uint8_t> encodeRevoke(const RevokeNotice& r) {
  const std::string text = clip(r.reason, kMaxTextBytes);
  std::vector<uint8_t> v;
  v.reserve(kRevokeFixedBytes + text.size());
  Out o(v);
  o.u32(static_cast<uint32_t>(r.origin));
  o.u32(static_cast<uint32_t>(r.code));
  o.u16(static_cast<uint16_t>(text.size()));
  o.u16(0);
  o.bytes(text);
  return v;
}

Result<RevokeNotice> decodeRevoke(std::span<const uint8_t> payload, int nRanks) {
  In in(payload);
  RevokeNotice r;
  const uint32_t origin = in.u32();
  const uint32_t code = in.u32();
  const size_t textLen = in.u16();
  const uint16_t reserved = in.u16();
  if (in.bad()) return Status::error(Errc::InvalidUsage, "revoke notice shorter than its fixed part");
  if (reserved != 0) {
    return Status::error(Errc::InvalidUsage, strprintf("revoke notice with 0x%04x in its reserved field", reserved));
  }
  if (origin >= static_cast<uint32_t>(nRanks)) {
    return Status::error(Errc::InvalidUsage, strprintf("revoke from rank %u of %d", origin, nRanks));
  }
  // A notice names an error a rank ran into, never "success" in disguise or a state (InProgress).
  if (code != 0 && (code > static_cast<uint32_t>(Errc::Timeout) || code == static_cast<uint32_t>(Errc::InProgress))) {
    return Status::error(Errc::InvalidUsage, strprintf("revoke notice with unknown error code %u", code));
  }
  if (textLen > kMaxTextBytes || textLen != in.left()) {
    return Status::error(Errc::InvalidUsage, "revoke notice text length does not match the payload");
  }
  r.origin = static_cast<int>(origin);
  r.code = static_cast<Errc>(code);
  r.reason = in.text(textLen);
  return r;
}

std::vector<uint8_t> encodeFailure(const Failure& f) {
  const std::string host = clip(f.host, kMaxHostBytes);
  const std::string op = clip(f.op, kMaxOpBytes);
  const std::string text = clip(f.text, kMaxTextBytes);
  std::vector<uint8_t> v;
  v.reserve(kFailureFixedBytes + host.size() + op.size() + text.size());
  Out o(v);
  o.u32(static_cast<uint32_t>(f.rank));
  o.u32(static_cast<uint32_t>(f.reason));
  o.u32(static_cast<uint32_t>(f.detectedBy));
  o.u32(static_cast<uint32_t>(f.pid));
  o.u64(f.opSeq);
  o.u16(static_cast<uint16_t>(host.size()));
  o.u16(static_cast<uint16_t>(op.size()));
  o.u16(static_cast<uint16_t>(text.size()));
  o.u16(0);
  o.bytes(host);
  o.bytes(op);
  o.bytes(text);
  return v;
}

Result<Failure> decodeFailure(std::span<const uint8_t> payload, int nRanks) {
  In in(payload);
  Failure f;
  f.rank = static_cast<int>(in.u32());
  const uint32_t reason = in.u32();
  f.detectedBy = static_cast<int>(in.u32());
  f.pid = static_cast<int>(in.u32());
  f.opSeq = in.u64();
  const size_t hostLen = in.u16();
  const size_t opLen = in.u16();
  const size_t textLen = in.u16();
  const uint16_t reserved = in.u16();
  if (in.bad()) return Status::error(Errc::InvalidUsage, "failure notice shorter than its fixed part");
  // Version 1 senders write 0; a notice that sets it means something this monitor does not understand, and
  // forwarding it re-encoded would silently change it.
  if (reserved != 0) {
    return Status::error(Errc::InvalidUsage, strprintf("failure notice with 0x%04x in its reserved field", reserved));
  }
  if (f.rank < 0 || f.rank >= nRanks || f.detectedBy < 0 || f.detectedBy >= nRanks) {
    return Status::error(Errc::InvalidUsage, strprintf("failure notice names rank %d (detected by %d) outside [0, %d)",
                                                       f.rank, f.detectedBy, nRanks));
  }
  if (reason < static_cast<uint32_t>(FailureReason::Exited) || reason > static_cast<uint32_t>(FailureReason::Hung)) {
    return Status::error(Errc::InvalidUsage, strprintf("failure notice with unknown reason %u", reason));
  }
  if (hostLen > kMaxHostBytes || opLen > kMaxOpBytes || textLen > kMaxTextBytes ||
      hostLen + opLen + textLen != in.left()) {
    return Status::error(Errc::InvalidUsage, "failure notice text lengths do not match the payload");
  }
  f.reason = static_cast<FailureReason>(reason);
  f.host = in.text(hostLen);
  f.op = in.text(opLen);
  f.text = in.text(textLen);
  return f;
}

Result<std::vector<uint8_t>> seal(const Header& h, std::span<const uint8_t> payload, std::span<const uint8_t> secret) {
  CFX_TRY_ASSIGN(crypto::HmacKey key, crypto::HmacKey::make(secret));
  return seal(h, payload, key);
}

Result<std::vector<uint8_t>> seal(const Header& h, std::span<const uint8_t> payload, crypto::HmacKey& key) {
  std::vector<uint8_t> v;
  v.reserve(kHeaderBytes + payload.size() + kMacBytes);
  Out o(v);
  o.u32(kMagic);
  o.u16(kVersion);
  o.u16(h.kind);
  o.u64(h.commTag);
  o.u32(static_cast<uint32_t>(h.sender));
  o.u32(static_cast<uint32_t>(h.receiver));
  o.u32(static_cast<uint32_t>(h.nRanks));
  o.u64(h.counter);
  o.u32(h.known);
  o.u32(static_cast<uint32_t>(payload.size()));
  v.insert(v.end(), payload.begin(), payload.end());
  if (v.size() + kMacBytes > kMaxDatagramBytes) {
    return Status::error(Errc::InternalError, strprintf("health datagram of %zu bytes is too large", v.size()));
  }
  CFX_TRY_ASSIGN(const crypto::Digest mac, key.mac({crypto::bytesOf(kHealthLabel), v}));
  v.insert(v.end(), mac.begin(), mac.end());
  return v;
}

Result<Opened> open(std::span<const uint8_t> datagram, std::span<const uint8_t> secret, uint64_t commTag, int nRanks,
                    int receiver) {
  CFX_TRY_ASSIGN(crypto::HmacKey key, crypto::HmacKey::make(secret));
  return open(datagram, key, commTag, nRanks, receiver);
}

Result<Opened> open(std::span<const uint8_t> datagram, crypto::HmacKey& key, uint64_t commTag, int nRanks,
                    int receiver) {
  if (datagram.size() < kHeaderBytes + kMacBytes || datagram.size() > kMaxDatagramBytes) {
    return Status::error(Errc::InvalidUsage, strprintf("datagram of %zu bytes (expected %zu to %zu)", datagram.size(),
                                                       kHeaderBytes + kMacBytes, kMaxDatagramBytes));
  }
  In in(datagram);
  const uint32_t magic = in.u32();
  const uint16_t version = in.u16();
  Opened out;
  Header& h = out.header;
  h.kind = in.u16();
  h.commTag = in.u64();
  h.sender = static_cast<int>(in.u32());
  h.receiver = static_cast<int>(in.u32());
  h.nRanks = static_cast<int>(in.u32());
  h.counter = in.u64();
  h.known = in.u32();
  const uint32_t payloadBytes = in.u32();
  if (magic != kMagic) return Status::error(Errc::InvalidUsage, strprintf("bad magic 0x%08x", magic));
  if (version != kVersion)
    return Status::error(Errc::InvalidUsage, strprintf("protocol version %u, expected %u", version, kVersion));
  if (h.commTag != commTag) return Status::error(Errc::InvalidUsage, "datagram for another communicator");
  if (h.nRanks != nRanks || h.sender < 0 || h.sender >= nRanks) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("sender %d of %d ranks, this communicator has %d", h.sender, h.nRanks, nRanks));
  }
  if (h.receiver != receiver) {
    return Status::error(Errc::InvalidUsage, strprintf("datagram for rank %d, this is rank %d", h.receiver, receiver));
  }
  if (h.kind < Heartbeat || h.kind > Revoke)
    return Status::error(Errc::InvalidUsage, strprintf("unknown kind %u", h.kind));
  if (payloadBytes != datagram.size() - kHeaderBytes - kMacBytes) {
    return Status::error(Errc::InvalidUsage, strprintf("payload length %u does not match the datagram", payloadBytes));
  }
  const auto body = datagram.first(kHeaderBytes + payloadBytes);
  CFX_TRY_ASSIGN(const crypto::Digest mac, key.mac({crypto::bytesOf(kHealthLabel), body}));
  if (!crypto::constantTimeEqual(mac, datagram.last(kMacBytes))) {
    return Status::error(Errc::InvalidUsage, "failed authentication (wrong secret?)");
  }
  const auto payload = datagram.subspan(kHeaderBytes, payloadBytes);
  out.payload.assign(payload.begin(), payload.end());
  return out;
}

}  // namespace cfx::ft::wire
