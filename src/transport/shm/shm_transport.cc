// SPDX-License-Identifier: Apache-2.0
// Shared-memory transport setup: segment creation, descriptor exchange, peer mapping, agreement, unlink
// (transport layer, shm transport).
#include "transport/shm/shm_transport.h"

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <type_traits>

#include "common/log.h"
#include "common/param.h"
#include "transport/shm/shm_export.h"
#include "transport/shm/shm_fifo.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_peer.h"
#include "transport/shm/shm_segment.h"

namespace cfx::transport::shm {

namespace {

constexpr int64_t kMinSlotBytes = int64_t{4} * 1024;
constexpr int64_t kMaxSlotBytes = int64_t{16} * 1024 * 1024;
constexpr size_t kMaxPrefixChars = 32;

std::optional<std::string> validSlotBytes(const int64_t& v) {
  if (v < kMinSlotBytes || v > kMaxSlotBytes) return "out of range [4096, 16777216]";
  if (v % 64 != 0) return "not a multiple of 64";
  return std::nullopt;
}

std::optional<std::string> validSegmentPrefix(const std::string& v) {
  if (v.empty() || v.size() > 32) return "must be 1 to 32 characters";
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return "may hold only letters, digits and '_'";
  }
  return std::nullopt;
}

CFX_PARAM(bool, shmDisable, "NCCL_SHM_DISABLE", false,
          "Set to 1 to stop ranks on the same host from talking through shared memory (/dev/shm); they use the "
          "network transport instead. Use it when /dev/shm is too small or not shared between the ranks' "
          "containers.");
CFX_PARAM(std::string, shmPrefix, "CFX_SHM_PREFIX", std::string("cfx"),
          "Prefix of the shared-memory segments' names in /dev/shm (<prefix>-<pid>-<rank>-<random>; letters, digits "
          "and '_', up to 32). Each communicator removes, under its own prefix, the names that processes killed "
          "during setup left behind; jobs that share /dev/shm but must not touch each other's names (or tests "
          "that count them) set different prefixes.",
          validSegmentPrefix);
CFX_PARAM(int64_t, shmSlotBytes, "CFX_SHM_SLOT_BYTES", int64_t{131072},
          "Bytes per slot of every FIFO (a multiple of 64, 4 KiB to 16 MiB). Larger slots mean fewer steps for "
          "large messages; each rank needs 2 x CFX_SHM_SLOTS x this many bytes of /dev/shm per same-host peer (less "
          "where CFX_SHM_HOST_BYTES shrinks the FIFOs of many ranks per host).",
          validSlotBytes);
CFX_PARAM(int64_t, shmHostBytes, "CFX_SHM_HOST_BYTES", static_cast<int64_t>(kDefaultHostBytes),
          "Shared memory (bytes) the FIFOs of all ranks on one host may take together. Each rank has a FIFO per "
          "channel and same-host peer, n(n-1) x 2 of them on a host of n ranks; when they would not fit, every FIFO "
          "of the communicator shrinks to an equal share (fewer bytes per slot, then fewer slots; at least 8 KiB "
          "each). 0: never shrink them.",
          cfx::param::inRange(int64_t{0}, int64_t{1} << 40));
CFX_PARAM(int, shmSlots, "CFX_SHM_SLOTS", 8,
          "Slots per FIFO (2 to 64): how many steps a sender may run ahead of its receiver on one connection.",
          cfx::param::inRange(2, 64));
CFX_PARAM(std::string, shmDirect, "CFX_SHM_DIRECT", std::string("auto"),
          "Single-copy transfers between ranks on the same host: the receiver reads a large message straight out "
          "of the sender's buffer instead of both copying it through the shared-memory FIFO. auto (the default): "
          "for buffers from ncclMemAlloc, which peers map once and then read with plain loads, and for any buffer "
          "between threads of one process. 1: for every buffer, reading what cannot be mapped with "
          "process_vm_readv, which is slower than the FIFO's two pipelined copies on some machines (VMs, 4 KiB "
          "pages). 0: never. A pair uses them only if neither rank sets 0 and the kernel lets each read the other's "
          "memory (Yama ptrace_scope, containers and PR_SET_DUMPABLE may forbid it).",
          cfx::param::oneOf({"auto", "0", "1"}));
CFX_PARAM(int64_t, shmDirectThreshold, "CFX_SHM_DIRECT_THRESHOLD_BYTES", int64_t{0},
          "Smallest message (bytes) sent single-copy; ranks use the largest value any rank sets. 0 (the default) "
          "picks by CFX_SHM_DIRECT: 4096 for auto, where a receiver reads a mapped buffer with plain loads and one "
          "copy beats the FIFO's two from 4 KiB on, and 1048576 for 1, where a read may be a process_vm_readv "
          "system call.",
          cfx::param::inRange(int64_t{0}, int64_t{1} << 40));

// What every rank announces about its segment in the first allGather. Fixed size, no pointers.
struct SegmentDescriptor {
  char name[96];  // "" for an anonymous segment (nothing to map)
  uint64_t bytes;
  uint64_t slotBytes;
  int32_t nSlots;
  int32_t status;   // Errc of creating the segment; 0 when it exists
  uint8_t enabled;  // shm is not disabled on that rank
  uint8_t direct;   // the rank offers direct transfers (CFX_SHM_DIRECT): 0 no, 1 auto, 2 for every buffer
  uint8_t reserved[6];
  uint64_t processNonce;  // shm_export's: equal on two ranks <=> they are threads of one process
  uint64_t directThreshold;  // CFX_SHM_DIRECT_THRESHOLD_BYTES of that rank
  uint64_t probeAddress;     // a word in that process holding probeValue until create() returns there
  uint64_t probeValue;
};
static_assert(std::is_trivially_copyable_v<SegmentDescriptor>);

// Everything one create() call works with.
struct Context {
  Bootstrap& bootstrap;
  const std::vector<PeerInfo>& peers;
  const ShmOptions& options;
  int rank;
  int nRanks;
  ProcessIdentity self;
  std::vector<bool> local;  // same host, not this rank, and shm enabled here
};

struct MappedPeer {
  std::shared_ptr<ShmPeer> peer;
  std::array<uint64_t, kNumChannels> sendFifo{};  // offsets of our FIFOs inside the peer's segment
};

std::string hostNameOf(const PeerInfo& info) {
  return std::string(info.hostName, strnlen(info.hostName, sizeof(info.hostName)));
}

// "rank R (host H, pid P)" for messages; tolerates a peers vector of the wrong size (reported separately).
std::string whoIs(const Context& ctx, int r) {
  if (r < 0 || static_cast<size_t>(r) >= ctx.peers.size()) return strprintf("rank %d", r);
  const PeerInfo& info = ctx.peers[static_cast<size_t>(r)];
  return strprintf("rank %d (host %s, pid %d)", r, hostNameOf(info).c_str(), static_cast<int>(info.pid));
}

bool validPrefix(const std::string& prefix) {
  if (prefix.empty() || prefix.size() > kMaxPrefixChars) return false;
  for (char c : prefix) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status validateArguments(const ShmOptions& options, const std::vector<PeerInfo>& peers, int rank, int nRanks) {
  const FifoGeometry& g = options.geometry;
  if (g.slotBytes == 0 || g.slotBytes % kSlotAlign != 0 || g.nSlots < 1) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("shm FIFO geometry %d x %zu bytes: slots must be a positive multiple of %zu bytes "
                                   "and there must be at least one",
                                   g.nSlots, g.slotBytes, kSlotAlign));
  }
  if (!validPrefix(options.segmentPrefix)) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("shm segment prefix '%s' must be 1 to %zu characters of [A-Za-z0-9._-]",
                                   options.segmentPrefix.c_str(), kMaxPrefixChars));
  }
  if (static_cast<int>(peers.size()) != nRanks || rank < 0 || rank >= nRanks) {
    return Status::error(Errc::InvalidArgument,
                         strprintf("shm setup for rank %d of %d got %zu peer infos", rank, nRanks, peers.size()));
  }
  return Status();
}

std::string newSegmentName(const std::string& prefix, const ProcessIdentity& self, int rank) {
  std::random_device rd;
  const uint64_t suffix = (static_cast<uint64_t>(rd()) << 32) | rd();
  return strprintf("/%s-%d-%d-%016llx", prefix.c_str(), static_cast<int>(self.pid), rank,
                   static_cast<unsigned long long>(suffix));
}

// The segment with its header and FIFOs constructed: named when some peer may map it, anonymous otherwise.
Result<std::shared_ptr<ShmSegment>> createOwnSegment(const Context& ctx, const SegmentLayout& layout) {
  const bool named = std::find(ctx.local.begin(), ctx.local.end(), true) != ctx.local.end();
  std::unique_ptr<ShmSegment> segment;
  if (named) {
    // Segments of killed processes would otherwise stay in /dev/shm (and in its memory) until reboot.
    ShmSegment::sweepStale(ctx.options.segmentPrefix);
    CFX_TRY_ASSIGN(
        segment, ShmSegment::create(newSegmentName(ctx.options.segmentPrefix, ctx.self, ctx.rank), layout.totalBytes));
  } else {
    CFX_TRY_ASSIGN(segment, ShmSegment::createAnonymous(layout.totalBytes));
  }
  initSegment(segment->data(), layout, ctx.rank, ctx.nRanks, ctx.options.geometry, ctx.self);
  return std::shared_ptr<ShmSegment>(std::move(segment));
}

SegmentDescriptor describe(const Context& ctx, const ShmSegment* own, const Status& ownStatus,
                           const uint64_t* probeWord) {
  SegmentDescriptor d{};
  if (own != nullptr) {
    std::snprintf(d.name, sizeof(d.name), "%s", own->name().c_str());
    d.bytes = own->size();
  }
  d.slotBytes = ctx.options.geometry.slotBytes;
  d.nSlots = ctx.options.geometry.nSlots;
  d.status = static_cast<int32_t>(ownStatus.code());
  d.enabled = ctx.options.disabled ? 0 : 1;
  d.direct = ctx.options.direct == ShmOptions::Direct::Off      ? 0
             : ctx.options.direct == ShmOptions::Direct::Always ? 2
                                                                 : 1;
  d.processNonce = processNonce();
  d.directThreshold = ctx.options.directThresholdBytes;
  d.probeAddress = reinterpret_cast<uintptr_t>(probeWord);
  d.probeValue = *probeWord;
  return d;
}

// Reports what every rank can see in the descriptors alike: another rank's failure, or a geometry that differs
// (the geometry is one per communicator).
Status checkDescriptors(const Context& ctx, const std::vector<SegmentDescriptor>& all) {
  const FifoGeometry& g = ctx.options.geometry;
  for (int r = 0; r < ctx.nRanks; ++r) {
    const SegmentDescriptor& d = all[static_cast<size_t>(r)];
    if (d.status != 0) {
      return Status::error(Errc::RemoteError,
                           strprintf("%s failed to set up the shared-memory transport (%s); see that rank's log",
                                     whoIs(ctx, r).c_str(), errcName(static_cast<Errc>(d.status))));
    }
    if (d.slotBytes != g.slotBytes || d.nSlots != g.nSlots) {
      return Status::error(
          Errc::InvalidUsage,
          strprintf("rank %d uses shm FIFOs of %d x %llu bytes but rank %d uses %d x %zu bytes: set "
                    "CFX_SHM_SLOTS, CFX_SHM_SLOT_BYTES and CFX_SHM_HOST_BYTES to the same values on every rank",
                    r, d.nSlots, static_cast<unsigned long long>(d.slotBytes), ctx.rank, g.nSlots, g.slotBytes));
    }
  }
  return Status();
}

// Maps peer p's segment. Returns a null peer (and Ok) when p's /dev/shm is not ours to see.
Result<MappedPeer> mapPeer(const Context& ctx, int p, const SegmentDescriptor& d) {
  const std::string who = whoIs(ctx, p);
  int openErrno = 0;
  auto segment = ShmSegment::open(d.name, d.bytes, &openErrno);
  if (!segment.ok()) {
    if (openErrno == ENOENT || openErrno == EACCES || openErrno == EPERM) {
      CFX_INFO(log::Sys::Init,
               "shm: rank %d cannot open the segment %s of peer %s: %s; they share a host id but not /dev/shm "
               "(separate containers?), so this pair uses another transport",
               ctx.rank, d.name, who.c_str(), std::strerror(openErrno));
      return MappedPeer{};
    }
    return Status::error(segment.status().code(), strprintf("cannot map the shared memory of peer %s: %s", who.c_str(),
                                                            segment.status().message().c_str()));
  }
  std::vector<uint64_t> offsets;
  CFX_TRY(validateSegment(segment.value()->data(), segment.value()->size(), p, ctx.nRanks, ctx.options.geometry,
                          ctx.rank, &offsets));
  MappedPeer mapped;
  for (size_t ch = 0; ch < static_cast<size_t>(kNumChannels); ++ch) {
    if (offsets[ch] == 0) {
      return Status::error(Errc::InternalError,
                           strprintf("peer %s has no shm FIFO for rank %d on channel %zu although both report the "
                                     "same host",
                                     who.c_str(), ctx.rank, ch));
    }
    mapped.sendFifo[ch] = offsets[ch];
  }
  mapped.peer = std::make_shared<ShmPeer>(p, hostNameOf(ctx.peers[static_cast<size_t>(p)]),
                                          std::shared_ptr<ShmSegment>(std::move(segment).value()), ctx.self);
  return mapped;
}

Status mapPeers(const Context& ctx, const std::vector<SegmentDescriptor>& all, std::vector<MappedPeer>* mapped) {
  mapped->assign(static_cast<size_t>(ctx.nRanks), MappedPeer{});
  for (int p = 0; p < ctx.nRanks; ++p) {
    const SegmentDescriptor& d = all[static_cast<size_t>(p)];
    if (!ctx.local[static_cast<size_t>(p)] || !d.enabled || d.status != 0 || d.name[0] == '\0') continue;
    CFX_TRY_ASSIGN((*mapped)[static_cast<size_t>(p)], mapPeer(ctx, p, d));
  }
  return Status();
}

bool sameProcess(const ProcessIdentity& a, const ProcessIdentity& b) {
  return a.pid == b.pid && a.startTime == b.startTime && a.pidNamespace == b.pidNamespace;
}

// Whether this process can read the memory of mapped peer p: reads the probe word p published, with memcpy when p
// is this very process and with process_vm_readv otherwise (which Yama's ptrace_scope, a seccomp filter, another
// pid namespace or a non-dumpable peer may forbid). False, logged at INFO, when it cannot.
bool probeDirect(const Context& ctx, const MappedPeer& m, const SegmentDescriptor& d) {
  if (ctx.options.direct == ShmOptions::Direct::Off || !d.direct || !m.peer) return false;
  uint64_t value = 0;
  if (sameProcess(m.peer->identity(), ctx.self)) {
    std::memcpy(&value, reinterpret_cast<const void*>(static_cast<uintptr_t>(d.probeAddress)), sizeof(value));
  } else if (m.peer->identity().pidNamespace != ctx.self.pidNamespace) {
    // Its pid names another process here, or none: not one to read.
    CFX_INFO(log::Sys::Shm, "shm: peer rank %d is in another pid namespace; this pair copies through the FIFO",
             m.peer->rank());
    return false;
  } else {
    iovec local{&value, sizeof(value)};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(d.probeAddress)), sizeof(value)};
    const ssize_t n = process_vm_readv(m.peer->pid(), &local, 1, &remote, 1, 0);
    if (n != static_cast<ssize_t>(sizeof(value))) {
      const int err = n < 0 ? errno : 0;
      CFX_INFO(log::Sys::Shm,
               "shm: rank %d cannot read the memory of peer rank %d (pid %d) with process_vm_readv: %s; this pair "
               "copies through the FIFO (check /proc/sys/kernel/yama/ptrace_scope or the container's seccomp profile)",
               ctx.rank, m.peer->rank(), static_cast<int>(m.peer->pid()), err ? std::strerror(err) : "short read");
      return false;
    }
  }
  if (value != d.probeValue) {
    CFX_INFO(log::Sys::Shm,
             "shm: rank %d read a wrong probe value from peer rank %d (pid %d); this pair copies through the FIFO",
             ctx.rank, m.peer->rank(), static_cast<int>(m.peer->pid()));
    return false;
  }
  return true;
}

// The second allGather: every rank's outcome (its Errc, the bitmap of peers it mapped and the bitmap of peers whose
// memory it could read). It is also the barrier after which nobody opens a segment by name any more, nor reads
// a probe word. Returns the first other rank's failure as RemoteError; on success *pairs and *directPairs hold
// every rank's bitmaps, the same on every rank.
Status agree(const Context& ctx, const Status& local, const std::vector<MappedPeer>& mapped,
             const std::vector<bool>& readable, PairMap* pairs, PairMap* directPairs) {
  *pairs = PairMap(ctx.nRanks);
  *directPairs = PairMap(ctx.nRanks);
  const size_t stride = sizeof(int32_t) + 2 * pairs->rowBytes();
  std::vector<uint8_t> outcomes(stride * static_cast<size_t>(ctx.nRanks), 0);
  uint8_t* mine = outcomes.data() + stride * static_cast<size_t>(ctx.rank);
  const int32_t code = static_cast<int32_t>(local.code());
  std::memcpy(mine, &code, sizeof(code));
  for (int p = 0; p < ctx.nRanks; ++p) {
    if (mapped[static_cast<size_t>(p)].peer) mine[sizeof(int32_t) + p / 8] |= static_cast<uint8_t>(1u << (p % 8));
    if (readable[static_cast<size_t>(p)]) {
      mine[sizeof(int32_t) + pairs->rowBytes() + p / 8] |= static_cast<uint8_t>(1u << (p % 8));
    }
  }
  CFX_TRY(ctx.bootstrap.allGather(outcomes.data(), stride));

  for (int p = 0; p < ctx.nRanks; ++p) {
    const uint8_t* theirs = outcomes.data() + stride * static_cast<size_t>(p);
    int32_t theirCode = 0;
    std::memcpy(&theirCode, theirs, sizeof(theirCode));
    if (theirCode != 0 && p != ctx.rank) {
      return Status::error(Errc::RemoteError,
                           strprintf("%s failed to set up the shared-memory transport (%s); see that rank's log",
                                     whoIs(ctx, p).c_str(), errcName(static_cast<Errc>(theirCode))));
    }
    pairs->setRow(p, theirs + sizeof(int32_t));
    directPairs->setRow(p, theirs + sizeof(int32_t) + pairs->rowBytes());
  }
  return Status();
}

// Ranks this rank may talk to over shm: same host, not itself, and shm enabled here.
std::vector<bool> localPeers(const std::vector<PeerInfo>& peers, int rank, bool disabled) {
  std::vector<bool> local(peers.size(), false);
  const uint64_t myHost = peers[static_cast<size_t>(rank)].hostHash;
  for (size_t p = 0; p < peers.size(); ++p) {
    local[p] = !disabled && static_cast<int>(p) != rank && peers[p].hostHash == myHost;
  }
  return local;
}

// Ranks on the host that holds the most: every rank computes the same from the same peers.
int maxRanksPerHost(const std::vector<PeerInfo>& peers) {
  std::vector<uint64_t> hosts;
  hosts.reserve(peers.size());
  for (const PeerInfo& p : peers) hosts.push_back(p.hostHash);
  std::sort(hosts.begin(), hosts.end());
  int most = 0;
  for (size_t i = 0; i < hosts.size();) {
    size_t j = i;
    while (j < hosts.size() && hosts[j] == hosts[i]) ++j;
    most = std::max(most, static_cast<int>(j - i));
    i = j;
  }
  return most;
}

// Fills out.send/out.recv for every connected peer; returns those peers.
std::vector<std::shared_ptr<ShmPeer>> connectEnds(const Context& ctx, const SegmentLayout& layout,
                                                  const std::shared_ptr<ShmSegment>& own,
                                                  const std::vector<MappedPeer>& mapped, const PairMap& pairs,
                                                  const PairMap& directPairs, size_t directThreshold,
                                                  Endpoints& out) {
  const FifoGeometry& g = ctx.options.geometry;
  out.resize(ctx.nRanks);
  std::vector<std::shared_ptr<ShmPeer>> kept;
  for (int p = 0; p < ctx.nRanks; ++p) {
    if (!pairs.connects(ctx.rank, p)) continue;
    const MappedPeer& m = mapped[static_cast<size_t>(p)];
    const bool direct = directPairs.connects(ctx.rank, p);
    const bool sameProc = sameProcess(m.peer->identity(), ctx.self);
    for (int ch = 0; ch < kNumChannels; ++ch) {
      const uint64_t incoming =
          layout.fifoOffsets[static_cast<size_t>(ch) * static_cast<size_t>(ctx.nRanks) + static_cast<size_t>(p)];
      const uint64_t outgoing = m.sendFifo[static_cast<size_t>(ch)];
      out.recv[ch][p] = std::make_unique<ShmRecvEnd>(fifoAt(own->data(), incoming, g.nSlots), g, own, m.peer, direct,
                                                     sameProc);
      out.send[ch][p] = std::make_unique<ShmSendEnd>(fifoAt(m.peer->base(), outgoing, g.nSlots), g, m.peer,
                                                     direct ? directThreshold : 0,
                                                     sameProc || ctx.options.direct == ShmOptions::Direct::Always);
    }
    CFX_INFO(log::Sys::Shm, "shm: rank %d <-> peer rank %d (host %s, pid %d) connected on %d channels%s", ctx.rank, p,
             m.peer->hostName().c_str(), static_cast<int>(m.peer->pid()), kNumChannels,
             !direct     ? ""
             : sameProc  ? ", direct (memcpy, same process)"
             : ctx.options.direct == ShmOptions::Direct::Always ? ", direct (mapped ncclMemAlloc blocks, else process_vm_readv)"
                                                                : ", direct (mapped ncclMemAlloc blocks)");
    kept.push_back(m.peer);
  }
  return kept;
}

}  // namespace

ShmOptions ShmOptions::fromParams() {
  ShmOptions options;
  options.disabled = shmDisable.get();
  options.segmentPrefix = shmPrefix.get();
  options.geometry.slotBytes = static_cast<size_t>(shmSlotBytes.get());
  options.geometry.nSlots = shmSlots.get();
  options.hostBytes = static_cast<size_t>(shmHostBytes.get());
  const std::string direct = shmDirect.get();
  options.direct = direct == "0"   ? ShmOptions::Direct::Off
                   : direct == "1" ? ShmOptions::Direct::Always
                                   : ShmOptions::Direct::Exported;
  const int64_t threshold = shmDirectThreshold.get();
  options.directThresholdBytes = threshold > 0                                       ? static_cast<size_t>(threshold)
                                 : options.direct == ShmOptions::Direct::Always ? kSyscallDirectThreshold
                                                                                   : kMappedDirectThreshold;
  return options;
}

PairMap::PairMap(int nRanks)
    : nRanks_(nRanks),
      rowBytes_((static_cast<size_t>(nRanks) + 7) / 8),
      rows_(rowBytes_ * static_cast<size_t>(nRanks), 0) {}

void PairMap::setRow(int rank, const uint8_t* bitmap) {
  std::memcpy(rows_.data() + rowBytes_ * static_cast<size_t>(rank), bitmap, rowBytes_);
}

bool PairMap::mapped(int from, int to) const {
  const uint8_t byte = rows_[rowBytes_ * static_cast<size_t>(from) + static_cast<size_t>(to) / 8];
  return ((byte >> (to % 8)) & 1u) != 0;
}

bool PairMap::connects(int a, int b) const {
  if (a < 0 || b < 0 || a >= nRanks_ || b >= nRanks_ || a == b) return false;
  return mapped(a, b) && mapped(b, a);
}

ShmTransport::ShmTransport(std::shared_ptr<ShmSegment> own, std::vector<std::shared_ptr<ShmPeer>> peers, PairMap pairs,
                           PairMap directPairs, size_t directThreshold, bool directAnyBuffer,
                           const FifoGeometry& geometry)
    : own_(std::move(own)),
      peers_(std::move(peers)),
      pairs_(std::move(pairs)),
      directPairs_(std::move(directPairs)),
      directThreshold_(directThreshold),
      directAnyBuffer_(directAnyBuffer),
      geometry_(geometry) {}

size_t ShmTransport::segmentBytes() const { return own_->size(); }

bool ShmTransport::connects(int a, int b) const { return pairs_.connects(a, b); }

bool ShmTransport::direct(int a, int b) const { return pairs_.connects(a, b) && directPairs_.connects(a, b); }

ShmTransport::~ShmTransport() {
  // Release pairs with the acquire load of `closed` in ShmPeer::check() on every peer.
  static_cast<SegmentHeader*>(own_->data())->closed.store(1, std::memory_order_release);
}

Doorbell& ShmTransport::doorbell() { return static_cast<SegmentHeader*>(own_->data())->doorbell; }

Result<std::unique_ptr<ShmTransport>> ShmTransport::create(Bootstrap& bootstrap, const std::vector<PeerInfo>& peers,
                                                           const ShmOptions& requested, Endpoints& out) {
  // A failure before or between the exchanges is carried through both of them, so every rank learns about it
  // and none waits for the bootstrap timeout.
  Status local = validateArguments(requested, peers, bootstrap.rank(), bootstrap.nRanks());
  ShmOptions options = requested;
  if (local.ok()) options.geometry = scaledGeometry(requested.geometry, maxRanksPerHost(peers), requested.hostBytes);
  Context ctx{bootstrap, peers, options, bootstrap.rank(), bootstrap.nRanks(), selfIdentity(), {}};
  SegmentLayout layout;
  std::shared_ptr<ShmSegment> own;
  if (local.ok()) {
    ctx.local = localPeers(peers, ctx.rank, options.disabled);
    layout = computeLayout(ctx.nRanks, options.geometry, ctx.local);
    Result<std::shared_ptr<ShmSegment>> created = createOwnSegment(ctx, layout);
    if (created.ok()) {
      own = std::move(created).value();
    } else {
      local = std::move(created).status();
    }
  }

  // Peers read this word with process_vm_readv to prove they may read our memory; it lives until agree() returns,
  // by which time every peer has read it.
  uint64_t probeWord = 0;
  {
    std::random_device rd;
    probeWord = ((static_cast<uint64_t>(rd()) << 32) | rd()) | 1u;
  }
  std::vector<SegmentDescriptor> all(static_cast<size_t>(ctx.nRanks));
  all[static_cast<size_t>(ctx.rank)] = describe(ctx, own.get(), local, &probeWord);
  CFX_TRY(bootstrap.allGather(all.data(), sizeof(SegmentDescriptor)));

  std::vector<MappedPeer> mapped(static_cast<size_t>(ctx.nRanks));
  if (local.ok()) local = checkDescriptors(ctx, all);
  if (local.ok()) local = mapPeers(ctx, all, &mapped);
  std::vector<bool> readable(static_cast<size_t>(ctx.nRanks), false);
  if (local.ok()) {
    for (int p = 0; p < ctx.nRanks; ++p) {
      readable[static_cast<size_t>(p)] = probeDirect(ctx, mapped[static_cast<size_t>(p)], all[static_cast<size_t>(p)]);
    }
  }
  PairMap pairs;
  PairMap directPairs;
  Status agreed = agree(ctx, local, mapped, readable, &pairs, &directPairs);
  // Every peer that will ever map our segment has done so by now (or failed): remove the name.
  if (own) {
    if (Status st = own->unlink(); !st.ok()) CFX_WARN("%s", st.message().c_str());
  }
  CFX_TRY(local);
  CFX_TRY(agreed);

  // One threshold for the whole communicator (the largest any rank asks for), so both ends of every connection
  // report the same value; 0 when no pair uses direct transfers.
  size_t directThreshold = 0;
  bool anyDirect = false;
  for (int a = 0; a < ctx.nRanks; ++a) {
    directThreshold = std::max<size_t>(directThreshold, all[static_cast<size_t>(a)].directThreshold);
    for (int b = a + 1; b < ctx.nRanks; ++b) anyDirect = anyDirect || (pairs.connects(a, b) && directPairs.connects(a, b));
  }
  if (!anyDirect) directThreshold = 0;
  // Whether every sender posts any buffer as a direct message: all ranks are threads of one process, or all ask
  // for direct transfers of every buffer. Otherwise buffers that peers cannot map go as slices.
  bool allAlways = true;
  bool oneProcess = true;
  for (const SegmentDescriptor& d : all) {
    allAlways = allAlways && d.direct == 2;
    oneProcess = oneProcess && d.processNonce == all.front().processNonce;
  }
  const bool anyBuffer = directThreshold > 0 && (allAlways || oneProcess);
  std::vector<std::shared_ptr<ShmPeer>> kept =
      connectEnds(ctx, layout, own, mapped, pairs, directPairs, std::max<size_t>(directThreshold, 1), out);
  CFX_INFO(log::Sys::Init, "shm: rank %d: %s segment of %zu bytes, %zu same-host peers over shm, FIFOs of %d x %zu B%s",
           ctx.rank, own->name().empty() ? "anonymous" : "named", own->size(), kept.size(), options.geometry.nSlots,
           options.geometry.slotBytes, options.disabled ? " (shm disabled)" : "");
  return std::unique_ptr<ShmTransport>(new ShmTransport(std::move(own), std::move(kept), std::move(pairs),
                                                        std::move(directPairs), directThreshold, anyBuffer,
                                                        options.geometry));
}

}  // namespace cfx::transport::shm
