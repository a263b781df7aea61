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
// Segmentation offload: a TCP sender at 1 Gbit/s with 1500-byte packets means ~85k packets per second per
// direction, two system calls each, which a shared 2-core machine cannot sustain beside the ranks. So the TUNs
// are created with IFF_VNET_HDR and TSO/checksum offload (TUNSETOFFLOAD), as a virtual machine's NIC is: the
// kernel hands the relay GSO packets of up to 64 KiB with a virtio_net_hdr in front, and the relay writes them
// unchanged to the other TUN, where the kernel accepts them as already-validated GSO packets. The wire MTU
// (what TCP's MSS and tbf's per-packet accounting see) stays --mtu; only the batching changes. --no-offload
// turns it off. Measured through the relay on this 2-core machine: 9.5 Gbit/s one way with offload, 1.0 Gbit/s
// with 30k retransmits without. The TUN queue is --txqueuelen packets long (default 1000, twice the kernel's):
// a TUN does not push back on its qdisc, it drops when its ring is full, and a short ring would turn every
// scheduling hiccup of the relay into TCP losses.
//
// Queued bytes are capped (--max-queue-bytes) like a router's buffer: beyond it new packets are dropped and
// counted. The relay exits on SIGTERM/SIGINT, or when its parent dies (PR_SET_PDEATHSIG), and its TUN devices
// vanish with it, so a crashed test leaves no device behind. Rate limiting is not done here: the bed puts
// tbf on the devices' egress, so shaping and delay stay independent.
//
// Usage: cfx_delay_relay [--ready-fd N] [--mtu M] [--max-queue-bytes B] [--txqueuelen N] [--no-offload]
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
// struct virtio_net_hdr (linux/virtio_net.h, which does not compile as C++): flags, gso_type, hdr_len,
// gso_size, csum_start, csum_offset. Set explicitly with TUNSETVNETHDRSZ, so no other layout can sneak in.
constexpr int kVnetHdr = 10;
constexpr size_t kMaxFrame = kVnetHdr + 65535;  // an IPv4 packet cannot be larger
constexpr size_t kSmallBuf = 2048;              // holds an ACK or an MTU-sized packet

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
  std::unique_ptr<uint8_t[]> data;  // kSmallBuf or kMaxFrame bytes, by bytes
};

// Buffers are recycled so the steady state allocates nothing. Two sizes, so that the ACKs queued behind a long
// delay do not each pin 64 KiB.
class BufferPool {
 public:
  std::unique_ptr<uint8_t[]> get(size_t bytes) {
    auto& list = bytes <= kSmallBuf ? small_ : large_;
    if (list.empty()) return std::make_unique<uint8_t[]>(bytes <= kSmallBuf ? kSmallBuf : kMaxFrame);
    auto b = std::move(list.back());
    list.pop_back();
    return b;
  }
  void put(std::unique_ptr<uint8_t[]> b, size_t bytes) {
    (bytes <= kSmallBuf ? small_ : large_).push_back(std::move(b));
  }

 private:
  std::vector<std::unique_ptr<uint8_t[]>> small_, large_;
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
void openTun(Port* port, int homeNs, int mtu, int txQueueLen, bool offload) {
  std::string path = "/var/run/netns/" + port->netns;
  int nsFd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsFd < 0) die("cannot open %s: %s", path.c_str(), strerror(errno));
  if (setns(nsFd, CLONE_NEWNET) != 0) die("setns into %s: %s", path.c_str(), strerror(errno));
  close(nsFd);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun: %s", strerror(errno));
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
  strncpy(ifr.ifr_name, port->dev.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF %s: %s", port->dev.c_str(), strerror(errno));
  int vnetHdr = kVnetHdr;
  if (offload && (ioctl(fd, TUNSETVNETHDRSZ, &vnetHdr) != 0 ||
                  ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0))
    die("TUNSETOFFLOAD on %s: %s (try --no-offload)", port->dev.c_str(), strerror(errno));
  // MTU and queue length are set here rather than by the caller so they hold before the first packet; a
  // socket in the namespace is the handle the ioctls need.
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifr.ifr_mtu = mtu;
  if (sock < 0 || ioctl(sock, SIOCSIFMTU, &ifr) != 0) die("set MTU of %s: %s", port->dev.c_str(), strerror(errno));
  ifr.ifr_qlen = txQueueLen;
  if (ioctl(sock, SIOCSIFTXQLEN, &ifr) != 0) die("set txqueuelen of %s: %s", port->dev.c_str(), strerror(errno));
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
  Relay(std::vector<Port> ports, bool offload, size_t maxQueueBytes)
      : ports_(std::move(ports)), hdr_(offload ? kVnetHdr : 0), maxQueueBytes_(maxQueueBytes),
        scratch_(kMaxFrame), queues_(ports_.size() * ports_.size()) {}

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
      ssize_t n = read(in.fd, scratch_.data(), scratch_.size());
      if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) die("read from %s: %s", in.dev.c_str(), strerror(errno));
        return;
      }
      ++in.rxPackets;
      const uint8_t* ip = scratch_.data() + hdr_;
      // Only IPv4 is routed; the bed disables IPv6 on its devices, so anything else is stray and dropped.
      if (static_cast<size_t>(n) < hdr_ + 20 || (ip[0] >> 4) != 4) {
        ++in.dropNoRoute;
        continue;
      }
      uint32_t dst = (uint32_t{ip[16]} << 24) | (uint32_t{ip[17]} << 16) | (uint32_t{ip[18]} << 8) | ip[19];
      int out = routeOf(ports_, dst);
      if (out < 0 || static_cast<size_t>(out) == src) {
        ++in.dropNoRoute;
        continue;
      }
      size_t bytes = static_cast<size_t>(n);
      if (queuedBytes_ + bytes > maxQueueBytes_) {
        ++in.dropFull;
        continue;
      }
      // Copied out of the scratch frame so a queued ACK holds a small buffer, not a 64 KiB one.
      auto buf = pool_.get(bytes);
      memcpy(buf.get(), scratch_.data(), bytes);
      queuedBytes_ += bytes;
      int64_t release = nowNs() + in.inDelayNs + ports_[static_cast<size_t>(out)].outDelayNs;
      queue(src, static_cast<size_t>(out)).push_back({release, static_cast<uint32_t>(bytes), std::move(buf)});
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
          pool_.put(std::move(p.data), p.bytes);
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
  size_t hdr_;  // virtio_net_hdr bytes in front of each packet: 0 without offload
  size_t maxQueueBytes_;
  size_t queuedBytes_ = 0;
  std::vector<uint8_t> scratch_;  // one read's frame; a packet is copied out once it is routed
  std::vector<std::deque<Packet>> queues_;  // [src * nPorts + dst]
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Port> ports;
  int readyFd = 1;
  int64_t mtu = 1500, maxQueue = int64_t{256} << 20, txQueueLen = 1000;
  bool offload = true;
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
    } else if (a == "--txqueuelen") {
      if (!parseInt64(next(), &txQueueLen) || txQueueLen < 1 || txQueueLen > 1000000)
        die("--txqueuelen must be 1..1000000");
    } else if (a == "--no-offload") {
      offload = false;
    } else if (a == "-h" || a == "--help") {
      printf("usage: cfx_delay_relay [--ready-fd N] [--mtu M] [--max-queue-bytes B] [--txqueuelen N] [--no-offload] "
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
  for (Port& p : ports) openTun(&p, homeNs, static_cast<int>(mtu), static_cast<int>(txQueueLen), offload);
  close(homeNs);
  int timerFd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timerFd < 0) die("timerfd_create: %s", strerror(errno));

  static const char kReady[] = "ready\n";
  if (write(readyFd, kReady, sizeof(kReady) - 1) != sizeof(kReady) - 1) die("cannot write ready: %s", strerror(errno));
  if (readyFd != 1) close(readyFd);

  Relay relay(std::move(ports), offload, static_cast<size_t>(maxQueue));
  relay.run(timerFd);
  relay.printCounters();
  return 0;
}
