// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the sealed frames every protected connection carries after its handshake (crypto::FrameCipher), in
// both frame formats: the bootstrap's (24-byte header, payload, tag) and the tcp transport's stripes (32-byte
// header, tag, payload). Byte 0: bit 0 picks the format, bit 1 the protection (integrity or encryption), bit 2 the
// mode:
//   received (0): the rest is the byte stream an attacker on the path delivers; it is cut into frames by their
//                 headers, checked as the library checks them (decodeFrameHeader, decodeStripeHeader) and opened
//                 in order with the fixed connection's receive key, as recvFrame, SocketBootstrap::readIncoming and
//                 TcpStream::progressRecv do.
//   tampered (1): byte 1 picks an edit (flip a bit, duplicate, drop or swap frames), bytes 2-3 where; the rest is
//                 frames in the clear that the target seals itself with the fixed sending key (so they are
//                 genuine, and the fuzzer works behind the tag), edits, and then receives as in mode 0.
// Properties: no crash; an opened frame is exactly what the sender sealed as that frame number (it re-seals to the
// same bytes); in mode 1, every frame before the edit opens with its payload intact and the first frame the edit
// touches does not open.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/crypto.h"
#include "common/wire.h"
#include "fuzz_common.h"
#include "transport/tcp/tcp_stripe.h"

namespace boot = cfx::transport::boot;
namespace tcp = cfx::transport::tcp;
namespace crypto = cfx::crypto;

namespace {

constexpr size_t kMaxPayload = 4096;  // keeps an input cheap; the parsers' limits are tested elsewhere
constexpr int kMaxFrames = 32;

struct Format {
  bool stripe = false;
  size_t headerBytes() const { return stripe ? tcp::kStripeHeaderBytes : boot::kFrameHeaderBytes; }
  // The frame's payload length from its header, or -1 where the library would refuse the header.
  long payloadBytes(std::span<const uint8_t> header) const {
    if (stripe) {
      const tcp::StripeLimits limits{.stream = 0, .nStreams = 1, .slotBytes = kMaxPayload, .minStripeBytes = 4096};
      cfx::Result<tcp::StripeHeader> h = tcp::decodeStripeHeader(header, limits);
      return h.ok() ? static_cast<long>(h->length) : -1;
    }
    cfx::Result<boot::FrameHeader> h = boot::decodeFrameHeader(header, kMaxPayload);
    return h.ok() ? static_cast<long>(h->bytes) : -1;
  }
};

struct Frame {
  std::vector<uint8_t> header;
  std::vector<uint8_t> payload;  // as sealed (encrypted with encryption)
  std::array<uint8_t, crypto::kTagBytes> tag{};
};

crypto::FrameCipher cipher(crypto::Protection p) {
  const cfx::transport::Secret key = cfx::fuzz::fixedSecret();
  return crypto::FrameCipher::create(p, key).value();
}

// The frames as they go on the wire.
std::vector<uint8_t> serialize(const Format& fmt, const std::vector<Frame>& frames) {
  std::vector<uint8_t> out;
  for (const Frame& f : frames) {
    out.insert(out.end(), f.header.begin(), f.header.end());
    if (fmt.stripe) out.insert(out.end(), f.tag.begin(), f.tag.end());
    out.insert(out.end(), f.payload.begin(), f.payload.end());
    if (!fmt.stripe) out.insert(out.end(), f.tag.begin(), f.tag.end());
  }
  return out;
}

// Receives `stream` as the library does; returns the payloads of the frames that opened, in order, stopping at the
// first that does not (the library then closes the connection).
std::vector<std::vector<uint8_t>> receive(const Format& fmt, crypto::Protection p, std::span<const uint8_t> stream) {
  crypto::FrameCipher recv = cipher(p);
  crypto::FrameCipher resealer = cipher(p);
  std::vector<std::vector<uint8_t>> opened;
  cfx::wire::Reader r(stream);
  while (r.left() >= fmt.headerBytes() && static_cast<int>(opened.size()) < kMaxFrames) {
    const std::span<const uint8_t> header = r.view(fmt.headerBytes());
    const long n = fmt.payloadBytes(header);
    if (n < 0) break;
    std::array<uint8_t, crypto::kTagBytes> tag{};
    if (fmt.stripe) r.bytes(tag.data(), tag.size());
    std::vector<uint8_t> payload(static_cast<size_t>(n));
    r.bytes(payload.data(), payload.size());
    if (!fmt.stripe) r.bytes(tag.data(), tag.size());
    if (r.bad()) break;
    const std::vector<uint8_t> received = payload;
    cfx::Result<bool> ok = recv.open(header, payload.data(), payload.size(), tag.data());
    cfx::fuzz::check(ok.ok(), "opening never fails inside OpenSSL");
    if (!*ok) break;
    std::vector<uint8_t> again(payload.size());
    std::array<uint8_t, crypto::kTagBytes> againTag{};
    cfx::fuzz::check(resealer.seal(header, payload.data(), again.data(), payload.size(), againTag.data()).ok(),
                     "sealing never fails inside OpenSSL");
    if (p == crypto::Protection::Integrity) again = payload;
    cfx::fuzz::check(again == received && againTag == tag, "an opened frame is exactly what its sender sealed");
    opened.push_back(std::move(payload));
  }
  return opened;
}

// Mode 1: frames in the clear (header, then the payload its header announces), sealed here.
std::vector<Frame> sealAll(const Format& fmt, crypto::Protection p, std::span<const uint8_t> in,
                           std::vector<std::vector<uint8_t>>* clear) {
  crypto::FrameCipher send = cipher(p);
  std::vector<Frame> frames;
  cfx::wire::Reader r(in);
  while (r.left() >= fmt.headerBytes() && static_cast<int>(frames.size()) < kMaxFrames) {
    Frame f;
    const std::span<const uint8_t> header = r.view(fmt.headerBytes());
    const long n = fmt.payloadBytes(header);
    if (n < 0 || static_cast<size_t>(n) > r.left()) break;
    f.header.assign(header.begin(), header.end());
    const std::span<const uint8_t> payload = r.view(static_cast<size_t>(n));
    f.payload.resize(payload.size());
    cfx::fuzz::check(send.seal(f.header, payload.data(), f.payload.data(), payload.size(), f.tag.data()).ok(),
                     "sealing never fails inside OpenSSL");
    if (p == crypto::Protection::Integrity) f.payload.assign(payload.begin(), payload.end());
    clear->emplace_back(payload.begin(), payload.end());
    frames.push_back(std::move(f));
  }
  return frames;
}

void tampered(const Format& fmt, crypto::Protection p, std::span<const uint8_t> in) {
  if (in.size() < 3) return;
  const uint8_t edit = in[0] % 4;
  const size_t where = cfx::wire::getU16(in.data() + 1);
  std::vector<std::vector<uint8_t>> clear;
  std::vector<Frame> frames = sealAll(fmt, p, in.subspan(3), &clear);
  if (frames.empty()) return;
  const size_t victim = where % frames.size();
  size_t firstTouched = victim;  // the first frame in wire order that is no longer what the sender sent there
  std::vector<uint8_t> wire;
  if (edit == 0) {
    wire = serialize(fmt, frames);
    const size_t bit = where * 7919 % (wire.size() * 8);
    wire[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    size_t end = 0;
    for (firstTouched = 0; firstTouched < frames.size(); ++firstTouched) {
      end += fmt.headerBytes() + frames[firstTouched].payload.size() + crypto::kTagBytes;
      if (bit / 8 < end) break;
    }
  } else if (edit == 1) {
    frames.insert(frames.begin() + static_cast<std::ptrdiff_t>(victim) + 1, frames[victim]);  // a replay
    firstTouched = victim + 1;
    wire = serialize(fmt, frames);
  } else if (edit == 2) {
    frames.erase(frames.begin() + static_cast<std::ptrdiff_t>(victim));  // a drop
    if (victim == frames.size()) return;                                 // the last one: nothing shows it
    wire = serialize(fmt, frames);
  } else {
    if (victim + 1 >= frames.size()) return;
    std::swap(frames[victim], frames[victim + 1]);  // a reordering
    wire = serialize(fmt, frames);
  }
  const std::vector<std::vector<uint8_t>> opened = receive(fmt, p, wire);
  cfx::fuzz::check(opened.size() <= firstTouched, "the first frame an edit touches does not open");
  cfx::fuzz::check(opened.size() == firstTouched, "every frame before the edit opens");
  for (size_t i = 0; i < opened.size(); ++i) {
    cfx::fuzz::check(opened[i] == clear[i], "a frame that opens has the payload its sender sealed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Format fmt{.stripe = (data[0] & 1) != 0};
  const crypto::Protection p = (data[0] & 2) != 0 ? crypto::Protection::Encryption : crypto::Protection::Integrity;
  const std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 4) == 0) {
    (void)receive(fmt, p, in);
  } else {
    tampered(fmt, p, in);
  }
  return 0;
}
