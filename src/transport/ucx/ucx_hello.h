// SPDX-License-Identifier: Apache-2.0
// The UCX transport's connection handshake as bytes (transport layer): the record each rank announces before its
// worker address, and the hello each endpoint sends first (see ucx_transport.h for why the hello exists). Pure
// functions with no UCX call, built even without UCX, so they are unit-tested and fuzzed without a worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/crypto.h"
#include "common/status.h"
#include "transport/transport.h"

namespace cfx::transport::ucx {

// What every rank tells the others in the first allGather, before the addresses themselves (which vary in size).
// On the wire: slotBytes u64 | nSlots u32 | addressBytes u32 (little-endian, common/wire.h).
struct AddressRecord {
  uint64_t slotBytes = 0;
  uint32_t nSlots = 0;
  uint32_t addressBytes = 0;  // 0: this rank has no UCX peer and opened no worker
};
inline constexpr size_t kAddressRecordBytes = 16;
void encodeRecord(const AddressRecord& record, uint8_t out[kAddressRecordBytes]);
AddressRecord decodeRecord(const uint8_t in[kAddressRecordBytes]);
// The largest worker address the second allGather carries; UCX's are a few hundred bytes.
inline constexpr uint32_t kMaxAddressBytes = 64 * 1024;

// Whether rank `peer`'s announced address size is one the second allGather may be sized by (every rank's slice
// is the widest address announced). Every rank checks every record, connected or not: all see the same records,
// so all refuse together and none is left waiting in the second exchange. InvalidUsage beyond kMaxAddressBytes.
Status checkAddressBytes(const AddressRecord& record, const std::string& peerDescription);

// Whether this rank (`rank`, slot geometry `mine`) can connect to rank `peer` as its record describes it. Ok, or
// InvalidUsage naming both ranks and what to align: the slot geometries differ (the knobs to set alike), or the
// peer opened no worker (the ranks disagree on which peers UCX reaches).
Status checkPeerRecord(const AddressRecord& record, const FifoGeometry& mine, int rank, int peer,
                       const std::string& peerDescription);

// The hello rank `from` sends rank `to` as the first message on their endpoint:
//   HMAC-SHA256(secret, "cfx-ucx-hello-v2" || from u32 || to u32 || the receiver's worker address)   (little-endian)
// The receiver's address is fresh per communicator, so a recorded hello cannot be replayed into another one.
inline constexpr size_t kHelloBytes = crypto::kDigestBytes;
Result<crypto::Digest> helloDigest(std::span<const uint8_t> secret, int from, int to,
                                   std::span<const uint8_t> receiverAddress);

// Checks the hello that rank `to` (worker address receiverAddress) received from rank `from`. Ok only for exactly
// the kHelloBytes helloDigest() gives; otherwise RemoteError naming the peer (it belongs to another job, or the
// bootstrap was tampered with), or SystemError when the HMAC cannot be computed. Compares in constant time.
Status checkHello(std::span<const uint8_t> received, std::span<const uint8_t> secret, int from, int to,
                  std::span<const uint8_t> receiverAddress, const std::string& peerDescription);

}  // namespace cfx::transport::ucx
