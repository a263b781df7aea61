// SPDX-License-Identifier: Apache-2.0
// The UCX transport's address record and hello checks (transport layer). See ucx_hello.h.
#include "transport/ucx/ucx_hello.h"

#include <string_view>

#include "common/wire.h"

namespace cfx::transport::ucx {

namespace {
constexpr std::string_view kHelloLabel = "cfx-ucx-hello-v2";
}  // namespace

void encodeRecord(const AddressRecord& record, uint8_t out[kAddressRecordBytes]) {
  wire::Writer w(out, kAddressRecordBytes);
  w.u64(record.slotBytes);
  w.u32(record.nSlots);
  w.u32(record.addressBytes);
}

AddressRecord decodeRecord(const uint8_t in[kAddressRecordBytes]) {
  wire::Reader r(in, kAddressRecordBytes);
  AddressRecord record;
  record.slotBytes = r.u64();
  record.nSlots = r.u32();
  record.addressBytes = r.u32();
  return record;
}

Status checkAddressBytes(const AddressRecord& record, const std::string& peerDescription) {
  if (record.addressBytes > kMaxAddressBytes) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("ucx: %s announced a worker address of %u bytes, more than the %u this transport "
                                   "exchanges: it runs an incompatible version, or its record is corrupt",
                                   peerDescription.c_str(), record.addressBytes, kMaxAddressBytes));
  }
  return Status();
}

Status checkPeerRecord(const AddressRecord& record, const FifoGeometry& mine, int rank, int peer,
                       const std::string& peerDescription) {
  if (record.slotBytes != mine.slotBytes || record.nSlots != static_cast<uint32_t>(mine.nSlots)) {
    return Status::error(Errc::InvalidUsage,
                         strprintf("ucx: rank %d uses %u slots of %llu B but rank %d uses %d x %zu B; set "
                                   "CFX_UCX_SLOTS and CFX_UCX_SLOT_BYTES alike on every rank",
                                   peer, record.nSlots, static_cast<unsigned long long>(record.slotBytes), rank,
                                   mine.nSlots, mine.slotBytes));
  }
  if (record.addressBytes == 0) {
    return Status::error(Errc::InvalidUsage, strprintf("ucx: %s opened no UCX worker although this rank expects "
                                                       "to reach it through UCX: ranks disagree on NCCL_NET/CFX_NET "
                                                       "or NCCL_SHM_DISABLE",
                                                       peerDescription.c_str()));
  }
  return Status();
}

Result<crypto::Digest> helloDigest(std::span<const uint8_t> secret, int from, int to,
                                   std::span<const uint8_t> receiverAddress) {
  uint8_t ranks[8];
  wire::putU32(ranks, static_cast<uint32_t>(from));
  wire::putU32(ranks + 4, static_cast<uint32_t>(to));
  return crypto::hmacSha256(secret, {crypto::bytesOf(kHelloLabel), {ranks, sizeof(ranks)}, receiverAddress});
}

Status checkHello(std::span<const uint8_t> received, std::span<const uint8_t> secret, int from, int to,
                  std::span<const uint8_t> receiverAddress, const std::string& peerDescription) {
  CFX_TRY_ASSIGN(const crypto::Digest expected, helloDigest(secret, from, to, receiverAddress));
  // constantTimeEqual also tells a hello of the wrong size apart, without reading past either.
  if (!crypto::constantTimeEqual(expected, received)) {
    return Status::error(Errc::RemoteError,
                         strprintf("ucx: %s failed authentication (its hello does not prove the session "
                                   "secret): it belongs to another job, or the bootstrap was tampered with",
                                   peerDescription.c_str()));
  }
  return Status();
}

}  // namespace cfx::transport::ucx
