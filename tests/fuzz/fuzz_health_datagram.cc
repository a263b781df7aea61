// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the health monitor's UDP datagrams (heartbeat, failure notice, leaving, revoke), as anyone who can
// reach a monitor's port can send them, through ft::wire::open() and then the payload decoder the monitor applies
// to that kind. Byte 0: bit 0 picks the mode, the rest nRanks (1..128).
//   mode 0: the rest is a datagram as received, checked against the fixed secret and communicator tag;
//   mode 1: the rest is a header and payload that the target signs itself (appending the right MAC), so the
//           fuzzer also reaches every check behind the MAC, which it could never forge.
// Properties: no crash; an accepted datagram re-seals to exactly its own bytes (so it carried the right MAC and
// every field is understood); in mode 1 open() accepts exactly the headers an independent reading of the bytes
// says are valid; an accepted revoke or failure notice names ranks in range and re-encodes to its payload.
#include <algorithm>
#include <vector>

#include "common/crypto.h"
#include "faulttol/health_wire.h"
#include "fuzz_common.h"

namespace wire = cfx::ft::wire;

namespace {

// The MAC's label (health_wire.h documents it as part of the format).
constexpr std::string_view kLabel = "cfx-health-v3";
// The rank the fuzzed monitor is: every datagram names its receiver.
constexpr int kReceiver = 0;

// Read by hand, not with the library's decoder: the format as health_wire.h documents it (little-endian).
uint64_t field(std::span<const uint8_t> in, size_t at, size_t n) {
  uint64_t x = 0;
  for (size_t i = n; i-- > 0;) x = (x << 8) | in[at + i];
  return x;
}

// What open() must decide for a datagram whose MAC is right, read straight off the layout in health_wire.h.
bool validHeader(std::span<const uint8_t> d, int nRanks) {
  if (d.size() < wire::kHeaderBytes + wire::kMacBytes || d.size() > wire::kMaxDatagramBytes) return false;
  const uint64_t kind = field(d, 6, 2);
  const uint64_t sender = field(d, 16, 4);
  return field(d, 0, 4) == wire::kMagic && field(d, 4, 2) == wire::kVersion &&
         field(d, 8, 8) == cfx::fuzz::kHealthCommTag && field(d, 20, 4) == kReceiver &&
         field(d, 24, 4) == static_cast<uint64_t>(nRanks) && sender < static_cast<uint64_t>(nRanks) &&
         kind >= wire::Heartbeat && kind <= wire::Revoke &&
         field(d, 40, 4) == d.size() - wire::kHeaderBytes - wire::kMacBytes;
}

void payload(const wire::Opened& opened, int nRanks) {
  const std::vector<uint8_t>& p = opened.payload;
  if (opened.header.kind == wire::Revoke) {
    cfx::Result<cfx::ft::RevokeNotice> notice = wire::decodeRevoke(p, nRanks);
    if (!notice.ok()) return;
    cfx::fuzz::check(notice->origin >= 0 && notice->origin < nRanks, "a revoke's origin is a rank of the communicator");
    cfx::fuzz::check(notice->code != cfx::Errc::InProgress, "a revoke's code is an error or none");
    cfx::fuzz::check(wire::encodeRevoke(*notice) == p, "an accepted revoke re-encodes identically");
    return;
  }
  if (opened.header.kind != wire::FailureNotice) return;
  cfx::Result<cfx::ft::Failure> f = wire::decodeFailure(p, nRanks);
  if (!f.ok()) return;
  cfx::fuzz::check(f->rank >= 0 && f->rank < nRanks && f->detectedBy >= 0 && f->detectedBy < nRanks,
                   "a failure notice names ranks of the communicator");
  cfx::fuzz::check(f->reason >= cfx::ft::FailureReason::Exited && f->reason <= cfx::ft::FailureReason::Hung,
                   "a failure notice has a known reason");
  cfx::fuzz::check(f->host.size() <= wire::kMaxHostBytes && f->op.size() <= wire::kMaxOpBytes &&
                       f->text.size() <= wire::kMaxTextBytes,
                   "a failure notice's texts are within their limits");
  cfx::fuzz::check(wire::encodeFailure(*f) == p, "an accepted failure notice re-encodes identically");
  // Every survivor logs the notice through describe(): it must cope with any bytes in the texts.
  (void)f->describe();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool sign = (data[0] & 1) != 0;
  const int nRanks = 1 + (data[0] >> 1);
  const cfx::transport::Secret secret = cfx::fuzz::fixedSecret();
  std::vector<uint8_t> datagram(data + 1, data + size);
  if (sign) {
    cfx::Result<cfx::crypto::Digest> mac = cfx::crypto::hmacSha256(secret, {cfx::crypto::bytesOf(kLabel), datagram});
    cfx::fuzz::check(mac.ok(), "the HMAC computes");
    datagram.insert(datagram.end(), mac->begin(), mac->end());
  }
  cfx::Result<wire::Opened> opened = wire::open(datagram, secret, cfx::fuzz::kHealthCommTag, nRanks, kReceiver);
  if (sign) cfx::fuzz::check(opened.ok() == validHeader(datagram, nRanks), "open() accepts exactly the valid headers");
  if (!opened.ok()) return 0;
  const wire::Header& h = opened->header;
  cfx::fuzz::check(h.nRanks == nRanks && h.sender >= 0 && h.sender < nRanks,
                   "the sender is a rank of the communicator");
  cfx::fuzz::check(h.commTag == cfx::fuzz::kHealthCommTag, "the datagram is for this communicator");
  cfx::fuzz::check(h.receiver == kReceiver, "the datagram is for this rank");
  cfx::Result<std::vector<uint8_t>> again = wire::seal(h, opened->payload, secret);
  cfx::fuzz::check(again.ok() && *again == datagram, "an accepted datagram re-seals identically");
  payload(*opened, nRanks);
  return 0;
}
