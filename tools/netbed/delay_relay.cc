// SPDX-License-Identifier: Apache-2.0
// cfx_delay_relay: the test bed's link-latency emulator (tools, not part of the library). It owns one TUN
// device per attached network namespace and forwards IP packets between them through a delay queue.
//
// Why packets and not a proxy: the kernel here has no netem, and a TCP-terminating proxy would split every
// connection in two, so each half would see a short RTT and TCP's congestion control would never feel the
// delay. Forwarding whole IP packets keeps one end-to-end connection whose ACK clock runs over the delay.
//
// How it works: each --port names a namespace, a device name, a one-way delay on the way in and on the way out,
// and the IPv4 prefixes that live behind it. The relay enters each namespace (setns), opens /dev/net/tun and
// creates the device there (IFF_TUN | IFF_NO_PI); the descriptor stays bound to that namespace after the relay
// switches back. A packet read from port s for an address behind port d is released at
//   arrival + in_delay(s) + out_delay(d)
// and written to port d. Delays are constant per (s, d), so one FIFO per (s, d) stays sorted by release time
// and the queue costs O(1) per packet. One poll() covers every TUN plus a timerfd armed for the earliest
// release; each wake reads up to kBatch packets per port and writes everything that is due, so there is no
// per-packet sleep. Cost per packet: one read, one write, one copy into a pooled buffer.
//
// Queued bytes are capped (--max-queue-bytes) like a router's buffer: beyond it new packets are dropped and
// counted. The relay exits on SIGTERM/SIGINT, or when its parent dies (PR_SET_PDEATHSIG), and its TUN devices
// vanish with it, so a crashed test leaves no device behind. Rate limiting is not done here: the bed puts
// tbf on the devices' egress, so shaping and delay stay independent.
//
// Usage: cfx_delay_relay [--ready-fd N] [--mtu M] [--max-queue-bytes B]
//                        --port NETNS:DEV:IN_US:OUT_US:CIDR[,CIDR...] --port ...
// After every device exists it writes "ready\n" to fd N (default 1); the caller then configures addresses.
// On exit it prints one line of counters per port on stderr.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int kBatch = 64;            // packets read per port per wake: bounds one port's share of a pass
constexpr size_t kMaxPacket = 65536;  // an IPv4 packet cannot be larger

volatile sig_atomic_t gStop = 0;

void onSignal(int) { gStop = 1; }

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Prefix {
  uint32_t net = 0;  // host byte order, already masked
  uint32_t mask = 0;
};

struct Port {
  std::string netns;
  std::string dev;
  int64_t inDelayNs = 0;
  int64_t outDelayNs = 0;
  std::vector<Prefix> prefixes;
  int fd = -1;
  uint64_t rxPackets = 0, txPackets = 0, txBytes = 0, dropNoRoute = 0, dropFull = 0, dropWrite = 0;
};

struct Packet {
  int64_t releaseNs;
  uint32_t bytes;
  std::unique_ptr<uint8_t[]> data;
};

// Buffers are recycled so the steady state allocates nothing; each holds one MTU-sized packet.
class BufferPool {
 public:
  explicit BufferPool(size_t bufBytes) : bufBytes_(bufBytes) {}
  std::unique_ptr<uint8_t[]> get() {
    if (free_.empty()) return std::make_unique<uint8_t[]>(bufBytes_);
    auto b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void put(std::unique_ptr<uint8_t[]> b) { free_.push_back(std::move(b)); }

 private:
  size_t bufBytes_;
  std::vector<std::unique_ptr<uint8_t[]>> free_;
};

[[noreturn, gnu::format(printf, 1, 2)]] void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cfx_delay_relay: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

bool parseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

Prefix parsePrefix(const std::string& text) {
  auto parts = split(text, '/');
  int64_t len = 32;
  in_addr a{};
  if (parts.size() > 2 || inet_pton(AF_INET, parts[0].c_str(), &a) != 1 ||
      (parts.size() == 2 && (!parseInt64(parts[1], &len) || len > 32)))
    die("bad IPv4 prefix '%s' (want A.B.C.D or A.B.C.D/LEN)", text.c_str());
  Prefix p;
  p.mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  p.net = ntohl(a.s_addr) & p.mask;
  return p;
}

Port parsePort(const std::string& spec) {
  auto f = split(spec, ':');
  Port p;
  int64_t inUs = 0, outUs = 0;
  if (f.size() != 5 || f[0].empty() || f[1].empty() || f[1].size() >= IFNAMSIZ || !parseInt64(f[2], &inUs) ||
      !parseInt64(f[3], &outUs))
    die("bad --port '%s' (want NETNS:DEV:IN_US:OUT_US:CIDR[,CIDR...], DEV shorter than 16 characters)",
        spec.c_str());
  p.netns = f[0];
  p.dev = f[1];
  p.inDelayNs = inUs * 1000;
  p.outDelayNs = outUs * 1000;
  for (const auto& c : split(f[4], ',')) p.prefixes.push_back(parsePrefix(c));
  return p;
}

// Creates the TUN device inside `netns` and returns to the relay's own namespace. The fd keeps the device in
// the namespace it was created in.
void openTun(Port* port, int homeNs, int mtu) {
  std::string path = "/var/run/netns/" + port->netns;
  int nsFd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsFd < 0) die("cannot open %s: %s", path.c_str(), strerror(errno));
  if (setns(nsFd, CLONE_NEWNET) != 0) die("setns into %s: %s", path.c_str(), strerror(errno));
  close(nsFd);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun: %s", strerror(errno));
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  strncpy(ifr.ifr_name, port->dev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF %s: %s", port->dev.c_str(), strerror(errno));
  // The MTU is set here rather than by the caller so it holds before the first packet; a socket in the
  // namespace is the handle SIOCSIFMTU needs.
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifr.ifr_mtu = mtu;
  if (sock < 0 || ioctl(sock, SIOCSIFMTU, &ifr) != 0) die("set MTU of %s: %s", port->dev.c_str(), strerror(errno));
  close(sock);
  if (setns(homeNs, CLONE_NEWNET) != 0) die("setns back home: %s", strerror(errno));
  port->fd = fd;
}

int routeOf(const std::vector<Port>& ports, uint32_t dst) {
  int best = -1;
  uint32_t bestMask = 0;
  for (size_t i = 0; i < ports.size(); ++i)
    for (const Prefix& p : ports[i].prefixes)
      if ((dst & p.mask) == p.net && (best < 0 || p.mask > bestMask)) {
        best = static_cast<int>(i);
        bestMask = p.mask;
      }
  return best;
}

class Relay {
 public:
  Relay(std::vector<Port> ports, size_t mtu, size_t maxQueueBytes)
      : ports_(std::move(ports)), pool_(mtu), mtu_(mtu), maxQueueBytes_(maxQueueBytes),
        queues_(ports_.size() * ports_.size()) {}

  void run(int timerFd) {
    std::vector<pollfd> pfds;
    for (const Port& p : ports_) pfds.push_back({p.fd, POLLIN, 0});
    pfds.push_back({timerFd, POLLIN, 0});
    while (!gStop) {
      armTimer(timerFd);
      int n = poll(pfds.data(), pfds.size(), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        die("poll: %s", strerror(errno));
      }
      if (pfds.back().revents & POLLIN) {
        uint64_t expirations = 0;
        (void)!read(timerFd, &expirations, sizeof(expirations));
      }
      for (size_t i = 0; i < ports_.size(); ++i)
        if (pfds[i].revents & POLLIN) readPort(i);
      flushDue(nowNs());
    }
  }

  void printCounters() const {
    for (const Port& p : ports_)
      fprintf(stderr,
              "cfx_delay_relay: %s/%s rx %llu tx %llu packets (%llu bytes), dropped: no route %llu, queue full %llu, "
              "write failed %llu\n",
              p.netns.c_str(), p.dev.c_str(), (unsigned long long)p.rxPackets, (unsigned long long)p.txPackets,
              (unsigned long long)p.txBytes, (unsigned long long)p.dropNoRoute, (unsigned long long)p.dropFull,
              (unsigned long long)p.dropWrite);
  }

 private:
  std::deque<Packet>& queue(size_t src, size_t dst) { return queues_[src * ports_.size() + dst]; }

  void readPort(size_t src) {
    Port& in = ports_[src];
    for (int k = 0; k < kBatch; ++k) {
      auto buf = pool_.get();
      ssize_t n = read(in.fd, buf.get(), mtu_);
      if (n < 0) {
        pool_.put(std::move(buf));
        if (errno != EAGAIN && errno != EINTR) die("read from %s: %s", in.dev.c_str(), strerror(errno));
        return;
      }
      ++in.rxPackets;
      // Only IPv4 is routed; the bed disables IPv6 on its devices, so anything else is stray and dropped.
      if (n < 20 || (buf[0] >> 4) != 4) {
        ++in.dropNoRoute;
        pool_.put(std::move(buf));
        continue;
      }
      uint32_t dst = (uint32_t{buf[16]} << 24) | (uint32_t{buf[17]} << 16) | (uint32_t{buf[18]} << 8) | buf[19];
      int out = routeOf(ports_, dst);
      if (out < 0 || static_cast<size_t>(out) == src) {
        ++in.dropNoRoute;
        pool_.put(std::move(buf));
        continue;
      }
      if (queuedBytes_ + static_cast<size_t>(n) > maxQueueBytes_) {
        ++in.dropFull;
        pool_.put(std::move(buf));
        continue;
      }
      queuedBytes_ += static_cast<size_t>(n);
      int64_t release = nowNs() + in.inDelayNs + ports_[static_cast<size_t>(out)].outDelayNs;
      queue(src, static_cast<size_t>(out)).push_back({release, static_cast<uint32_t>(n), std::move(buf)});
    }
  }

  void flushDue(int64_t now) {
    for (size_t s = 0; s < ports_.size(); ++s)
      for (size_t d = 0; d < ports_.size(); ++d) {
        auto& q = queue(s, d);
        Port& out = ports_[d];
        while (!q.empty() && q.front().releaseNs <= now) {
          Packet& p = q.front();
          // A TUN write hands the packet to the kernel's receive path and does not block; a failure means the
          // device went down (the bed is being torn down), which is a drop, not a reason to stop.
          if (write(out.fd, p.data.get(), p.bytes) == static_cast<ssize_t>(p.bytes)) {
            ++out.txPackets;
            out.txBytes += p.bytes;
          } else {
            ++out.dropWrite;
          }
          queuedBytes_ -= p.bytes;
          pool_.put(std::move(p.data));
          q.pop_front();
        }
      }
  }

  // Arms the timer for the earliest queued release, or disarms it when nothing is queued.
  void armTimer(int timerFd) {
    int64_t earliest = INT64_MAX;
    for (const auto& q : queues_)
      if (!q.empty() && q.front().releaseNs < earliest) earliest = q.front().releaseNs;
    itimerspec its{};
    if (earliest != INT64_MAX) {
      // An absolute time at or before now fires at once, which is what a packet already due needs.
      its.it_value.tv_sec = earliest / 1000000000;
      its.it_value.tv_nsec = earliest % 1000000000;
      if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(timerFd, TFD_TIMER_ABSTIME, &its, nullptr) != 0) die("timerfd_settime: %s", strerror(errno));
  }

  std::vector<Port> ports_;
  BufferPool pool_;
  size_t mtu_;
  size_t maxQueueBytes_;
  size_t queuedBytes_ = 0;
  std::vector<std::deque<Packet>> queues_;  // [src * nPorts + dst]
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Port> ports;
  int readyFd = 1;
  int64_t mtu = 1500, maxQueue = int64_t{256} << 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    int64_t v = 0;
    if (a == "--port") {
      ports.push_back(parsePort(next()));
    } else if (a == "--ready-fd") {
      if (!parseInt64(next(), &v) || v > 1 << 20) die("bad --ready-fd");
      readyFd = static_cast<int>(v);
    } else if (a == "--mtu") {
      if (!parseInt64(next(), &mtu) || mtu < 576 || mtu > 65535) die("--mtu must be 576..65535");
    } else if (a == "--max-queue-bytes") {
      if (!parseInt64(next(), &maxQueue) || maxQueue < 65536) die("--max-queue-bytes must be at least 65536");
    } else if (a == "-h" || a == "--help") {
      printf("usage: cfx_delay_relay [--ready-fd N] [--mtu M] [--max-queue-bytes B] "
             "--port NETNS:DEV:IN_US:OUT_US:CIDR[,CIDR...] --port ...\n");
      return 0;
    } else {
      die("unknown argument '%s'", a.c_str());
    }
  }
  if (ports.size() < 2) die("need at least two --port");

  // The bed that started us owns our lifetime: if it dies without cleaning up, we go too, and the TUN
  // devices with us.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  struct sigaction sa{};
  sa.sa_handler = onSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  int homeNs = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (homeNs < 0) die("cannot open /proc/self/ns/net: %s", strerror(errno));
  for (Port& p : ports) openTun(&p, homeNs, static_cast<int>(mtu));
  close(homeNs);
  int timerFd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timerFd < 0) die("timerfd_create: %s", strerror(errno));

  static const char kReady[] = "ready\n";
  if (write(readyFd, kReady, sizeof(kReady) - 1) != sizeof(kReady) - 1) die("cannot write ready: %s", strerror(errno));
  if (readyFd != 1) close(readyFd);

  Relay relay(std::move(ports), static_cast<size_t>(mtu), static_cast<size_t>(maxQueue));
  relay.run(timerFd);
  relay.printCounters();
  return 0;
}
