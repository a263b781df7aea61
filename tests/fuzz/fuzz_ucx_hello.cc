// SPDX-License-Identifier: Apache-2.0
// Fuzz target: what a UCX peer sends during setup (ucx_hello.h): its address record, which reaches every rank
// through the bootstrap's allGather as 16 raw bytes, and the hello, the first message on its endpoint. Byte 0's
// bit 0 picks the message.
//   even: a hello. Byte 1 the sender's rank, byte 2 the receiver's (both mod 16), the rest the hello, checked
//         against the fixed secret and worker address. Accepted only when it is exactly the HMAC for that sender,
//         receiver and address: never for the reverse direction, another receiver or another address.
//   odd:  an address record (the rest, zero-padded to 16 bytes) from rank 1, checked by rank 0 with 8 slots of
//         256 KiB as UcxTransport::create() does (the address size, then the rest). Accepted only with the same
//         geometry and an address of 1..kMaxAddressBytes; refused with InvalidUsage.
#include <algorithm>
#include <cstring>

#include "fuzz_common.h"
#include "transport/ucx/ucx_hello.h"

namespace ucx = cfx::transport::ucx;

namespace {

const std::string kPeer = "peer rank 1 (fuzzhost pid 77)";

void hello(std::span<const uint8_t> in) {
  if (in.size() < 2) return;
  const int from = in[0] % 16;
  const int to = in[1] % 16;
  const std::span<const uint8_t> received = in.subspan(2);
  const cfx::transport::Secret secret = cfx::fuzz::fixedSecret();
  const auto address = cfx::fuzz::fixedWorkerAddress();
  const cfx::Status st = ucx::checkHello(received, secret, from, to, address, kPeer);
  if (!st.ok()) {
    cfx::fuzz::check(st.code() == cfx::Errc::RemoteError && st.message().find(kPeer) != std::string::npos,
                     "a refused hello is a RemoteError naming the peer");
    return;
  }
  cfx::Result<cfx::crypto::Digest> expected = ucx::helloDigest(secret, from, to, address);
  cfx::fuzz::check(expected.ok() && received.size() == ucx::kHelloBytes &&
                       std::equal(received.begin(), received.end(), expected->begin()),
                   "only the exact HMAC is accepted");
  if (from != to) {
    cfx::fuzz::check(!ucx::checkHello(received, secret, to, from, address, kPeer).ok(),
                     "a hello proves one direction only");
  }
  cfx::fuzz::check(!ucx::checkHello(received, secret, from, (to + 1) % 16, address, kPeer).ok(),
                   "a hello proves one receiver only");
  auto other = address;
  other[0] ^= 1;
  cfx::fuzz::check(!ucx::checkHello(received, secret, from, to, other, kPeer).ok(),
                   "a hello proves one worker address only");
}

void record(std::span<const uint8_t> in) {
  uint8_t raw[ucx::kAddressRecordBytes] = {};
  std::memcpy(raw, in.data(), std::min(in.size(), sizeof(raw)));
  const ucx::AddressRecord r = ucx::decodeRecord(raw);
  uint8_t again[ucx::kAddressRecordBytes];
  ucx::encodeRecord(r, again);
  cfx::fuzz::check(std::memcmp(again, raw, sizeof(raw)) == 0, "a record re-encodes identically");
  const cfx::transport::FifoGeometry mine{.slotBytes = 256 * 1024, .nSlots = 8};
  cfx::Status st = ucx::checkAddressBytes(r, kPeer);
  if (st.ok()) {
    cfx::fuzz::check(r.addressBytes <= ucx::kMaxAddressBytes, "an address size that sizes the exchange is bounded");
    st = ucx::checkPeerRecord(r, mine, 0, 1, kPeer);
  }
  if (!st.ok()) {
    cfx::fuzz::check(st.code() == cfx::Errc::InvalidUsage, "a refused record is InvalidUsage");
    return;
  }
  cfx::fuzz::check(r.slotBytes == mine.slotBytes && r.nSlots == static_cast<uint32_t>(mine.nSlots),
                   "an accepted record has this rank's slot geometry");
  cfx::fuzz::check(r.addressBytes > 0 && r.addressBytes <= ucx::kMaxAddressBytes,
                   "an accepted record announces a worker address of a size the exchange carries");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    hello(in);
  } else {
    record(in);
  }
  return 0;
}
