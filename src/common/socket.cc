// SPDX-License-Identifier: Apache-2.0
// TCP socket helpers: addresses, interface selection and deadline-bounded non-blocking I/O (common layer).
#include "common/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "common/log.h"

namespace cfx::net {

void UniqueFd::reset(int fd) {
  // close() is never retried on Linux: the descriptor is released even when it reports EINTR.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ---- addresses ----------------------------------------------------------------------------------------------

socklen_t addressLength(const sockaddr_storage& addr) {
  switch (addr.ss_family) {
    case AF_INET:
      return sizeof(sockaddr_in);
    case AF_INET6:
      return sizeof(sockaddr_in6);
    default:
      return 0;
  }
}

uint16_t addressPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return 0;
}

void setAddressPort(sockaddr_storage& addr, uint16_t port) {
  if (addr.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(addr).sin_port = htons(port);
  if (addr.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(addr).sin6_port = htons(port);
}

std::string ipToString(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    // A link-local address means nothing without its link: print the zone as getaddrinfo() reads it back.
    if (IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr) && in6.sin6_scope_id != 0) {
      char zone[IF_NAMESIZE] = "";
      if (if_indextoname(in6.sin6_scope_id, zone) != nullptr) return strprintf("%s%%%s", text, zone);
      return strprintf("%s%%%u", text, in6.sin6_scope_id);
    }
  } else {
    return "<unset>";
  }
  return text;
}

std::string addressToString(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return strprintf("%s:%u", ipToString(addr).c_str(), addressPort(addr));
  if (addr.ss_family == AF_INET6) return strprintf("[%s]:%u", ipToString(addr).c_str(), addressPort(addr));
  return "<unset>";
}

bool sameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family || addressPort(a) != addressPort(b)) return false;
  if (a.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

bool isLoopback(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr) >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr);
  return false;
}

namespace {

// The raw address bytes of an IPv4 or IPv6 sockaddr, or an empty span.
std::pair<const uint8_t*, size_t> ipBytes(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return {reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(addr).sin_addr), 4};
  }
  if (addr.ss_family == AF_INET6) {
    return {reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr), 16};
  }
  return {nullptr, 0};
}

bool isLinkLocalV6(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr);
}

// Strict decimal port: digits only, 0..65535.
std::optional<uint16_t> parsePort(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace

bool inSubnet(const sockaddr_storage& addr, const sockaddr_storage& net, const sockaddr_storage& mask) {
  if (addr.ss_family != net.ss_family || mask.ss_family != net.ss_family) return false;
  const auto [a, n] = ipBytes(addr);
  const auto [b, nb] = ipBytes(net);
  const auto [m, nm] = ipBytes(mask);
  if (n == 0 || n != nb || n != nm) return false;
  for (size_t i = 0; i < n; ++i) {
    if ((a[i] & m[i]) != (b[i] & m[i])) return false;
  }
  return true;
}

Result<sockaddr_storage> parseAddress(std::string_view text, int family) {
  std::string host;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::error(Errc::InvalidArgument, strprintf("bad address '%.*s': expected [ipv6]:port",
                                                            static_cast<int>(text.size()), text.data()));
    }
    host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || text.find(':') != colon) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("bad address '%.*s': expected host:port, ip:port or [ipv6]:port",
                                     static_cast<int>(text.size()), text.data()));
    }
    host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  const std::optional<uint16_t> port = parsePort(portText);
  if (!port || host.empty()) {
    return Status::error(Errc::InvalidArgument, strprintf("bad address '%.*s': missing host or bad port",
                                                          static_cast<int>(text.size()), text.data()));
  }

  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    return Status::error(Errc::SystemError, strprintf("cannot resolve '%s': %s", host.c_str(), gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(list, freeaddrinfo);
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    if (pick == nullptr || (pick->ai_family != AF_INET && ai->ai_family == AF_INET)) pick = ai;
  }
  if (pick == nullptr) {
    return Status::error(Errc::SystemError, strprintf("'%s' has no IPv4 or IPv6 address", host.c_str()));
  }
  sockaddr_storage out{};
  std::memcpy(&out, pick->ai_addr, pick->ai_addrlen);
  setAddressPort(out, *port);
  return out;
}

// ---- interfaces ---------------------------------------------------------------------------------------------

IfNameFilter IfNameFilter::parse(std::string_view spec) {
  IfNameFilter f;
  if (!spec.empty() && spec.front() == '^') {
    f.exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    f.exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view entry = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (const size_t colon = entry.find(':'); colon != std::string_view::npos) entry = entry.substr(0, colon);
    if (!entry.empty()) f.entries_.emplace_back(entry);
  }
  return f;
}

bool IfNameFilter::matches(std::string_view name) const {
  if (entries_.empty()) return true;
  bool hit = false;
  for (const auto& e : entries_) {
    if (exact_ ? name == e : name.substr(0, e.size()) == e) {
      hit = true;
      break;
    }
  }
  return hit != exclude_;
}

std::vector<Interface> listInterfaces() {
  ifaddrs* list = nullptr;
  std::vector<Interface> out;
  if (getifaddrs(&list) != 0) return out;
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    Interface itf;
    itf.name = ifa->ifa_name;
    const size_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&itf.addr, ifa->ifa_addr, len);
    if (ifa->ifa_netmask != nullptr) {
      std::memcpy(&itf.netmask, ifa->ifa_netmask, len);
      itf.netmask.ss_family = static_cast<sa_family_t>(family);
    }
    setAddressPort(itf.addr, 0);
    out.push_back(std::move(itf));
  }
  return out;
}

std::vector<Interface> selectInterfaces(const std::vector<Interface>& unordered, const InterfaceQuery& query) {
  // Keep the system's order of names; within a name prefer IPv4, then global IPv6, then link-local IPv6 (needs its
  // scope), then IPv6 loopback (which NCCL never offers; here it is the last resort that makes "lo" with
  // AF_INET6 work).
  std::vector<std::string> order;
  for (const auto& itf : unordered) {
    if (std::find(order.begin(), order.end(), itf.name) == order.end()) order.push_back(itf.name);
  }
  auto rank = [&](const Interface& itf) {
    const auto pos = std::find(order.begin(), order.end(), itf.name) - order.begin();
    const int kind = itf.addr.ss_family == AF_INET ? 0 : isLoopback(itf.addr) ? 3 : isLinkLocalV6(itf.addr) ? 2 : 1;
    return pos * 4 + kind;
  };
  std::vector<Interface> candidates = unordered;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Interface& a, const Interface& b) { return rank(a) < rank(b); });
  auto pick = [&](const std::function<bool(const Interface&)>& accept) {
    std::vector<Interface> out;
    for (const auto& c : candidates) {
      if (out.size() >= query.maxCount) break;
      if (query.family != AF_UNSPEC && c.addr.ss_family != query.family) continue;
      if (c.addr.ss_family != AF_INET && c.addr.ss_family != AF_INET6) continue;
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Interface& o) { return o.name == c.name; });
      if (seen || !accept(c)) continue;
      out.push_back(c);
    }
    return out;
  };
  auto byName = [&](std::string_view spec) {
    const IfNameFilter filter = IfNameFilter::parse(spec);
    return pick([&](const Interface& c) { return filter.matches(c.name); });
  };

  if (!query.ifName.empty()) return byName(query.ifName);
  if (auto ib = byName("ib"); !ib.empty()) return ib;
  if (query.reachable) {
    const sockaddr_storage target = *query.reachable;
    auto near = pick([&](const Interface& c) { return inSubnet(target, c.addr, c.netmask); });
    if (!near.empty()) return near;
  }
  for (const char* spec : {"^docker,lo,virbr", "docker", "lo", "virbr"}) {
    if (auto found = byName(spec); !found.empty()) return found;
  }
  return {};
}

Result<Interface> findInterface(const InterfaceQuery& query) {
  const std::vector<Interface> all = listInterfaces();
  InterfaceQuery one = query;
  one.maxCount = 1;
  std::vector<Interface> chosen = selectInterfaces(all, one);
  if (!chosen.empty()) return std::move(chosen.front());
  std::string names;
  for (const auto& itf : all) names += (names.empty() ? "" : ", ") + itf.name + "=" + ipToString(itf.addr);
  const char* fam = query.family == AF_INET ? "AF_INET" : query.family == AF_INET6 ? "AF_INET6" : "any";
  return Status::error(Errc::SystemError,
                       strprintf("no socket interface found (NCCL_SOCKET_IFNAME='%s', NCCL_SOCKET_FAMILY=%s; "
                                 "interfaces: %s)",
                                 query.ifName.c_str(), fam, names.empty() ? "none" : names.c_str()));
}

// ---- waiting ------------------------------------------------------------------------------------------------

namespace {

bool raised(const std::atomic<bool>* abortFlag) {
  // Relaxed: the flag carries no data; the caller only needs to see it eventually.
  return abortFlag != nullptr && abortFlag->load(std::memory_order_relaxed);
}

int sliceMs(const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const std::chrono::microseconds cap =
      abortFlag != nullptr ? std::chrono::microseconds(kAbortPollInterval) : std::chrono::microseconds(1000000);
  const auto left = deadline.remaining(cap);
  // Round up so the last slice sleeps instead of spinning on a zero timeout.
  return static_cast<int>((left.count() + 999) / 1000);
}

// Waits for `events` on `fd`. Ok once ready (including error/hang-up, which the next I/O call reports).
Status waitFor(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abortFlag, const char* what,
               const std::string& peerName) {
  for (;;) {
    if (raised(abortFlag)) {
      return Status::error(Errc::RemoteError, strprintf("aborted while %s %s", what, peerName.c_str()));
    }
    if (deadline.expired()) {
      return Status::error(Errc::Timeout, strprintf("timed out %s %s", what, peerName.c_str()));
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, sliceMs(deadline, abortFlag));
    if (rc > 0) return {};
    if (rc < 0 && errno != EINTR) {
      return Status::error(Errc::SystemError,
                           strprintf("poll failed while %s %s: %s", what, peerName.c_str(), std::strerror(errno)));
    }
  }
}

void configureStream(int fd) {
  const int one = 1;
  // Best effort: a socket without these options still works, only slower or with later failure detection.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

std::string progressText(bool sending, size_t done, size_t total) {
  return strprintf(" (%zu of %zu bytes %s)", done, total, sending ? "sent" : "received");
}

// err 0 means an orderly end of stream. total 0 leaves the byte counts out (the caller adds them).
Status connectionLost(const std::string& peerName, int err, bool sending, size_t done, size_t total) {
  const std::string counts = total == 0 ? std::string() : progressText(sending, done, total);
  if (err == 0 || err == ECONNRESET || err == EPIPE) {
    return Status::error(Errc::RemoteError,
                         strprintf("connection closed by remote peer %s%s", peerName.c_str(), counts.c_str()));
  }
  return Status::error(Errc::RemoteError,
                       strprintf("%s %s %s failed: %s%s", sending ? "send" : "recv", sending ? "to" : "from",
                                 peerName.c_str(), std::strerror(err), counts.c_str()));
}

// One connect attempt. Returns the connected socket, or the errno that ended the attempt (in `err`).
Result<Socket> connectOnce(const sockaddr_storage& to, const Deadline& deadline, const std::atomic<bool>* abortFlag,
                           const std::string& name, int& err) {
  err = 0;
  UniqueFd fd(::socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Status::error(Errc::SystemError,
                         strprintf("socket() for %s failed: %s", name.c_str(), std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), addressLength(to));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    err = errno;
    return Status::error(Errc::RemoteError, std::strerror(err));
  }
  if (rc != 0) {
    CFX_TRY(waitFor(fd.get(), POLLOUT, deadline, abortFlag, "connecting to", name));
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return Status::error(Errc::RemoteError, std::strerror(err));
  }
  configureStream(fd.get());
  return Socket(std::move(fd), to);
}

}  // namespace

Status sleepFor(std::chrono::milliseconds duration, const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const Deadline until(duration);
  while (!until.expired()) {
    if (raised(abortFlag)) return Status::error(Errc::RemoteError, "aborted");
    if (deadline.expired()) return {};
    std::chrono::microseconds slice = until.remaining(std::chrono::microseconds(kAbortPollInterval));
    slice = std::min(slice, deadline.remaining(slice));
    std::this_thread::sleep_for(slice);
  }
  return {};
}

// ---- Socket -------------------------------------------------------------------------------------------------

Socket::Socket(UniqueFd fd, const sockaddr_storage& peer)
    : fd_(std::move(fd)), peer_(peer), peerName_(addressToString(peer)) {}

Result<Socket> Socket::connect(const sockaddr_storage& to, const ConnectOptions& options, const Deadline& deadline,
                               const std::atomic<bool>* abortFlag) {
  const std::string name = addressToString(to);
  if (addressLength(to) == 0) {
    return Status::error(Errc::InvalidArgument, strprintf("cannot connect to %s: no address", name.c_str()));
  }
  for (int attempt = 0;; ++attempt) {
    int err = 0;
    Result<Socket> sock = connectOnce(to, deadline, abortFlag, name, err);
    if (sock.ok()) return sock;
    if (err == 0) return std::move(sock).status();  // timeout, abort or a local failure: not retried
    const bool retryable = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retryable || attempt >= options.retries) {
      return Status::error(Errc::RemoteError, strprintf("connect to %s failed after %d attempt(s): %s", name.c_str(),
                                                        attempt + 1, std::strerror(err)));
    }
    if (attempt == 0 || (attempt + 1) % 10 == 0) {
      CFX_INFO(log::Sys::Net, "Call to connect %s returned %s, retrying (%d of %d)", name.c_str(), std::strerror(err),
               attempt + 1, options.retries);
    }
    CFX_TRY(sleepFor(options.retrySleep, deadline, abortFlag));
  }
}

Status Socket::sendAll(const void* data, size_t bytes, const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  if (raised(abortFlag))
    return Status::error(Errc::RemoteError, strprintf("aborted before sending to %s", peerName_.c_str()));
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    Result<size_t> n = sendSome(p + done, bytes - done);
    if (!n.ok()) return Status::error(n.status().code(), n.status().message() + progressText(true, done, bytes));
    done += *n;
    if (done == bytes) break;
    if (*n == 0) {
      Status st = waitFor(fd_.get(), POLLOUT, deadline, abortFlag, "sending to", peerName_);
      if (!st.ok()) return Status::error(st.code(), st.message() + progressText(true, done, bytes));
    }
  }
  return {};
}

Status Socket::recvAll(void* data, size_t bytes, const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  if (raised(abortFlag)) {
    return Status::error(Errc::RemoteError, strprintf("aborted before receiving from %s", peerName_.c_str()));
  }
  auto* p = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::recv(fd_.get(), p + done, bytes - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return connectionLost(peerName_, 0, false, done, bytes);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return connectionLost(peerName_, errno, false, done, bytes);
    Status st = waitFor(fd_.get(), POLLIN, deadline, abortFlag, "receiving from", peerName_);
    if (!st.ok()) return Status::error(st.code(), st.message() + progressText(false, done, bytes));
  }
  return {};
}

Status Socket::waitReadable(const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  return waitFor(fd_.get(), POLLIN, deadline, abortFlag, "waiting for data from", peerName_);
}

Result<size_t> Socket::sendSome(const void* data, size_t bytes) {
  if (bytes == 0) return size_t{0};
  for (;;) {
    const ssize_t n = ::send(fd_.get(), data, bytes, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return connectionLost(peerName_, errno, true, 0, 0);
  }
}

Result<size_t> Socket::recvSome(void* data, size_t bytes) {
  if (bytes == 0) return size_t{0};
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), data, bytes, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return connectionLost(peerName_, 0, false, 0, 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return connectionLost(peerName_, errno, false, 0, 0);
  }
}

// ---- Listener -----------------------------------------------------------------------------------------------

Result<Listener> Listener::listen(const sockaddr_storage& addr, int backlog) {
  const std::string name = addressToString(addr);
  if (addressLength(addr) == 0) {
    return Status::error(Errc::InvalidArgument, strprintf("cannot listen on %s: no address", name.c_str()));
  }
  Listener l;
  l.fd_.reset(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!l.fd_.valid()) {
    return Status::error(Errc::SystemError,
                         strprintf("socket() for %s failed: %s", name.c_str(), std::strerror(errno)));
  }
  const int one = 1;
  (void)setsockopt(l.fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(l.fd_.get(), reinterpret_cast<const sockaddr*>(&addr), addressLength(addr)) != 0) {
    return Status::error(Errc::SystemError, strprintf("bind to %s failed: %s", name.c_str(), std::strerror(errno)));
  }
  if (::listen(l.fd_.get(), backlog) != 0) {
    return Status::error(Errc::SystemError, strprintf("listen on %s failed: %s", name.c_str(), std::strerror(errno)));
  }
  socklen_t len = sizeof(l.addr_);
  if (getsockname(l.fd_.get(), reinterpret_cast<sockaddr*>(&l.addr_), &len) != 0) {
    return Status::error(Errc::SystemError,
                         strprintf("getsockname on %s failed: %s", name.c_str(), std::strerror(errno)));
  }
  return l;
}

Result<std::optional<Socket>> Listener::tryAccept() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    UniqueFd fd(::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) {
      configureStream(fd.get());
      return std::optional<Socket>(Socket(std::move(fd), peer));
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<Socket>();
    return Status::error(Errc::SystemError,
                         strprintf("accept on %s failed: %s", addressToString(addr_).c_str(), std::strerror(errno)));
  }
}

Result<Socket> Listener::accept(const Deadline& deadline, const std::atomic<bool>* abortFlag) {
  const std::string name = addressToString(addr_);
  for (;;) {
    CFX_TRY_ASSIGN(std::optional<Socket> sock, tryAccept());
    if (sock) return std::move(*sock);
    CFX_TRY(waitFor(fd_.get(), POLLIN, deadline, abortFlag, "accepting on", name));
  }
}

}  // namespace cfx::net
