// SPDX-License-Identifier: Apache-2.0
// Fuzz target: what the roots of an init through several ids parse (protocol 3): a joining rank's Hello payload
// and a Group frame (root k -> its group's leader, leader -> root 0). Input: byte 0 picks nRanks (1..256), byte 1
// the groups the receiver expects (0: any, as root 0 before it knows), the next 32 bytes are tried as a Hello, and
// from byte 2 on the rest is a frame header and its payload.
// Properties: no crash; an accepted Hello names a group below its group count and an IP address with a port, and
// round-trips; an accepted Group frame names a group that fits nRanks (and the expected groups) and
// holds exactly that group's addresses.
#include <algorithm>
#include <cstring>

#include "fuzz_common.h"

namespace boot = cfx::transport::boot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int nRanks = 1 + data[0];
  const int groups = data[1];
  const std::span<const uint8_t> rest(data + 2, size - 2);

  cfx::Result<boot::JoinHello> hello = boot::decodeHello(rest.first(std::min(rest.size(), boot::kHelloBytes)));
  if (hello.ok()) {
    cfx::fuzz::check(hello->group >= 0 && hello->group < hello->groups, "a Hello's group is below its group count");
    cfx::fuzz::check(hello->listen.ss_family == AF_INET || hello->listen.ss_family == AF_INET6,
                     "a Hello holds an IP address");
    const auto again = boot::encodeHello(*hello);
    cfx::Result<boot::JoinHello> back = boot::decodeHello(again);
    cfx::fuzz::check(back.ok() && back->group == hello->group && back->groups == hello->groups &&
                         std::memcmp(&back->listen, &hello->listen, sizeof(sockaddr_storage)) == 0,
                     "an accepted Hello round-trips");
  }

  const size_t limit = boot::tablePayloadBytes(nRanks);
  cfx::Result<boot::FrameHeader> h =
      boot::decodeFrameHeader(rest.first(std::min(rest.size(), boot::kFrameHeaderBytes)), limit);
  if (!h.ok()) return 0;
  const std::span<const uint8_t> payload = rest.subspan(boot::kFrameHeaderBytes);
  cfx::Result<boot::GroupBlock> block = boot::decodeGroup(*h, payload, nRanks, groups == 0 ? -1 : groups);
  if (!block.ok()) return 0;
  cfx::fuzz::check(block->groups >= 2 && block->groups <= nRanks, "a Group frame's group count fits the ranks");
  cfx::fuzz::check(groups == 0 || block->groups == groups, "a Group frame matches the groups expected");
  cfx::fuzz::check(block->group >= 0 && block->group < block->groups, "a Group frame's group is in range");
  const boot::GroupRange range = boot::groupRange(block->group, nRanks, block->groups);
  cfx::fuzz::check(block->addresses.size() == static_cast<size_t>(range.count), "a group block holds its group");
  cfx::fuzz::check(range.first + range.count <= nRanks, "a group lies within the ranks");
  return 0;
}
