// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the bootstrap frame header (every frame between ranks and from the root) and the root's answer
// to a joining rank (Table, Error or Status frame; or a leader's Forward of a table to its root). Input: byte 0
// picks nRanks (1..256), bytes 1..24 are the header, the rest the payload. Properties: no crash; an accepted
// header respects the limit it was given; an accepted answer is a table of exactly nRanks addresses with ports, or
// printable text of bounded size with an error code a caller can act on (never Ok, never InProgress).
#include <algorithm>
#include <cstring>

#include "fuzz_common.h"

namespace boot = cfx::transport::boot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int nRanks = 1 + data[0];
  const std::span<const uint8_t> rest(data + 1, size - 1);
  const size_t limit = std::max(static_cast<size_t>(nRanks) * boot::kAddressBytes, boot::kMaxControlBytes);
  cfx::Result<boot::FrameHeader> h =
      boot::decodeFrameHeader(rest.first(std::min(rest.size(), boot::kFrameHeaderBytes)), limit);
  if (!h.ok()) return 0;
  cfx::fuzz::check(h->bytes <= limit, "an accepted header respects the size limit");
  uint8_t again[boot::kFrameHeaderBytes];
  boot::encodeFrameHeader(*h, again);
  cfx::fuzz::check(std::memcmp(again, rest.data(), sizeof(again)) == 0, "an accepted header re-encodes identically");

  const std::span<const uint8_t> payload = rest.subspan(boot::kFrameHeaderBytes);
  cfx::Result<boot::RootAnswer> answer = boot::decodeRootAnswer(*h, payload, nRanks);
  if (!answer.ok()) return 0;
  cfx::fuzz::check(payload.size() == h->bytes, "the payload is as long as the header says");
  if (answer->kind == boot::FrameKind::Table || answer->kind == boot::FrameKind::Forward) {  // Forward: a table
    cfx::fuzz::check(answer->table.size() == static_cast<size_t>(nRanks), "a table has one address per rank");
    for (const sockaddr_storage& a : answer->table) {
      cfx::fuzz::check(a.ss_family == AF_INET || a.ss_family == AF_INET6, "a table holds IP addresses");
    }
    return 0;
  }
  cfx::fuzz::check(answer->kind == boot::FrameKind::Error || answer->kind == boot::FrameKind::Status,
                   "only Table, Error and Status answer a join");
  cfx::fuzz::check(answer->text.size() <= boot::kMaxControlBytes, "the root's text is bounded");
  for (const char c : answer->text) cfx::fuzz::check(c >= 0x20 && c < 0x7f, "the root's text is printable");
  cfx::fuzz::check(answer->code != cfx::Errc::Ok && answer->code != cfx::Errc::InProgress,
                   "a root error is an error a caller will not wait on");
  return 0;
}
