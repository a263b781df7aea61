// SPDX-License-Identifier: Apache-2.0
// Stripe layout, stripe headers and the autotuning decision of the TCP transport (transport layer).
#include "transport/tcp/tcp_stripe.h"

#include <algorithm>
#include <cmath>

#include "common/wire.h"

namespace cfx::transport::tcp {

namespace {

// Changed with the tcp protocol version (tcp_handshake.cc), so a stream out of step is told apart from an old peer.
constexpr uint16_t kStripeMagic = 0xCF54;
// With no interface speed to go by, plan for a 10 Gbit/s path: over-estimating only adds streams where the
// round trip is long, which is where they are cheap compared with an idle pipe.
constexpr double kAssumedBytesPerSecond = 10e9 / 8;

}  // namespace

size_t StripeLayout::length(int stripe, size_t bytes) const {
  const size_t start = offset(stripe);
  if (stripe >= nStripes || start >= bytes) return stripe == 0 ? bytes : 0;
  return std::min(stripeBytes, bytes - start);
}

StripeLayout stripeLayout(size_t bytes, int nStreams, uint32_t minStripeBytes) {
  StripeLayout layout;
  const size_t wanted = (bytes + minStripeBytes - 1) / minStripeBytes;
  layout.nStripes = static_cast<int>(std::clamp<size_t>(wanted, 1, static_cast<size_t>(std::max(1, nStreams))));
  // Rounded to 64 so stripes start cache-line aligned. The last stripe is still non-empty: bytes exceeds
  // (k-1) x minStripeBytes, and with minStripeBytes >= 4096 and k <= 64 that is more than the (k-1) x 64 the
  // rounding can add.
  const size_t even = (bytes + static_cast<size_t>(layout.nStripes) - 1) / static_cast<size_t>(layout.nStripes);
  layout.stripeBytes = (even + 63) / 64 * 64;
  return layout;
}

void encodeStripeHeader(const StripeHeader& h, uint8_t* out) {
  wire::Writer w(out, kStripeHeaderBytes);
  w.u64(h.seq);
  w.u64(h.tag);
  w.u32(h.bytes);
  w.u32(h.offset);
  w.u32(h.length);
  w.u16(kStripeMagic);
  w.u16(h.stream);
}

Result<StripeHeader> decodeStripeHeader(std::span<const uint8_t> in, const StripeLimits& limits) {
  if (in.size() != kStripeHeaderBytes) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("sent a stripe header of %zu bytes, not %zu", in.size(), kStripeHeaderBytes));
  }
  wire::Reader r(in);
  StripeHeader h;
  h.seq = r.u64();
  h.tag = r.u64();
  h.bytes = r.u32();
  h.offset = r.u32();
  h.length = r.u32();
  const uint16_t magic = r.u16();
  h.stream = r.u16();
  if (magic != kStripeMagic) {
    return Status::error(Errc::InvalidUsage,
                         "sent a frame without the stripe magic: the byte stream is corrupt or the peer runs an "
                         "incompatible version");
  }
  if (h.stream != limits.stream) {
    return Status::error(Errc::InvalidUsage, strprintf("sent a malformed stripe: sent a stripe for stream %u on "
                                                       "stream %d",
                                                       h.stream, limits.stream));
  }
  if (h.bytes > limits.slotBytes) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("sent a malformed stripe: sent a slot of %u bytes, larger than the %zu-byte slot: "
                                   "the byte stream is corrupt or the peer runs an incompatible version",
                                   h.bytes, limits.slotBytes));
  }
  const StripeLayout layout = stripeLayout(h.bytes, limits.nStreams, limits.minStripeBytes);
  if (limits.stream >= layout.nStripes || h.offset != layout.offset(limits.stream) ||
      h.length != layout.length(limits.stream, h.bytes)) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("sent a malformed stripe: sent stripe [%u, +%u) of a %u-byte slot on stream %d, "
                                   "which the %d-stream layout does not have there",
                                   h.offset, h.length, h.bytes, limits.stream, limits.nStreams));
  }
  return h;
}

AutotuneDecision autotune(const AutotuneInputs& in) {
  AutotuneDecision d;
  const int maxStreams = std::clamp(in.maxStreams, 1, kMaxStreams);
  const int rails = std::clamp(in.rails, 1, maxStreams);
  d.assumedBytesPerSecond = (in.linkBytesPerSecond > 0 ? in.linkBytesPerSecond : kAssumedBytesPerSecond) * rails;
  d.bdpBytes = d.assumedBytesPerSecond * std::max(0.0, in.rttSeconds);
  // The window one stream can open: half its receive buffer (tcp_adv_win_scale's default share for data).
  const double buffer = static_cast<double>(std::max(in.autotuneCapBytes, in.fixedBufferCapBytes));
  const double window = std::max<double>(64 * 1024, buffer / 2);
  const double needed = std::ceil(d.bdpBytes / window);
  d.nStreams = static_cast<int>(std::clamp(needed, 1.0, static_cast<double>(maxStreams)));
  d.nStreams = std::min((d.nStreams + rails - 1) / rails * rails, maxStreams / rails * rails);
  d.rails = rails;
  // Per stream, a window's share of the BDP plus the same again for the kernel's overhead. Kernel autotuning
  // grows to autotuneCap on its own and spends memory only when the path needs it, so a fixed buffer is set only
  // when autotuning would stop short and the kernel would honour the request.
  const double perStream = 2 * d.bdpBytes / d.nStreams;
  if (perStream > static_cast<double>(in.autotuneCapBytes) &&
      perStream <= static_cast<double>(in.fixedBufferCapBytes)) {
    d.socketBufferBytes = (static_cast<int64_t>(perStream) + 65535) / 65536 * 65536;
  }
  return d;
}

std::string describe(const AutotuneDecision& d, double rttSeconds) {
  std::string buffers = d.socketBufferBytes > 0
                            ? strprintf("%lld-byte socket buffers", static_cast<long long>(d.socketBufferBytes))
                            : std::string("kernel-autotuned socket buffers");
  const std::string rails = d.rails > 1 ? strprintf(" over %d rails", d.rails) : std::string();
  return strprintf("%d stream%s%s (BDP %.0f B at %.2f Gbit/s x %.3f ms), %s", d.nStreams, d.nStreams == 1 ? "" : "s",
                   rails.c_str(), d.bdpBytes, d.assumedBytesPerSecond * 8 / 1e9, rttSeconds * 1e3, buffers.c_str());
}

size_t pathSlotBytes(size_t baseSlotBytes, int nSlots, double bdpBytes, uint64_t fifoCapBytes) {
  constexpr size_t kMaxPathSlotBytes = size_t{1} << 30;
  const auto fifo = [&](size_t slot) { return static_cast<double>(slot) * std::max(1, nSlots); };
  size_t slot = baseSlotBytes;
  if (fifoCapBytes == 0 || fifo(slot) >= bdpBytes) return slot;
  while (static_cast<double>(slot) < bdpBytes && 2 * slot <= kMaxPathSlotBytes &&
         fifo(2 * slot) <= static_cast<double>(fifoCapBytes)) {
    slot *= 2;
  }
  return slot;
}

}  // namespace cfx::transport::tcp
