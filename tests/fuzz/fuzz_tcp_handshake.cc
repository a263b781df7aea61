// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the TCP transport's handshake messages as a stranger at a data listener can send them. Byte 0
// picks the message:
//   0: a Hello (104 B) then the client's Proof (32 B), against the fixed server nonce and protection;
//   1: an Ack (16 B);
//   2: a server's Challenge (72 B), as a client reads it after its fixed Hello.
// Properties: no crash; an accepted Hello or Challenge re-encodes to the same bytes (every field is understood);
// a proof is accepted only under the fixed secret for that exact Hello, nonce and protection; an accepted Ack has a
// known code.
#include <cstring>

#include "fuzz_common.h"
#include "transport/tcp/tcp_handshake.h"

namespace tcp = cfx::transport::tcp;

namespace {

void hello(std::span<const uint8_t> in) {
  const std::span<const uint8_t> helloBytes = in.first(std::min(in.size(), tcp::kHelloBytes));
  cfx::Result<tcp::Hello> h = tcp::decodeHello(helloBytes);
  if (!h.ok()) return;
  cfx::fuzz::check(helloBytes.size() == tcp::kHelloBytes, "only a whole hello is accepted");
  const auto again = tcp::encodeHello(*h);
  cfx::fuzz::check(std::memcmp(again.data(), helloBytes.data(), tcp::kHelloBytes) == 0,
                   "an accepted hello re-encodes identically");
  const std::span<const uint8_t> proof = in.subspan(helloBytes.size());
  if (proof.size() != tcp::kProofBytes) return;
  const cfx::transport::Secret secret = cfx::fuzz::fixedSecret();
  const tcp::Nonce nonce = cfx::fuzz::fixedNonce(3);
  const auto protection = cfx::crypto::Protection::Integrity;
  cfx::Result<tcp::Mac> expected = tcp::clientMac(secret, helloBytes.data(), nonce, protection);
  cfx::fuzz::check(expected.ok(), "the HMAC computes");
  if (!tcp::macEquals(*expected, proof.data())) return;
  cfx::Result<tcp::Mac> server = tcp::serverMac(secret, helloBytes.data(), nonce, protection);
  cfx::fuzz::check(server.ok() && !tcp::macEquals(*server, proof.data()), "a client proof is no server proof");
  cfx::Result<tcp::Mac> lowered = tcp::clientMac(secret, helloBytes.data(), nonce, cfx::crypto::Protection::Off);
  cfx::fuzz::check(lowered.ok() && !tcp::macEquals(*lowered, proof.data()), "a proof binds the protection");
}
void challenge(std::span<const uint8_t> in) {
  cfx::Result<tcp::Challenge> c = tcp::decodeChallenge(in);
  if (!c.ok()) return;
  cfx::fuzz::check(in.size() == tcp::kChallengeBytes, "only a whole challenge is accepted");
  const auto again = tcp::encodeChallenge(*c);
  cfx::fuzz::check(std::memcmp(again.data(), in.data(), tcp::kChallengeBytes) == 0,
                   "an accepted challenge re-encodes identically");
}

void ack(std::span<const uint8_t> in) {
  cfx::Result<tcp::AckCode> code = tcp::decodeAck(in);
  if (!code.ok()) return;
  cfx::fuzz::check(in.size() == tcp::kAckBytes, "only a whole ack is accepted");
  cfx::fuzz::check(std::strcmp(tcp::ackCodeName(*code), "?") != 0, "an accepted ack code is known");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: hello(in); break;
    case 1: ack(in); break;
    default: challenge(in); break;
  }
  return 0;
}
