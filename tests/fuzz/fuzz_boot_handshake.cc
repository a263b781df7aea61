// SPDX-License-Identifier: Apache-2.0
// Fuzz target: both halves of the bootstrap handshake as a stranger can drive them. Byte 0 picks the side:
//   even: the server reads an Auth (84 B) and, for RootJoin, the sealed Hello frame (header, address, tag),
//         answering the fixed challenge nonce; checkAuthPrefix (the early reject on 6 bytes) must agree with
//         checkAuth.
//   odd:  the client reads a Challenge (40 B) and the server's Proof (32 B), having sent the fixed client nonce.
// Properties: no crash; an Auth is accepted only with the MAC of the fixed secret over the fixed challenge, and
// then carries a known kind and protection; a Hello frame opens only under the keys of that handshake; a proof is
// accepted only if it is the fixed secret's proof for the nonces and the protection in play.
#include <cstring>

#include <algorithm>
#include <vector>

#include "fuzz_common.h"

namespace boot = cfx::transport::boot;

namespace {

void server(std::span<const uint8_t> in) {
  const boot::Credentials cred = cfx::fuzz::fixedCredentials();
  const auto serverNonce = cfx::fuzz::fixedNonce(1);
  const std::span<const uint8_t> auth = in.first(std::min(in.size(), boot::kAuthBytes));
  const bool prefixOk = boot::checkAuthPrefix(auth.first(std::min(auth.size(), boot::kAuthPrefixBytes))).ok();
  cfx::Result<boot::Auth> a = boot::checkAuth(cred, serverNonce, auth);
  if (!a.ok()) return;
  cfx::fuzz::check(prefixOk, "an Auth the early check refused cannot be accepted");
  cfx::fuzz::check(a->kind == boot::ConnKind::RootJoin || a->kind == boot::ConnKind::Peer, "a known kind");
  // A valid Auth with a flipped nonce bit must fail: that is what makes a recorded handshake worthless.
  auto otherNonce = serverNonce;
  otherNonce[0] ^= 1;
  cfx::fuzz::check(!boot::checkAuth(cred, otherNonce, auth).ok(), "an Auth answers one challenge only");
  if (a->kind != boot::ConnKind::RootJoin) return;
  const auto protection = std::max(a->protection, cred.protection);
  cfx::Result<boot::FrameKeys> keys =
      boot::deriveFrameKeys(cred.secret, cred.commMagic, protection, a->clientNonce, serverNonce, false);
  cfx::fuzz::check(keys.ok(), "the keys derive");
  std::vector<uint8_t> hello(in.begin() + static_cast<std::ptrdiff_t>(auth.size()), in.end());
  if (hello.size() != boot::kFrameHeaderBytes + boot::kAddressBytes + keys->recv.tagBytes()) return;
  cfx::Result<boot::FrameHeader> h =
      boot::decodeFrameHeader(std::span<const uint8_t>(hello.data(), boot::kFrameHeaderBytes), boot::kAddressBytes);
  if (!h.ok()) return;
  uint8_t* payload = hello.data() + boot::kFrameHeaderBytes;
  if (!boot::openFrame(keys->recv, hello.data(), {payload, boot::kAddressBytes}, payload + boot::kAddressBytes).ok()) {
    return;
  }
  (void)boot::decodeAddress(std::span<const uint8_t>(payload, boot::kAddressBytes));
}

void client(std::span<const uint8_t> in) {
  const boot::Credentials cred = cfx::fuzz::fixedCredentials();
  const auto clientNonce = cfx::fuzz::fixedNonce(2);
  const std::span<const uint8_t> challenge = in.first(std::min(in.size(), boot::kChallengeBytes));
  cfx::Result<boot::Challenge> c = boot::decodeChallenge(challenge);
  if (!c.ok()) return;
  cfx::fuzz::check(challenge.size() == boot::kChallengeBytes, "only a whole challenge is accepted");
  cfx::fuzz::check(c->protection <= cfx::crypto::Protection::Encryption, "a known protection");
  const std::span<const uint8_t> proof = in.subspan(challenge.size());
  if (!boot::checkServerProof(cred, clientNonce, *c, proof).ok()) return;
  cfx::fuzz::check(proof.size() == boot::kProofBytes, "only a whole proof is accepted");
  boot::Credentials other = cred;
  other.commMagic ^= 1;
  cfx::fuzz::check(!boot::checkServerProof(other, clientNonce, *c, proof).ok(), "a proof binds the communicator");
  boot::Challenge lowered = *c;
  lowered.protection = c->protection == cfx::crypto::Protection::Off ? cfx::crypto::Protection::Integrity
                                                                      : cfx::crypto::Protection::Off;
  cfx::fuzz::check(!boot::checkServerProof(cred, clientNonce, lowered, proof).ok(),
                   "a proof binds the server's protection");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    server(in);
  } else {
    client(in);
  }
  return 0;
}
