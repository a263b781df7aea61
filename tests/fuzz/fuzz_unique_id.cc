// SPDX-License-Identifier: Apache-2.0
// Fuzz target: UniqueId::decode, the 128 bytes every rank is handed (ncclUniqueId, or NCCL_COMM_ID's peer).
// Any input is padded or cut to the 128-byte ABI size and decoded twice: as it is, and with its check word
// recomputed, so mutations reach the fields behind the check (a corrupted id is caught by the check, but a
// well-formed id from another library version is not). Properties: decode never crashes; whatever it accepts
// encodes back to an id that decodes to the same fields (so nothing it accepted is half-understood).
#include <cstring>

#include "common/crypto.h"
#include "fuzz_common.h"

using cfx::transport::UniqueId;

namespace {

// The id's layout (bootstrap.h): the check word is the first 8 bytes of SHA-256 over the 72 bytes before it.
constexpr size_t kCheckedBytes = 72;

void decodeOne(const uint8_t in[UniqueId::kBytes]) {
  cfx::Result<UniqueId> id = UniqueId::decode(in);
  if (!id.ok()) {
    cfx::fuzz::check(!id.status().message().empty(), "a rejection says why");
    return;
  }
  uint8_t again[UniqueId::kBytes];
  id->encode(again);
  cfx::Result<UniqueId> back = UniqueId::decode(again);
  cfx::fuzz::check(back.ok(), "an accepted id re-encodes to a valid id");
  cfx::fuzz::check(std::memcmp(&back->root, &id->root, sizeof(id->root)) == 0 && back->secret == id->secret &&
                       back->magic == id->magic && back->startRootInInit == id->startRootInInit,
                   "an accepted id round-trips");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t in[UniqueId::kBytes] = {};
  std::memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  decodeOne(in);
  cfx::Result<cfx::crypto::Digest> check = cfx::crypto::sha256(std::span<const uint8_t>(in, kCheckedBytes));
  cfx::fuzz::check(check.ok(), "SHA-256 computes");
  std::memcpy(in + kCheckedBytes, check->data(), 8);
  decodeOne(in);
  return 0;
}
