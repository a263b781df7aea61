// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the membership frames (faulttol/member_wire.h) a master or a member reads from its TCP stream,
// as anyone who can reach the master's port can send them. Byte 0 picks the mode:
//   bit 0 = 0: the rest is a byte stream as received, cut into frames and opened with the fixed key, each frame
//              numbered as the next expected one (and a Hello also through its session key);
//   bit 0 = 1: the rest is a header and payload that the target signs itself (appending the right MAC), so the
//              fuzzer reaches every check behind the MAC, which it could never forge.
// Properties: no crash or hang; the reader never holds more than what was fed; an accepted frame re-seals to exactly
// its own bytes; accepted fields are in range (ranks within sizes, epochs non-zero where required).
#include <algorithm>
#include <vector>

#include "common/crypto.h"
#include "faulttol/member_wire.h"
#include "fuzz_common.h"

namespace member = cfx::ft::member;

namespace {

constexpr std::string_view kLabel = "cfx-member-v3";  // the MAC's label, part of the documented format

void checkAccepted(const member::Frame& f, const member::Message& m, std::span<const uint8_t> key, uint64_t counter) {
  switch (m.kind) {
    case member::Kind::Hello:
      cfx::fuzz::check(m.hello.epoch == 0 ? m.hello.rank == -1 && m.hello.nRanks == 0
                                          : m.hello.rank >= 0 && m.hello.rank < m.hello.nRanks,
                       "an accepted Hello names a rank within its size");
      break;
    case member::Kind::Epoch:
      cfx::fuzz::check(m.note.epoch > 0 && m.note.rank >= 0 && m.note.rank < m.note.nRanks &&
                           m.note.nRanks <= member::kMaxRanks,
                       "an accepted Epoch names a rank within its size");
      break;
    case member::Kind::Id: cfx::fuzz::check(m.epoch > 0, "an accepted Id is for a real epoch"); break;
    default: break;
  }
  cfx::Result<std::vector<uint8_t>> again = member::seal(m, counter, key);
  std::vector<uint8_t> original = f.signedBytes;
  original.insert(original.end(), f.mac.begin(), f.mac.end());
  cfx::fuzz::check(again.ok() && *again == original, "an accepted frame re-seals identically");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool sign = (data[0] & 1) != 0;
  const cfx::transport::Secret key = cfx::fuzz::fixedSecret();
  std::vector<uint8_t> stream(data + 1, data + size);
  if (sign) {
    cfx::Result<cfx::crypto::Digest> mac = cfx::crypto::hmacSha256(key, {cfx::crypto::bytesOf(kLabel), stream});
    cfx::fuzz::check(mac.ok(), "the HMAC computes");
    stream.insert(stream.end(), mac->begin(), mac->end());
  }
  member::FrameReader reader;
  // Fed in two uneven parts: frames may straddle reads.
  const size_t cut = stream.size() / 3;
  reader.feed(std::span<const uint8_t>(stream.data(), cut));
  uint64_t counter = 0;
  bool secondFed = false;
  for (int frames = 0; frames < 64; ++frames) {
    cfx::Result<std::optional<member::Frame>> f = reader.next();
    if (!f.ok()) return 0;
    if (!f->has_value()) {
      if (secondFed) break;
      reader.feed(std::span<const uint8_t>(stream.data() + cut, stream.size() - cut));
      secondFed = true;
      continue;
    }
    cfx::fuzz::check(reader.buffered() <= stream.size(), "the reader holds no more than it was fed");
    const member::Frame& frame = **f;
    // The frame's own number, so the fuzzer reaches the payload checks; the real ends demand 0, 1, 2, ...
    counter = frame.counter;
    cfx::Result<member::Message> m = member::open(frame, key, counter);
    if (m.ok()) checkAccepted(frame, *m, key, counter);
    if (frame.kind == member::Kind::Hello) {
      cfx::Result<member::Nonce> nonce = member::helloNonce(frame);
      if (nonce.ok()) {
        const cfx::crypto::Digest session = member::sessionKey(key, member::Nonce{}, *nonce);
        cfx::Result<member::Message> h = member::open(frame, session, counter);
        if (h.ok()) checkAccepted(frame, *h, session, counter);
      }
    }
  }
  return 0;
}
