// SPDX-License-Identifier: Apache-2.0
// Membership frames: encoding, cutting, authentication and decoding (faulttol layer).
#include "faulttol/member_wire.h"

#include <algorithm>

#include "common/wire.h"

namespace cfx::ft::member {

namespace {

constexpr std::string_view kMemberLabel = "cfx-member-v3";
constexpr std::string_view kSessionLabel = "cfx-member-session";

size_t payloadBytesOf(Kind k) {
  switch (k) {
    case Kind::Challenge: return kNonceBytes;
    case Kind::Hello: return 2 * kNonceBytes + 28;
    case Kind::Ready: return 12;
    case Kind::Epoch: return 28;
    case Kind::Id: return 8 + kIdBytes + crypto::kTagBytes;
    case Kind::Leave: return 0;
    case Kind::Kicked: return 4;
    case Kind::Outcome: return 24;
    case Kind::Verdict: return 24;
  }
  return SIZE_MAX;
}

bool knownKind(uint16_t k) { return k >= static_cast<uint16_t>(Kind::Challenge) && k <= static_cast<uint16_t>(Kind::Verdict); }

Status bad(const char* what) { return Status::error(Errc::InvalidUsage, strprintf("membership frame: %s", what)); }

bool validRank(int32_t rank, int32_t nRanks) { return nRanks >= 1 && nRanks <= kMaxRanks && rank >= 0 && rank < nRanks; }

// An Id frame carries a unique id, and so the secret of the next epoch's communicator: its id travels encrypted
// under a key of this session and frame, never in the clear (the frame's HMAC then covers the ciphertext).
Result<crypto::FrameCipher> idCipher(std::span<const uint8_t> key, uint64_t counter) {
  uint8_t number[8];
  ::cfx::wire::putU64(number, counter);
  CFX_TRY_ASSIGN(const crypto::Digest k, crypto::hmacSha256(key, {crypto::bytesOf("cfx-member-id"), {number, 8}}));
  return crypto::FrameCipher::create(crypto::Protection::Encryption, k);
}

}  // namespace

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Challenge: return "Challenge";
    case Kind::Hello: return "Hello";
    case Kind::Ready: return "Ready";
    case Kind::Epoch: return "Epoch";
    case Kind::Id: return "Id";
    case Kind::Leave: return "Leave";
    case Kind::Kicked: return "Kicked";
    case Kind::Outcome: return "Outcome";
    case Kind::Verdict: return "Verdict";
  }
  return "unknown";
}

crypto::Digest sessionKey(std::span<const uint8_t> secret, const Nonce& masterNonce, const Nonce& memberNonce) {
  Result<crypto::Digest> d = crypto::hmacSha256(secret, {crypto::bytesOf(kSessionLabel), masterNonce, memberNonce});
  // HMAC fails only when OpenSSL is broken; an all-zero key then makes every MAC check fail, never succeed.
  return d.ok() ? *d : crypto::Digest{};
}

Result<std::vector<uint8_t>> seal(const Message& m, uint64_t counter, std::span<const uint8_t> key) {
  std::vector<uint8_t> payload;
  ::cfx::wire::Out p(payload);
  switch (m.kind) {
    case Kind::Challenge: p.bytes(m.challenge); break;
    case Kind::Hello:
      p.bytes(m.hello.nonce);
      p.bytes(m.hello.uuid);
      p.u64(m.hello.epoch);
      p.u32(static_cast<uint32_t>(m.hello.rank));
      p.u32(static_cast<uint32_t>(m.hello.nRanks));
      p.u64(m.hello.verdictSeq);
      p.u8(m.hello.verdictOk ? 1 : 0);
      p.u8(0);
      p.u16(0);
      break;
    case Kind::Ready:
      p.u64(m.epoch);
      p.u8(m.rebuild ? 1 : 0);
      p.u8(0);
      p.u16(0);
      break;
    case Kind::Epoch:
      p.u64(m.note.epoch);
      p.u32(static_cast<uint32_t>(m.note.rank));
      p.u32(static_cast<uint32_t>(m.note.nRanks));
      p.u8(m.note.changed ? 1 : 0);
      p.u8(0);
      p.u16(0);
      p.u32(m.note.joined);
      p.u32(m.note.left);
      break;
    case Kind::Id: {
      p.u64(m.epoch);
      std::array<uint8_t, kIdBytes + crypto::kTagBytes> sealed{};
      CFX_TRY_ASSIGN(crypto::FrameCipher cipher, idCipher(key, counter));
      CFX_TRY(cipher.seal({}, m.id.data(), sealed.data(), kIdBytes, sealed.data() + kIdBytes));
      p.bytes(sealed);
      break;
    }
    case Kind::Leave: break;
    case Kind::Kicked: p.u32(m.reason); break;
    case Kind::Outcome:
    case Kind::Verdict:
      p.u64(m.vote.epoch);
      p.u64(m.vote.seq);
      p.u8(m.vote.ok ? 1 : 0);
      p.u8(0);
      p.u16(0);
      p.u32(m.kind == Kind::Verdict ? static_cast<uint32_t>(m.vote.failedRank) : 0);
      break;
  }
  std::vector<uint8_t> frame;
  ::cfx::wire::Out h(frame);
  h.u32(kMagic);
  h.u16(kVersion);
  h.u16(static_cast<uint16_t>(m.kind));
  h.u32(static_cast<uint32_t>(payload.size()));
  h.u64(counter);
  frame.insert(frame.end(), payload.begin(), payload.end());
  CFX_TRY_ASSIGN(crypto::Digest mac, crypto::hmacSha256(key, {crypto::bytesOf(kMemberLabel), frame}));
  frame.insert(frame.end(), mac.begin(), mac.end());
  return frame;
}

void FrameReader::feed(std::span<const uint8_t> bytes) { buf_.insert(buf_.end(), bytes.begin(), bytes.end()); }

Result<std::optional<Frame>> FrameReader::next() {
  if (buf_.size() < kHeaderBytes) return std::optional<Frame>();
  ::cfx::wire::Reader h(std::span<const uint8_t>(buf_.data(), kHeaderBytes));
  const uint32_t magic = h.u32();
  const uint16_t version = h.u16();
  const uint16_t kind = h.u16();
  const uint32_t payloadBytes = h.u32();
  const uint64_t counter = h.u64();
  if (magic != kMagic) return bad("bad magic (not a Conflux membership peer)");
  if (version != kVersion) return bad("unsupported version (a different Conflux release)");
  if (!knownKind(kind)) return bad("unknown kind");
  if (payloadBytes != payloadBytesOf(static_cast<Kind>(kind))) return bad("wrong payload length for its kind");
  const size_t total = kHeaderBytes + payloadBytes + kMacBytes;
  if (buf_.size() < total) return std::optional<Frame>();
  Frame f;
  f.kind = static_cast<Kind>(kind);
  f.counter = counter;
  f.signedBytes.assign(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + payloadBytes));
  f.payload.assign(buf_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes),
                   buf_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + payloadBytes));
  std::copy_n(buf_.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + payloadBytes), kMacBytes, f.mac.begin());
  buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(total));
  return std::optional<Frame>(std::move(f));
}

Result<Nonce> helloNonce(const Frame& f) {
  if (f.kind != Kind::Hello || f.payload.size() < kNonceBytes) return bad("expected a Hello");
  Nonce n{};
  std::copy_n(f.payload.begin(), kNonceBytes, n.begin());
  return n;
}

Result<Message> open(const Frame& f, std::span<const uint8_t> key, uint64_t expectCounter) {
  CFX_TRY_ASSIGN(crypto::Digest mac, crypto::hmacSha256(key, {crypto::bytesOf(kMemberLabel), f.signedBytes}));
  if (!crypto::constantTimeEqual(mac, f.mac)) return bad("MAC does not match (wrong secret, or another session)");
  if (f.counter != expectCounter) return bad("out-of-order or replayed frame");
  Message m;
  m.kind = f.kind;
  ::cfx::wire::Reader p(f.payload);
  switch (f.kind) {
    case Kind::Challenge: p.bytes(m.challenge.data(), kNonceBytes); break;
    case Kind::Hello:
      p.bytes(m.hello.nonce.data(), kNonceBytes);
      p.bytes(m.hello.uuid.data(), kNonceBytes);
      m.hello.epoch = p.u64();
      m.hello.rank = static_cast<int32_t>(p.u32());
      m.hello.nRanks = static_cast<int32_t>(p.u32());
      if (m.hello.epoch == 0 ? (m.hello.rank != -1 || m.hello.nRanks != 0) : !validRank(m.hello.rank, m.hello.nRanks)) {
        return bad("Hello with an impossible rank");
      }
      m.hello.verdictSeq = p.u64();
      {
        const uint8_t ok = p.u8();
        const uint8_t pad0 = p.u8();
        const uint16_t pad1 = p.u16();
        if (ok > 1 || pad0 != 0 || pad1 != 0 || (m.hello.epoch == 0 && (m.hello.verdictSeq != 0 || ok != 0))) {
          return bad("Hello with an impossible verdict");
        }
        m.hello.verdictOk = ok == 1;
      }
      break;
    case Kind::Ready: {
      m.epoch = p.u64();
      const uint8_t rebuild = p.u8();
      const uint8_t pad0 = p.u8();
      const uint16_t pad1 = p.u16();
      if (rebuild > 1 || pad0 != 0 || pad1 != 0 || (m.epoch == 0 && rebuild != 0)) return bad("Ready with impossible fields");
      m.rebuild = rebuild == 1;
      break;
    }
    case Kind::Epoch: {
      m.note.epoch = p.u64();
      m.note.rank = static_cast<int32_t>(p.u32());
      m.note.nRanks = static_cast<int32_t>(p.u32());
      const uint8_t changed = p.u8();
      const uint8_t pad0 = p.u8();
      const uint16_t pad1 = p.u16();
      m.note.joined = p.u32();
      m.note.left = p.u32();
      if (m.note.epoch == 0 || !validRank(m.note.rank, m.note.nRanks) || changed > 1 || pad0 != 0 || pad1 != 0 ||
          m.note.joined > static_cast<uint32_t>(m.note.nRanks)) {
        return bad("Epoch with impossible fields");
      }
      m.note.changed = changed == 1;
      break;
    }
    case Kind::Id: {
      m.epoch = p.u64();
      p.bytes(m.id.data(), kIdBytes);
      uint8_t tag[crypto::kTagBytes];
      p.bytes(tag, sizeof(tag));
      if (m.epoch == 0) return bad("Id for epoch 0");
      CFX_TRY_ASSIGN(crypto::FrameCipher cipher, idCipher(key, f.counter));
      CFX_TRY_ASSIGN(const bool authentic, cipher.open({}, m.id.data(), kIdBytes, tag));
      if (!authentic) return bad("Id that does not decrypt");
      break;
    }
    case Kind::Leave: break;
    case Kind::Kicked: m.reason = p.u32(); break;
    case Kind::Outcome:
    case Kind::Verdict: {
      m.vote.epoch = p.u64();
      m.vote.seq = p.u64();
      const uint8_t ok = p.u8();
      const uint8_t pad0 = p.u8();
      const uint16_t pad1 = p.u16();
      m.vote.failedRank = static_cast<int32_t>(p.u32());
      const bool rankOk = f.kind == Kind::Outcome ? m.vote.failedRank == 0
                                                  : m.vote.failedRank >= -1 && m.vote.failedRank < kMaxRanks;
      if (m.vote.epoch == 0 || m.vote.seq == 0 || ok > 1 || pad0 != 0 || pad1 != 0 || !rankOk ||
          (ok == 1 && f.kind == Kind::Verdict && m.vote.failedRank != -1)) {
        return bad("Outcome or Verdict with impossible fields");
      }
      m.vote.ok = ok == 1;
      if (f.kind == Kind::Outcome) m.vote.failedRank = -1;
      break;
    }
  }
  if (p.bad() || p.left() != 0) return bad("payload does not match its kind");
  return m;
}

}  // namespace cfx::ft::member
