// SPDX-License-Identifier: Apache-2.0
// A loopback TCP port that a test hands to code which binds it later: NCCL_COMM_ID, MASTER_PORT, a root that
// appears while clients retry.
//
// Why not bind port 0, read it and close: the kernel gives that same port to the next bind(0) or connect() anywhere
// on the machine. Under make test's parallel suites, one run in a few hundred of a test doing so lost its port
// before the rank bound it ("Address already in use"; CI failed on BootstrapRootsTest that way). A port outside
// the kernel's ephemeral range (net.ipv4.ip_local_port_range) is only ever taken by an explicit bind, so a random
// one that binds now stays free unless another test draws the same number.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>

namespace cfx::testports {

// The ports to draw from: below the ephemeral range where it leaves room, else above it.
inline std::pair<int, int> portsOutsideEphemeralRange() {
  int low = 32768;
  int high = 60999;  // the kernel's default, where /proc cannot be read
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  if (low - 1 >= 11000) return {std::max(10000, low - 20000), low - 1};
  if (65535 - high >= 1000) return {high + 1, 65535};
  return {0, 0};  // the range covers nearly everything: fall back to whatever bind(0) gives
}

// Binds family's loopback address at port (0: any) without SO_REUSEADDR, so a port with a listener, a connection
// or a TIME_WAIT on it is refused. Returns the port bound, or 0.
inline uint16_t bindLoopback(int family, uint16_t port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(ss);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    a.sin6_port = htons(port);
    len = sizeof(a);
  } else {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    len = sizeof(a);
  }
  uint16_t bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    bound = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                     : reinterpret_cast<sockaddr_in&>(ss).sin_port);
  }
  ::close(fd);
  return bound;
}

// A port free on family's loopback now (AF_INET or AF_INET6); a test failure and 0 when there is none.
inline uint16_t freeLoopbackPort(int family = AF_INET) {
  const auto [first, last] = portsOutsideEphemeralRange();
  if (first > 0) {
    std::mt19937 draw(std::random_device{}());
    std::uniform_int_distribution<int> pick(first, last);
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (const uint16_t port = bindLoopback(family, static_cast<uint16_t>(pick(draw)))) return port;
    }
  }
  const uint16_t any = bindLoopback(family, 0);
  if (any == 0) ADD_FAILURE() << "no free loopback port for family " << family;
  return any;
}

}  // namespace cfx::testports
