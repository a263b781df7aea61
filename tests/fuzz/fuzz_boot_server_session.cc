// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the root's and every rank's real ServerHandshake state machine, fed a stranger's bytes over a
// socketpair in fuzzer-chosen pieces (byte 0 seeds the piece sizes), then end of stream. This drives the
// incremental reads, the early garbage check and every stage transition with the production code.
// Properties: no crash; a stranger never completes the handshake (its HMAC cannot match the fresh nonce); once
// the stranger has closed, one more progress() ends the handshake (Failed), so nothing can hold a listener.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "common/socket.h"
#include "fuzz_common.h"

namespace boot = cfx::transport::boot;

namespace {

void drain(int fd) {
  uint8_t sink[256];
  while (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) cfx::fuzz::violated("socketpair");
  cfx::net::UniqueFd stranger(fds[1]);
  sockaddr_storage peer{};
  peer.ss_family = AF_UNIX;
  static const boot::Credentials cred = cfx::fuzz::fixedCredentials();
  boot::ServerHandshake hs(cfx::net::Socket(cfx::net::UniqueFd(fds[0]), peer), cred, std::chrono::hours(1));

  uint32_t rng = data[0] * 2654435761u + 1;
  size_t pos = 1;
  while (pos < size && hs.progress() == boot::ServerHandshake::State::Running) {
    rng = rng * 1103515245u + 12345u;
    const size_t piece = std::min<size_t>(size - pos, 1 + (rng >> 16) % 48);
    const ssize_t n = ::send(stranger.get(), data + pos, piece, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed its end: it refused us
    pos += static_cast<size_t>(n);
    drain(stranger.get());
  }
  (void)hs.progress();
  cfx::fuzz::check(hs.state() != boot::ServerHandshake::State::Done, "a stranger never completes the handshake");
  ::shutdown(stranger.get(), SHUT_WR);
  drain(stranger.get());
  const boot::ServerHandshake::State end = hs.progress();
  cfx::fuzz::check(end == boot::ServerHandshake::State::Failed, "a closed stranger ends the handshake at once");
  cfx::fuzz::check(!hs.failure().empty(), "a refusal says why");
  return 0;
}
