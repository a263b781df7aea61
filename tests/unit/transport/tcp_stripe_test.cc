// SPDX-License-Identifier: Apache-2.0
// The TCP transport's stripe layout, stripe header and autotuning decision: pure functions, no sockets.
#include "transport/tcp/tcp_stripe.h"

#include <gtest/gtest.h>

namespace cfx::transport::tcp {
namespace {

// Every byte of the slot in exactly one stripe, stripes in order on streams 0..k-1, none empty unless the slot is.
void expectTiles(size_t bytes, int nStreams, uint32_t minStripe) {
  const StripeLayout layout = stripeLayout(bytes, nStreams, minStripe);
  ASSERT_GE(layout.nStripes, 1);
  ASSERT_LE(layout.nStripes, nStreams);
  EXPECT_EQ(layout.stripeBytes % 64, 0u);
  size_t covered = 0;
  for (int j = 0; j < layout.nStripes; ++j) {
    EXPECT_EQ(layout.offset(j), covered) << bytes << " B over " << nStreams << ", stripe " << j;
    const size_t length = layout.length(j, bytes);
    if (bytes > 0) {
      EXPECT_GT(length, 0u) << bytes << " B over " << nStreams << ", stripe " << j;
    }
    covered += length;
  }
  EXPECT_EQ(covered, bytes) << bytes << " B over " << nStreams;
  EXPECT_EQ(layout.length(layout.nStripes, bytes), 0u);
}

TEST(TcpStripe, LayoutTilesEverySlotSize) {
  for (int n : {1, 2, 3, 4, 7, 8, 16, 64}) {
    for (size_t bytes :
         {size_t{0}, size_t{1}, size_t{63}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{65535}, size_t{65536},
          size_t{65537}, size_t{131072}, size_t{200003}, size_t{262144}, size_t{1} << 20, (size_t{1} << 22) + 7}) {
      expectTiles(bytes, n, 4096);
      expectTiles(bytes, n, kDefaultMinStripeBytes);
    }
  }
  for (size_t bytes = 0; bytes < 300000; bytes += 977) expectTiles(bytes, 64, 4096);
}

TEST(TcpStripe, SmallSlotsStayOnStreamZeroAndFullSlotsUseEveryStream) {
  EXPECT_EQ(stripeLayout(0, 4, 65536).nStripes, 1);
  EXPECT_EQ(stripeLayout(1000, 4, 65536).nStripes, 1);
  EXPECT_EQ(stripeLayout(65536, 4, 65536).nStripes, 1);
  EXPECT_EQ(stripeLayout(65537, 4, 65536).nStripes, 2);
  const StripeLayout full = stripeLayout(262144, 4, 65536);
  EXPECT_EQ(full.nStripes, 4);
  EXPECT_EQ(full.stripeBytes, 65536u);
  EXPECT_EQ(stripeLayout(262144, 1, 65536).nStripes, 1);
  EXPECT_EQ(stripeLayout(size_t{1} << 20, 64, 4096).nStripes, 64);
  // The default: a 128 KiB slice fills four streams.
  EXPECT_EQ(stripeLayout(131072, 4, kDefaultMinStripeBytes).nStripes, 4);
  EXPECT_EQ(stripeLayout(131072, 8, kDefaultMinStripeBytes).nStripes, 4);
}

TEST(TcpStripe, HeaderRoundTripsLittleEndianAndRejectsAWrongMagic) {
  const StripeHeader in{.seq = 0x0102030405060708ull,
                        .tag = 0xfedcba9876543210ull,
                        .bytes = 262144,
                        .offset = 65536,
                        .length = 65536,
                        .stream = 1};
  const StripeLimits limits{.stream = 1, .nStreams = 4, .slotBytes = 262144, .minStripeBytes = 65536};
  uint8_t wire[kStripeHeaderBytes];
  encodeStripeHeader(in, wire);
  EXPECT_EQ(wire[0], 0x08);
  EXPECT_EQ(wire[7], 0x01);
  EXPECT_EQ(wire[8], 0x10);
  EXPECT_EQ(wire[30], 1);
  Result<StripeHeader> out = decodeStripeHeader(wire, limits);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->seq, in.seq);
  EXPECT_EQ(out->tag, in.tag);
  EXPECT_EQ(out->bytes, in.bytes);
  EXPECT_EQ(out->offset, in.offset);
  EXPECT_EQ(out->length, in.length);
  EXPECT_EQ(out->stream, in.stream);
  wire[28] ^= 0xff;
  Result<StripeHeader> bad = decodeStripeHeader(wire, limits);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("without the stripe magic"), std::string::npos) << bad.status().message();
}

// The rules that need no knowledge of earlier stripes, each broken once; `expected` is in the error's text.
void expectRejected(const StripeHeader& h, const StripeLimits& limits, const std::string& expected) {
  uint8_t wire[kStripeHeaderBytes];
  encodeStripeHeader(h, wire);
  Result<StripeHeader> out = decodeStripeHeader(wire, limits);
  ASSERT_FALSE(out.ok()) << "accepted stripe [" << h.offset << ", +" << h.length << ") of " << h.bytes
                         << " B on stream " << h.stream;
  EXPECT_EQ(out.status().code(), Errc::InvalidUsage);
  EXPECT_NE(out.status().message().find(expected), std::string::npos) << out.status().message();
}

TEST(TcpStripe, HeaderDecodeAcceptsOnlyTheStripeTheLayoutPutsOnThisStream) {
  const StripeLimits limits{.stream = 1, .nStreams = 4, .slotBytes = 262144, .minStripeBytes = 4096};
  const StripeLayout layout = stripeLayout(100000, 4, 4096);
  const StripeHeader good{.seq = 3,
                          .tag = 9,
                          .bytes = 100000,
                          .offset = static_cast<uint32_t>(layout.offset(1)),
                          .length = static_cast<uint32_t>(layout.length(1, 100000)),
                          .stream = 1};
  uint8_t wire[kStripeHeaderBytes];
  encodeStripeHeader(good, wire);
  ASSERT_TRUE(decodeStripeHeader(wire, limits).ok());

  StripeHeader h = good;
  h.stream = 2;
  expectRejected(h, limits, "for stream 2 on stream 1");
  h = good;
  h.bytes = 262144 + 64;
  expectRejected(h, limits, "larger than the 262144-byte slot");
  h = good;
  h.offset += 64;
  expectRejected(h, limits, "layout does not have there");
  h = good;
  h.length -= 1;
  expectRejected(h, limits, "layout does not have there");
  // A slot small enough to be one stripe has nothing on stream 1, not even an empty stripe.
  h = StripeHeader{.seq = 3, .tag = 9, .bytes = 100, .offset = 0, .length = 0, .stream = 1};
  expectRejected(h, limits, "layout does not have there");
  // The largest length a stripe can claim still has to be this stream's share of the slot.
  h = good;
  h.length = UINT32_MAX;
  expectRejected(h, limits, "layout does not have there");

  EXPECT_FALSE(decodeStripeHeader(std::span<const uint8_t>(wire, kStripeHeaderBytes - 1), limits).ok());
}

TEST(TcpStripe, AnEmptySlotIsOneEmptyStripeOnStreamZero) {
  const StripeLimits limits{.stream = 0, .nStreams = 8, .slotBytes = 4096, .minStripeBytes = 4096};
  uint8_t wire[kStripeHeaderBytes];
  encodeStripeHeader(StripeHeader{.seq = 0, .tag = 1, .bytes = 0, .offset = 0, .length = 0, .stream = 0}, wire);
  Result<StripeHeader> out = decodeStripeHeader(wire, limits);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->length, 0u);
}

// Debian's defaults: tcp_rmem[2] 6 MiB (tcp_wmem[2] 4 MiB), rmem_max/wmem_max 208 KiB.
AutotuneInputs debianDefaults(double rttSeconds, double bytesPerSecond) {
  return AutotuneInputs{.rttSeconds = rttSeconds,
                        .linkBytesPerSecond = bytesPerSecond,
                        .autotuneCapBytes = 4 << 20,
                        .fixedBufferCapBytes = 212992,
                        .maxStreams = 8};
}

TEST(TcpAutotune, LoopbackAndLanKeepOneStreamAndKernelBuffers) {
  const AutotuneDecision loopback = autotune(debianDefaults(30e-6, 0));
  EXPECT_EQ(loopback.nStreams, 1);
  EXPECT_EQ(loopback.socketBufferBytes, 0);
  const AutotuneDecision lan = autotune(debianDefaults(200e-6, 25e9 / 8));
  EXPECT_EQ(lan.nStreams, 1);
  EXPECT_EQ(lan.socketBufferBytes, 0);
}

TEST(TcpAutotune, LongFatPipesGetEnoughStreamsForTheirBandwidthDelayProduct) {
  // 1 Gbit/s x 50 ms = 6.25 MB; a stream opens about 2 MiB of window: 3 streams.
  const AutotuneDecision wan = autotune(debianDefaults(0.050, 1e9 / 8));
  EXPECT_NEAR(wan.bdpBytes, 6.25e6, 1e3);
  EXPECT_EQ(wan.nStreams, 3);
  EXPECT_EQ(wan.socketBufferBytes, 0) << "autotuning reaches the per-stream window";
  // 100 Mbit/s x 50 ms fits one stream.
  EXPECT_EQ(autotune(debianDefaults(0.050, 100e6 / 8)).nStreams, 1);
  // More round trip, more streams, up to the cap.
  EXPECT_EQ(autotune(debianDefaults(0.100, 1e9 / 8)).nStreams, 6);
  EXPECT_EQ(autotune(debianDefaults(0.200, 10e9 / 8)).nStreams, 8);
  AutotuneInputs capped = debianDefaults(0.200, 10e9 / 8);
  capped.maxStreams = 100;
  EXPECT_EQ(autotune(capped).nStreams, kMaxStreams);
}

TEST(TcpAutotune, FixedBuffersOnlyWhereAutotuningFallsShortAndTheKernelHonoursThem) {
  // 10 Gbit/s x 100 ms with 8 streams: 15.6 MB per stream, beyond autotuning's 4 MiB.
  AutotuneInputs big = debianDefaults(0.100, 10e9 / 8);
  EXPECT_EQ(autotune(big).socketBufferBytes, 0) << "rmem_max 208 KiB: the kernel would cap it, keep autotuning";
  big.fixedBufferCapBytes = int64_t{1} << 30;  // an administrator raised rmem_max/wmem_max
  const AutotuneDecision raised = autotune(big);
  EXPECT_LT(raised.nStreams, 8) << "bigger buffers need fewer streams";
  EXPECT_GT(raised.socketBufferBytes, int64_t{4} << 20);
  EXPECT_EQ(raised.socketBufferBytes % 65536, 0);
  EXPECT_GE(static_cast<double>(raised.socketBufferBytes) * raised.nStreams, raised.bdpBytes);
}

TEST(TcpAutotune, RailsGetAStreamEachAndAMultipleOfTheirCount) {
  // A short path needs one stream, but a peer on two NICs gets two, one per rail.
  AutotuneInputs lan = debianDefaults(200e-6, 10e9 / 8);
  lan.rails = 2;
  const AutotuneDecision two = autotune(lan);
  EXPECT_EQ(two.nStreams, 2);
  EXPECT_DOUBLE_EQ(two.assumedBytesPerSecond, 2 * 10e9 / 8) << "the path is two NICs wide";
  EXPECT_NE(describe(two, 200e-6).find("over 2 rails"), std::string::npos) << describe(two, 200e-6);
  // 1 Gbit/s x 50 ms per rail, 3 streams' worth for one rail: two rails need 4 streams' worth, rounded to 4.
  AutotuneInputs wan = debianDefaults(0.050, 1e9 / 8);
  wan.rails = 2;
  EXPECT_EQ(autotune(wan).nStreams, 6) << "12.5 MB over 2 MiB windows is 6 streams, already a multiple of 2";
  wan.rails = 4;
  EXPECT_EQ(autotune(wan).nStreams, 8) << "four rails: 25 MB wants 12 streams, cut to the cap of 8";
  // The cap keeps whole rounds of rails: 3 rails under a cap of 8 streams give 6, not 8 or 9.
  AutotuneInputs three = debianDefaults(0.100, 10e9 / 8);
  three.rails = 3;
  EXPECT_EQ(autotune(three).nStreams, 6);
  // More rails than the cap allows streams: one stream per rail up to the cap.
  AutotuneInputs many = debianDefaults(200e-6, 10e9 / 8);
  many.rails = 4;
  many.maxStreams = 2;
  EXPECT_EQ(autotune(many).nStreams, 2);
}

TEST(TcpAutotune, UnknownSpeedAssumesTenGigabitAndTheLogLineSaysSo) {
  const AutotuneDecision d = autotune(debianDefaults(0.010, 0));
  EXPECT_DOUBLE_EQ(d.assumedBytesPerSecond, 10e9 / 8);
  const std::string text = describe(d, 0.010);
  EXPECT_NE(text.find("10.00 Gbit/s"), std::string::npos) << text;
  EXPECT_NE(text.find("10.000 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("streams"), std::string::npos) << text;
}

TEST(TcpPathSlots, ShortPathsKeepTheirSlots) {
  constexpr size_t kBase = 256 * 1024;
  constexpr uint64_t kCap = uint64_t{64} << 20;
  EXPECT_EQ(pathSlotBytes(kBase, 8, 64e3, kCap), kBase);                // loopback: 51 us at 10 Gbit/s
  EXPECT_EQ(pathSlotBytes(kBase, 8, 8.0 * kBase, kCap), kBase);         // exactly one FIFO
  EXPECT_EQ(pathSlotBytes(kBase, 8, 6.25e6, 0), kBase);                 // cap 0: never grow
  EXPECT_EQ(pathSlotBytes(kBase, 8, 6.25e6, 8 * kBase), kBase);         // no room under the cap
}

TEST(TcpPathSlots, LongFatPathsGrowSlotsToTheBdpWithinTheCap) {
  constexpr size_t kBase = 256 * 1024;
  constexpr uint64_t kCap = uint64_t{64} << 20;
  // 1 Gbit/s x 50 ms: one slot of at least 6.25 MB.
  EXPECT_EQ(pathSlotBytes(kBase, 8, 6.25e6, kCap), size_t{8} << 20);
  // 10 Gbit/s x 2 ms = 2.5 MB: just over the 2 MiB FIFO.
  EXPECT_EQ(pathSlotBytes(kBase, 8, 2.5e6, kCap), size_t{4} << 20);
  // 10 Gbit/s x 50 ms wants 62.5 MB slots; 8 of them must stay within 64 MiB.
  EXPECT_EQ(pathSlotBytes(kBase, 8, 62.5e6, kCap), size_t{8} << 20);
  EXPECT_EQ(pathSlotBytes(kBase, 2, 62.5e6, kCap), size_t{32} << 20);
  // Never past 1 GiB a slot, whatever the cap.
  EXPECT_EQ(pathSlotBytes(kBase, 1, 1e12, uint64_t{1} << 40), size_t{1} << 30);
}

}  // namespace
}  // namespace cfx::transport::tcp
