// SPDX-License-Identifier: Apache-2.0
// The UCX transport's handshake checks (address record, hello): pure functions, no UCX worker.
#include "transport/ucx/ucx_hello.h"
#include "transport/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <vector>

namespace cfx::transport::ucx {
namespace {

const std::vector<uint8_t> kSecret(32, 0x5c);
const std::vector<uint8_t> kAddress = {0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70};
const FifoGeometry kGeometry{.slotBytes = 256 * 1024, .nSlots = 8};

TEST(UcxHello, TheHelloIsTheHmacOfBothRanksAndTheReceiversAddress) {
  // The layout ucx_hello.h documents, computed by hand: a peer built from that description must interoperate.
  const uint8_t ranks[8] = {3, 0, 0, 0, 1, 0, 0, 0};
  Result<crypto::Digest> byHand =
      crypto::hmacSha256(kSecret, {crypto::bytesOf("cfx-ucx-hello-v2"), std::span<const uint8_t>(ranks, 4),
                                   std::span<const uint8_t>(ranks + 4, 4), kAddress});
  Result<crypto::Digest> hello = helloDigest(kSecret, 3, 1, kAddress);
  ASSERT_TRUE(byHand.ok() && hello.ok());
  EXPECT_EQ(*hello, *byHand);
  EXPECT_TRUE(checkHello(*hello, kSecret, 3, 1, kAddress, "peer rank 3").ok());
}

TEST(UcxHello, AHelloProvesTheSecretForOneDirectionOfOnePairAndOneAddress) {
  Result<crypto::Digest> hello = helloDigest(kSecret, 3, 1, kAddress);
  ASSERT_TRUE(hello.ok());
  const auto expectRefused = [&](std::span<const uint8_t> received, std::span<const uint8_t> secret, int from, int to,
                                 std::span<const uint8_t> address, const char* what) {
    const Status st = checkHello(received, secret, from, to, address, "peer rank 3 (host-b pid 4242)");
    EXPECT_EQ(st.code(), Errc::RemoteError) << what;
    EXPECT_NE(st.message().find("peer rank 3 (host-b pid 4242) failed authentication"), std::string::npos)
        << what << ": " << st.message();
  };
  const std::vector<uint8_t> otherSecret(32, 0x5d);
  expectRefused(*hello, otherSecret, 3, 1, kAddress, "another job's secret");
  expectRefused(*hello, kSecret, 1, 3, kAddress, "the reverse direction");
  expectRefused(*hello, kSecret, 3, 2, kAddress, "another receiver");
  std::vector<uint8_t> otherAddress = kAddress;
  otherAddress.back() ^= 1;
  expectRefused(*hello, kSecret, 3, 1, otherAddress, "a hello recorded for another communicator's worker");
  for (size_t i = 0; i < hello->size(); ++i) {
    crypto::Digest flipped = *hello;
    flipped[i] ^= 0x80;
    expectRefused(flipped, kSecret, 3, 1, kAddress, "a flipped bit");
  }
  expectRefused(std::span<const uint8_t>(hello->data(), kHelloBytes - 1), kSecret, 3, 1, kAddress, "a short hello");
  std::vector<uint8_t> longer(hello->begin(), hello->end());
  longer.push_back(0);
  expectRefused(longer, kSecret, 3, 1, kAddress, "a long hello");
  expectRefused({}, kSecret, 3, 1, kAddress, "an empty hello");
}

TEST(UcxHello, APeerRecordMustShareTheSlotGeometryAndAnnounceAWorker) {
  const AddressRecord good{.slotBytes = kGeometry.slotBytes, .nSlots = 8, .addressBytes = 120};
  EXPECT_TRUE(checkPeerRecord(good, kGeometry, 0, 2, "peer rank 2 (host-c pid 7)").ok());

  AddressRecord r = good;
  r.nSlots = 16;
  Status st = checkPeerRecord(r, kGeometry, 0, 2, "peer rank 2 (host-c pid 7)");
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_NE(st.message().find("rank 2 uses 16 slots of 262144 B but rank 0 uses 8 x 262144 B"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("CFX_UCX_SLOTS and CFX_UCX_SLOT_BYTES"), std::string::npos) << st.message();
  r = good;
  r.slotBytes += 64;
  EXPECT_EQ(checkPeerRecord(r, kGeometry, 0, 2, "peer rank 2").code(), Errc::InvalidUsage);

  r = good;
  r.addressBytes = 0;
  st = checkPeerRecord(r, kGeometry, 0, 2, "peer rank 2 (host-c pid 7)");
  EXPECT_EQ(st.code(), Errc::InvalidUsage);
  EXPECT_NE(st.message().find("peer rank 2 (host-c pid 7) opened no UCX worker"), std::string::npos) << st.message();
}

TEST(UcxHello, AnAddressLargerThanTheExchangeCarriesIsRefusedFromAnyRank) {
  // The widest announced address sizes every rank's slice of the second allGather, connected or not.
  AddressRecord r{.slotBytes = kGeometry.slotBytes, .nSlots = 8, .addressBytes = kMaxAddressBytes};
  EXPECT_TRUE(checkAddressBytes(r, "peer rank 5 (host-f pid 9)").ok());
  r.addressBytes = 0;
  EXPECT_TRUE(checkAddressBytes(r, "peer rank 5 (host-f pid 9)").ok()) << "a rank without UCX peers announces 0";
  for (const uint32_t bytes : {kMaxAddressBytes + 1, UINT32_MAX}) {
    r.addressBytes = bytes;
    const Status st = checkAddressBytes(r, "peer rank 5 (host-f pid 9)");
    EXPECT_EQ(st.code(), Errc::InvalidUsage) << bytes;
    EXPECT_NE(st.message().find("peer rank 5 (host-f pid 9) announced a worker address of"), std::string::npos)
        << st.message();
  }
}

// CFX_UCX_EAGER (ucx_options.cc): eager slots by default only where rendezvous cannot be a zero-copy path and the
// user did not tune the threshold; 0 and 1 override either way.
TEST(UcxOptions, SlotsGoEagerlyByDefaultOnlyWithoutRdmaAndWithoutTheUsersThreshold) {
  EXPECT_TRUE(UcxOptions::eagerSlotsFor("auto", /*userSetRndvThresh=*/false, /*hostHasRdma=*/false));
  EXPECT_FALSE(UcxOptions::eagerSlotsFor("auto", true, false));
  EXPECT_FALSE(UcxOptions::eagerSlotsFor("auto", false, true));
  EXPECT_TRUE(UcxOptions::eagerSlotsFor("1", true, true));
  EXPECT_FALSE(UcxOptions::eagerSlotsFor("0", false, false));
}

}  // namespace
}  // namespace cfx::transport::ucx
