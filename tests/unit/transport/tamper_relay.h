// SPDX-License-Identifier: Apache-2.0
// An on-path attacker for the transport tests: a TCP relay that a connection is steered through (a rewritten
// address, as an attacker who controls a router or the bootstrap's table would arrange) and that edits the bytes
// it forwards. Loopback only; one thread; every wait bounded, so a test can never hang on it.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/socket.h"

namespace cfx::transport::testing {

class TamperRelay {
 public:
  enum Direction { ToServer = 0, ToClient = 1 };
  // Called for every chunk forwarded: `offset` is where the chunk starts in that direction's byte stream of its
  // connection (connections are numbered in accept order); the edit may change, drop or add bytes.
  using Edit = std::function<void(int connection, Direction dir, uint64_t offset, std::vector<uint8_t>& chunk)>;

  TamperRelay(const sockaddr_storage& target, Edit edit) : target_(target), edit_(std::move(edit)) {
    sockaddr_storage any = target;
    net::setAddressPort(any, 0);
    listener_ = net::Listener::listen(any).value();
    thread_ = std::thread([this] { run(); });
  }
  ~TamperRelay() {
    stop_.store(true);
    thread_.join();
  }
  const sockaddr_storage& address() const { return listener_.address(); }
  int connections() const { return accepted_.load(); }

 private:
  struct Pipe {
    net::Socket client;
    net::Socket server;
    uint64_t offset[2] = {0, 0};
    bool open = true;
  };

  void run() {
    std::vector<std::unique_ptr<Pipe>> pipes;
    while (!stop_.load()) {
      std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
      for (auto& p : pipes) {
        fds.push_back({p->open ? p->client.fd() : -1, POLLIN, 0});
        fds.push_back({p->open ? p->server.fd() : -1, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      const size_t polled = pipes.size();  // a connection accepted below has no entry in fds yet
      if (fds[0].revents != 0) {
        Result<std::optional<net::Socket>> in = listener_.tryAccept();
        if (in.ok() && *in) {
          Result<net::Socket> out =
              net::Socket::connect(target_, {}, Deadline(std::chrono::milliseconds(5000)), nullptr);
          if (out.ok()) {
            auto p = std::make_unique<Pipe>();
            p->client = std::move(**in);
            p->server = std::move(*out);
            pipes.push_back(std::move(p));
            accepted_.fetch_add(1);
          }
        }
      }
      for (size_t i = 0; i < polled; ++i) {
        Pipe& p = *pipes[i];
        if (!p.open) continue;
        if (fds[1 + 2 * i].revents != 0) forward(static_cast<int>(i), p, ToServer);
        if (p.open && fds[2 + 2 * i].revents != 0) forward(static_cast<int>(i), p, ToClient);
      }
    }
  }

  void forward(int connection, Pipe& p, Direction dir) {
    net::Socket& from = dir == ToServer ? p.client : p.server;
    net::Socket& to = dir == ToServer ? p.server : p.client;
    std::vector<uint8_t> chunk(64 * 1024);
    Result<size_t> n = from.recvSome(chunk.data(), chunk.size());
    if (!n.ok()) {
      p.open = false;
      p.client.close();
      p.server.close();
      return;
    }
    if (*n == 0) return;
    chunk.resize(*n);
    const uint64_t at = p.offset[dir];
    p.offset[dir] += *n;
    edit_(connection, dir, at, chunk);
    const Deadline deadline(std::chrono::milliseconds(5000));
    if (!chunk.empty() && !to.sendAll(chunk.data(), chunk.size(), deadline, nullptr).ok()) {
      p.open = false;
      p.client.close();
      p.server.close();
    }
  }

  sockaddr_storage target_;
  Edit edit_;
  net::Listener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// An edit that flips one bit at byte `at` of direction `dir`, on every connection that gets that far.
inline TamperRelay::Edit flipByteAt(TamperRelay::Direction dir, uint64_t at, uint8_t mask = 0x01) {
  return [=](int, TamperRelay::Direction d, uint64_t offset, std::vector<uint8_t>& chunk) {
    if (d == dir && at >= offset && at < offset + chunk.size()) chunk[at - offset] ^= mask;
  };
}

}  // namespace cfx::transport::testing
