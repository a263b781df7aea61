// SPDX-License-Identifier: Apache-2.0
// Data-socket helpers of the TCP transport (transport layer).
#include "transport/tcp/tcp_socket.h"

#include <ifaddrs.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "common/log.h"

namespace cfx::transport::tcp {

namespace {

// Keepalive: first probe after 60 s of silence, then every 10 s, give up after 6 unanswered probes.
constexpr int kKeepIdleSeconds = 60;
constexpr int kKeepIntervalSeconds = 10;
constexpr int kKeepProbes = 6;

int64_t readProcLimit(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  long long v = -1;
  if (std::fscanf(f, "%lld", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

// Linux caps SO_SNDBUF/SO_RCVBUF at net.core.{w,r}mem_max and turns autotuning off for a socket whose size was
// set. Autotuning may grow to tcp_{w,r}mem[2] (several MiB by default), far above the usual 208 KiB cap, so a
// capped request would shrink the window on exactly the long fat pipes the knob is for. Hence: set the size
// only when the kernel will honour it, otherwise keep autotuning and say so once per process.
void applyBufferSize(int fd, int option, const char* sysctlPath, const char* sysctlName, int64_t bytes) {
  if (bytes <= 0) return;
  static std::once_flag capLogged[2];
  const int64_t cap = readProcLimit(sysctlPath);
  if (cap >= 0 && cap < bytes) {
    std::call_once(capLogged[option == SO_SNDBUF ? 0 : 1], [&] {
      CFX_INFO(log::Sys::Net,
               "tcp: CFX_TCP_SOCKBUF_BYTES=%lld exceeds %s=%lld; keeping kernel autotuning for %s (raise the sysctl "
               "to use a fixed buffer)",
               static_cast<long long>(bytes), sysctlName, static_cast<long long>(cap),
               option == SO_SNDBUF ? "SO_SNDBUF" : "SO_RCVBUF");
    });
    return;
  }
  const int value = static_cast<int>(bytes);
  // Best effort: a refused size leaves the kernel default, which still works.
  (void)::setsockopt(fd, SOL_SOCKET, option, &value, sizeof(value));
}

int64_t readSysctlField(const char* path, int field) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  long long v[3] = {0, 0, 0};
  const int got = std::fscanf(f, "%lld %lld %lld", &v[0], &v[1], &v[2]);
  std::fclose(f);
  return got > field ? v[field] : 0;
}

}  // namespace

KernelBufferLimits readKernelBufferLimits() {
  KernelBufferLimits limits;
  limits.autotuneCap =
      std::min(readSysctlField("/proc/sys/net/ipv4/tcp_rmem", 2), readSysctlField("/proc/sys/net/ipv4/tcp_wmem", 2));
  limits.fixedBufferCap =
      std::min(readSysctlField("/proc/sys/net/core/rmem_max", 0), readSysctlField("/proc/sys/net/core/wmem_max", 0));
  return limits;
}

double interfaceBytesPerSecond(const sockaddr_storage& local) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  std::string name;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != local.ss_family) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, ifa->ifa_addr, net::addressLength(local));
    net::setAddressPort(addr, net::addressPort(local));
    if (net::sameAddress(addr, local)) {
      name = ifa->ifa_name;
      break;
    }
  }
  freeifaddrs(list);
  if (name.empty() || name.find('/') != std::string::npos) return 0;
  // Mbit/s; -1 or an error when the driver does not know (veth reports a nominal 10000).
  const int64_t mbits = readSysctlField(("/sys/class/net/" + name + "/speed").c_str(), 0);
  return mbits > 0 ? static_cast<double>(mbits) * 1e6 / 8 : 0;
}

bool isWildcard(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&address)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (address.ss_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr);
  }
  return false;
}

void applyBufferSizes(int fd, int64_t bytes) {
  applyBufferSize(fd, SO_SNDBUF, "/proc/sys/net/core/wmem_max", "net.core.wmem_max", bytes);
  applyBufferSize(fd, SO_RCVBUF, "/proc/sys/net/core/rmem_max", "net.core.rmem_max", bytes);
}

Result<net::UniqueFd> startConnect(const sockaddr_storage& to, int64_t bufferBytes, bool* connected, int* err) {
  *connected = false;
  *err = 0;
  const socklen_t len = net::addressLength(to);
  if (len == 0) {
    *err = EAFNOSUPPORT;
    return Status::error(Errc::InvalidArgument, strprintf("tcp: cannot connect to %s: not an IPv4 or IPv6 address",
                                                          net::addressToString(to).c_str()));
  }
  net::UniqueFd fd(::socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = errno;
    return Status::error(Errc::SystemError, strprintf("tcp: socket(): %s", std::strerror(errno)));
  }
  // Before connect(): the receive buffer bounds the window announced in the SYN.
  applyBufferSizes(fd.get(), bufferBytes);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), len) == 0) {
    *connected = true;
    return fd;
  }
  if (errno == EINPROGRESS || errno == EINTR) return fd;
  *err = errno;
  return Status::error(Errc::RemoteError,
                       strprintf("tcp: connect(%s): %s", net::addressToString(to).c_str(), std::strerror(errno)));
}

int finishConnect(int fd) {
  int soError = 0;
  socklen_t len = sizeof(soError);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len) != 0) return errno;
  return soError;
}

bool setCongestionControl(int fd, const std::string& name, std::string* why) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return true;
  const int err = errno;
  *why = err == ENOENT  ? "not available in this kernel"
         : err == EPERM ? "not in net.ipv4.tcp_allowed_congestion_control (and no CAP_NET_ADMIN)"
                        : std::strerror(err);
  return false;
}

Status tuneDataSocket(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return Status::error(Errc::SystemError, strprintf("tcp: setsockopt(TCP_NODELAY): %s", std::strerror(errno)));
  }
  // Keepalive is best effort: without it a dead host is still caught by the failure detector above us.
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleSeconds, sizeof(kKeepIdleSeconds));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalSeconds, sizeof(kKeepIntervalSeconds));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepProbes, sizeof(kKeepProbes));
  return Status();
}

SendQueue sendQueueState(int fd) {
  int queued = 0;  // unacknowledged and unsent bytes
  int unsent = 0;
  if (::ioctl(fd, SIOCOUTQNSD, &unsent) != 0 || unsent <= 0) return SendQueue::Empty;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return SendQueue::Moving;
  return queued > unsent ? SendQueue::Moving : SendQueue::Stalled;
}

void pushSendQueue(int fd) {
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace cfx::transport::tcp
