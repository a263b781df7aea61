// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the 24-byte encoded address (a rank's Hello to the root, every entry of the root's table, the
// unique id's root). Properties: no crash; an accepted address is IPv4 or IPv6 with a port, and encodes back
// to bytes that decode to the same address.
#include <cstring>

#include "fuzz_common.h"

namespace boot = cfx::transport::boot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cfx::Result<sockaddr_storage> a = boot::decodeAddress(std::span<const uint8_t>(data, size));
  if (!a.ok()) return 0;
  cfx::fuzz::check(size == boot::kAddressBytes, "only a 24-byte address is accepted");
  cfx::fuzz::check(a->ss_family == AF_INET || a->ss_family == AF_INET6, "an address is IPv4 or IPv6");
  uint8_t again[boot::kAddressBytes];
  boot::encodeAddress(*a, again);
  cfx::Result<sockaddr_storage> back = boot::decodeAddress(std::span<const uint8_t>(again, sizeof(again)));
  cfx::fuzz::check(back.ok() && std::memcmp(&*back, &*a, sizeof(sockaddr_storage)) == 0,
                   "an accepted address round-trips");
  return 0;
}
