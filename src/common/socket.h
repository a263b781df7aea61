// SPDX-License-Identifier: Apache-2.0
// TCP sockets for the bootstrap and the socket transport (common layer): RAII descriptors, address parsing and
// printing, NCCL_SOCKET_IFNAME-style interface selection, and bounded blocking I/O.
//
// Knobs are never read here: callers pass NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY and the retry settings in
// as plain values (InterfaceQuery, ConnectOptions).
//
// Blocking:  every call that can wait takes a Deadline and an optional abort flag. Waits poll() in slices of at
//            most kAbortPollInterval, so a raised abort flag makes the call return RemoteError within about
//            that long, and an expired deadline makes it return Timeout. Nothing here can hang.
// Errors:    Timeout (deadline passed), RemoteError (peer closed or reset the connection, or abort was raised),
//            SystemError (a local system call failed). Messages name the peer address.
// Threading: a Socket or Listener is used by one thread at a time; the address helpers are pure.
// Sockets are non-blocking, close-on-exec, TCP_NODELAY and SO_KEEPALIVE. Sends never raise SIGPIPE.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/doorbell.h"
#include "common/status.h"

namespace cfx::net {

inline constexpr std::chrono::milliseconds kAbortPollInterval{50};

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// ---- addresses ----------------------------------------------------------------------------------------------

// sizeof the family's sockaddr, or 0 for an unknown family.
socklen_t addressLength(const sockaddr_storage& addr);
uint16_t addressPort(const sockaddr_storage& addr);
void setAddressPort(sockaddr_storage& addr, uint16_t port);
// "10.0.0.1:5000", "[fd00::2]:5000", "[fe80::1%eth0]:5000"; "<unset>" for AF_UNSPEC.
std::string addressToString(const sockaddr_storage& addr);
// The IP only: "10.0.0.1", "fd00::2", "fe80::1%eth0" (a link-local address with its zone).
std::string ipToString(const sockaddr_storage& addr);
// Same family, IP and port.
bool sameAddress(const sockaddr_storage& a, const sockaddr_storage& b);
bool isLoopback(const sockaddr_storage& addr);
// True when `addr` lies in the subnet of (`net`, `mask`); false when the families differ.
bool inSubnet(const sockaddr_storage& addr, const sockaddr_storage& net, const sockaddr_storage& mask);

// Parses "ip:port", "[ipv6]:port" or "host:port" (resolved with getaddrinfo; `family` restricts the result,
// AF_UNSPEC prefers IPv4). InvalidArgument for a malformed text, SystemError when the name does not resolve.
// Name resolution itself is not bounded by a deadline (getaddrinfo offers none).
Result<sockaddr_storage> parseAddress(std::string_view text, int family = AF_UNSPEC);

// ---- interfaces ---------------------------------------------------------------------------------------------

struct Interface {
  std::string name;
  sockaddr_storage addr{};     // port 0
  sockaddr_storage netmask{};  // same family as addr
};

// NCCL_SOCKET_IFNAME grammar: a comma list of name prefixes ("eth,ib"); a leading '^' turns it into an exclude
// list ("^docker,lo"); a following '=' makes every entry an exact name ("=eth0", "^=docker0"). A ":port" suffix
// on an entry is accepted and ignored. An empty list matches every name (so "^" excludes nothing).
class IfNameFilter {
 public:
  static IfNameFilter parse(std::string_view spec);
  bool matches(std::string_view name) const;

 private:
  std::vector<std::string> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

struct InterfaceQuery {
  std::string ifName;                         // NCCL_SOCKET_IFNAME; empty selects automatically (see selectInterfaces)
  int family = AF_UNSPEC;                     // NCCL_SOCKET_FAMILY as AF_INET / AF_INET6 / AF_UNSPEC
  std::optional<sockaddr_storage> reachable;  // prefer the interface whose subnet holds this address
  size_t maxCount = 1;
};

// Every up interface with an IPv4 or IPv6 address, in the system's order. IPv6 link-local addresses keep their
// scope id (the interface index), so they can be bound and connected to.
std::vector<Interface> listInterfaces();

// Pure: picks at most query.maxCount interfaces from `candidates`, one address per name. With an ifName the
// filter alone decides. Otherwise NCCL's automatic order applies, taking the first step that finds any:
// "ib" interfaces; interfaces whose subnet holds `reachable`; anything but docker*, lo* and virbr*; then
// docker*, lo*, virbr* in that order. A family other than AF_UNSPEC removes the other family's addresses.
// Of a name's addresses it takes the best: IPv4, then global IPv6, then link-local IPv6, then IPv6 loopback
// (so NCCL_SOCKET_IFNAME=lo with NCCL_SOCKET_FAMILY=AF_INET6 gives ::1, where NCCL finds nothing).
std::vector<Interface> selectInterfaces(const std::vector<Interface>& candidates, const InterfaceQuery& query);

// listInterfaces + selectInterfaces(maxCount 1). SystemError "no socket interface found" when nothing matches,
// naming the filter and the interfaces that exist.
Result<Interface> findInterface(const InterfaceQuery& query);

// ---- connections --------------------------------------------------------------------------------------------

struct ConnectOptions {
  int retries = 34;  // NCCL_SOCKET_RETRY_CNT: extra attempts after "connection refused" or a connect timeout
  std::chrono::milliseconds retrySleep{100};  // NCCL_SOCKET_RETRY_SLEEP_MSEC
};

// A connected TCP stream.
class Socket {
 public:
  Socket() = default;
  Socket(UniqueFd fd, const sockaddr_storage& peer);

  // Connects to `to`, retrying refused or timed-out attempts as `options` says (logged at INFO/NET).
  // RemoteError when every attempt failed, Timeout at the deadline.
  static Result<Socket> connect(const sockaddr_storage& to, const ConnectOptions& options, const Deadline& deadline,
                                const std::atomic<bool>* abortFlag);

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  const sockaddr_storage& peer() const { return peer_; }
  const std::string& peerName() const { return peerName_; }  // addressToString(peer()), cached
  void close() { fd_.reset(); }

  // Sends or receives exactly `bytes` bytes, or fails. After a failure the stream position is unknown: close it.
  Status sendAll(const void* data, size_t bytes, const Deadline& deadline, const std::atomic<bool>* abortFlag);
  Status recvAll(void* data, size_t bytes, const Deadline& deadline, const std::atomic<bool>* abortFlag);
  // Waits until a byte (or end of stream) can be read, without reading it.
  Status waitReadable(const Deadline& deadline, const std::atomic<bool>* abortFlag);

  // Non-blocking: moves what the kernel accepts or holds right now. Returns the byte count, 0 meaning "try
  // again later"; RemoteError on end of stream or a connection error.
  Result<size_t> sendSome(const void* data, size_t bytes);
  Result<size_t> recvSome(void* data, size_t bytes);

 private:
  UniqueFd fd_;
  sockaddr_storage peer_{};
  std::string peerName_;
};

// A listening TCP socket.
class Listener {
 public:
  // Binds `addr` (port 0 picks an ephemeral port) with SO_REUSEADDR and listens.
  static Result<Listener> listen(const sockaddr_storage& addr, int backlog = 512);

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // The bound address, with the actual port.
  const sockaddr_storage& address() const { return addr_; }
  void close() { fd_.reset(); }

  Result<Socket> accept(const Deadline& deadline, const std::atomic<bool>* abortFlag);
  // Non-blocking: nullopt when no connection is pending.
  Result<std::optional<Socket>> tryAccept();

 private:
  UniqueFd fd_;
  sockaddr_storage addr_{};
};

// Sleeps `duration` unless the deadline passes or the flag is raised first. RemoteError on abort.
Status sleepFor(std::chrono::milliseconds duration, const Deadline& deadline, const std::atomic<bool>* abortFlag);

}  // namespace cfx::net
