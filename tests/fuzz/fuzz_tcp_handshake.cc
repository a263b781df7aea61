// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the TCP transport's handshake messages as a stranger at a data listener can send them. Byte 0
// picks the message:
//   even: a Hello (80 B) then the client's Proof (32 B), against the fixed server nonce;
//   odd:  an Ack (16 B).
// Properties: no crash; an accepted Hello re-encodes to the same bytes (every field is understood); a proof is
// accepted only under the fixed secret for that exact Hello and nonce; an accepted Ack has a known code.
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
  cfx::Result<tcp::Mac> expected = tcp::clientMac(secret, helloBytes.data(), nonce);
  cfx::fuzz::check(expected.ok(), "the HMAC computes");
  if (!tcp::macEquals(*expected, proof.data())) return;
  cfx::Result<tcp::Mac> server = tcp::serverMac(secret, helloBytes.data(), nonce);
  cfx::fuzz::check(server.ok() && !tcp::macEquals(*server, proof.data()), "a client proof is no server proof");
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
  if ((data[0] & 1) == 0) {
    hello(in);
  } else {
    ack(in);
  }
  return 0;
}
