// SPDX-License-Identifier: Apache-2.0
// Communicator lifecycle: connect, run work, finalize, abort (core layer).
#include "core/communicator.h"

#include <netinet/in.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "common/log.h"
#include "common/param.h"
#include "core/host_lanes.h"
#include "topology/calibration.h"
#include "transport/peer_info.h"
#include "transport/transport_set.h"

namespace cfx::core {

CFX_PARAM(int64_t, timeoutMsParam, "CFX_TIMEOUT_MS", 600000,
          "Fail an operation with a timeout naming the peer after this many milliseconds without progress; "
          "0 waits forever (NCCL's behaviour).",
          param::atLeast<int64_t>(0));
CFX_PARAM(int, spinCountParam, "CFX_SPIN_COUNT", 2000,
          "Failed polls before a waiting rank sleeps on its doorbell, at most: where ranks do not outnumber CPUs a "
          "thread's waits spin what its last waits suggest (a spin that runs out halves the next one, down to 16). "
          "Lower saves CPU when oversubscribed.",
          param::inRange(0, 10000000));
CFX_PARAM(std::string, hostIdParam, "NCCL_HOSTID", "",
          "Override the host identity used to decide which ranks share a host (and so shared memory).");
CFX_PARAM(std::string, algoParam, "NCCL_ALGO", "",
          "Restrict algorithms: comma list of ring, biring, hier, rabenseifner, tree, chain, direct, recdouble, "
          "exchange, and for device buffers on the CUDA IPC path ipcscratch, ipczerocopy, ipconeshot; ^ excludes; "
          "per-collective form allreduce:ring;broadcast:chain.");

CFX_PARAM(int, checkCallsParam, "CFX_CHECK_CALLS", 0,
          "1: every collective first all-gathers each rank's call (collective, datatype, op, count, root, codec), so "
          "a mismatched call fails with ncclInvalidUsage on every rank, naming each rank's call, before any data "
          "moves. 0 (the default) finds mismatches from the tags of the op's own messages, at no cost: a rank whose "
          "part of a mismatched op only sends (a root that disagrees) then learns it at its next call, or from "
          "ncclCommGetAsyncError. Costs one small all-gather per collective. Must be the same on every rank (making a "
          "communicator refuses otherwise).",
          param::inRange(0, 1));
CFX_PARAM(std::string, protoParam, "NCCL_PROTO", "",
          "Restrict protocols, NCCL_ALGO's syntax with Simple, LL, LL128. This library has Simple only: a spec that "
          "excludes it for a collective is reported (WARN, and in the op's INFO/TUNING line) and Simple is used.");

CFX_PARAM(std::string, netParam, "CFX_NET", "",
          "The network transport for rank pairs that shared memory does not connect: tcp (the default) or ucx "
          "(case-insensitive). NCCL_NET and ncclConfig_t.netName take precedence (Socket = tcp, UCX = ucx, IB = ucx "
          "when built with UCX). See docs/notes/ucx_transport.md.");

CommOptions CommOptions::fromParams() {
  param::logIgnoredNcclVariables();
  CommOptions o;
  o.timeout = std::chrono::milliseconds(timeoutMsParam.get());
  o.bootstrap = transport::readBootstrapParams();
  o.spins = spinCountParam.get();
  o.hostId = hostIdParam.get();
  o.health = ft::HealthOptions::fromParams();
  o.checkCalls = checkCallsParam.get() != 0;
  o.hostLanes = readHostLanes();
  o.net = netParam.get();
  o.topology = topo::TopologyOptions::fromParams();
  if (!algoParam.get().empty()) {
    std::vector<std::string> skipped;
    auto parsed = coll::parseAlgoSpec(algoParam.get(), &skipped);
    if (parsed.ok()) {
      o.planner = std::move(parsed).value();
      static std::once_flag once;  // the knob is read once per process; so is what it said
      std::call_once(once, [&] {
        for (const std::string& name : skipped) {
          CFX_INFO(log::Sys::Env,
                   "NCCL_ALGO names %s, which this library does not have: skipped; the rest of "
                   "NCCL_ALGO=%s applies",
                   name.c_str(), algoParam.get().c_str());
        }
      });
    } else {
      CFX_WARN("NCCL_ALGO=%s ignored: %s", algoParam.get().c_str(), parsed.status().message().c_str());
    }
  }
  if (!protoParam.get().empty()) {
    if (Status st = coll::parseProtoSpec(protoParam.get(), o.planner); !st.ok()) {
      CFX_WARN("NCCL_PROTO=%s ignored: %s", protoParam.get().c_str(), st.message().c_str());
      o.planner.simpleExcluded = 0;
    } else if (o.planner.simpleExcluded != 0) {
      CFX_WARN("NCCL_PROTO=%s excludes Simple for some collectives, but Simple is the only protocol this library has "
               "(LL and LL128 are NVIDIA's GPU-kernel protocols); those collectives use Simple",
               protoParam.get().c_str());
    }
  }
  return o;
}

// ---- registry ----

namespace {
std::mutex gRegistryMutex;
std::unordered_set<const void*>& registry() {
  static auto* live = new std::unordered_set<const void*>();  // leaked: usable during static destruction
  return *live;
}

uint64_t hashBytes(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string hostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// The running kernel's boot id ("" where it cannot be read): every container and namespace on the machine shares
// it, and no other machine has it.
std::string bootId() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  boot >> id;
  return id;
}

// Which machine's CPUs this rank runs on: its boot id, or its host name where that cannot be read.
uint64_t kernelId() {
  std::string id = bootId();
  if (id.empty()) id = hostName();
  return hashBytes(id.data(), id.size());
}

uint64_t computeHostHash(const std::string& hostId) {
  if (!hostId.empty()) return hashBytes(hostId.data(), hostId.size());
  const std::string id = hostName() + bootId();
  return hashBytes(id.data(), id.size());
}
}  // namespace

// Many programs exit without destroying their communicators. Their peers must not take that for a failure (a WARN
// and a broken communicator during a normal shutdown), so exit() says goodbye on behalf of every live one. A
// killed process runs no atexit handler: that stays a failure.
namespace {
void announceExitOfLiveComms() {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  for (const void* p : registry()) static_cast<Communicator*>(const_cast<void*>(p))->announceExit();
}
}  // namespace

void registerComm(Communicator* comm) {
  static std::once_flag atExit;
  std::call_once(atExit, [] { std::atexit(announceExitOfLiveComms); });
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().insert(comm);
}
void unregisterComm(Communicator* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().erase(comm);
}
bool isLiveComm(const void* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  return registry().count(comm) != 0;
}

// ---- creation ----

Communicator::Communicator(int rank, int nRanks, const CommConfig& config)
    : rank_(rank), nRanks_(nRanks), config_(config), windows_(rank) {
  progress_ = std::make_unique<ProgressQueue>(
      rank, abortFlag_, [this](std::vector<prims::Work*>& works) { return runInline(works); },
      [this](const Status& st) { deviceJobFailed(st); });
  lanes_ = std::make_unique<HostLanes>(*this);
  compress_.loadDefaults();
  handle_->comm = this;
  sendSeq_.assign(static_cast<size_t>(nRanks), 0);
  recvSeq_.assign(static_cast<size_t>(nRanks), 0);
  for (std::atomic<uint64_t>& p : lastPlan_) p.store(kNoPlan, std::memory_order_relaxed);
  // NCCL binds a communicator to the calling thread's current device. Read it here, on the caller's thread (a
  // non-blocking init connects on another); a thread without a CUDA context makes a host communicator (-1).
  if (const cuda::Driver* d = cuda::driver()) {
    cuda::CUcontext ctx = nullptr;
    cuda::CUdevice dev = -1;
    if (d->ctxGetCurrent(&ctx) == cuda::kSuccess && ctx != nullptr && d->ctxGetDevice(&dev) == cuda::kSuccess) {
      cudaDev_ = dev;
    }
  }
}

Communicator::~Communicator() {
  if (initThread_.joinable()) initThread_.join();
  // A registration still running waits on its peers at most the timeout (ncclCommAbort ends it at once).
  windows_.wait();
  lanes_->clear();  // before this queue stops: a lane's job may wait for one of its jobs (stream order)
  stopProgressThread();
  {
    // CUDA host functions that run from now on (a graph replayed after destroy) find no communicator.
    std::lock_guard<std::mutex> lock(handle_->mutex);
    handle_->comm = nullptr;
  }
  device_.reset();  // every device job has finished: release the streams and free the staging
  stopBoardWatch();
  releaseDeviceBarriers();  // programs with device-side barriers are no jobs: a stream may still wait in one
  if (ipc_) ipc_->closeBoard();
  windows_.clear();
  {
    std::lock_guard<std::mutex> lock(ipcMutex_);
    ipc_.reset();
  }
  if (bootstrap_) bootstrap_->setPeerWatch(nullptr);  // it reads health_
  health_.reset();  // says goodbye to the peers, and stops ringing the doorbell before the transports unmap it
  // Transports go before the bootstrap: their destructors may still flush to peers.
  transports_.reset();
  bootstrap_.reset();
}

transport::Endpoints& Communicator::endpoints() {
  static transport::Endpoints none;  // before connect() has built the transports: no ends, as then
  return transports_ ? transports_->endpoints() : none;
}

std::unique_ptr<Communicator> Communicator::createPending(int rank, int nRanks, const CommConfig& config) {
  std::unique_ptr<Communicator> comm(new Communicator(rank, nRanks, config));
  // Release pairs with the acquire in asyncError(): a poller sees InProgress until finishInit publishes.
  comm->asyncError_.store(Errc::InProgress, std::memory_order_release);
  return comm;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const transport::UniqueId& id, int rank, int nRanks,
                                                           const CommConfig& config, const CommOptions& options) {
  std::unique_ptr<Communicator> comm(new Communicator(rank, nRanks, config));
  comm->options_ = options;
  CFX_TRY(comm->connect(id));
  return comm;
}

Status Communicator::finishInit(const transport::UniqueId& id, const CommOptions& options) {
  options_ = options;
  Status st = connect(id);
  setAsyncError(st);
  return st;
}

void Communicator::startAsyncInit(const transport::UniqueId& id, const CommOptions& options) {
  startAsyncInit([id]() -> Result<transport::UniqueId> { return id; }, options);
}

void Communicator::startAsyncInit(std::function<Result<transport::UniqueId>()> resolve, const CommOptions& options) {
  initThread_ = std::thread([this, resolve = std::move(resolve), options] {
    pthread_setname_np(pthread_self(), "cfx-init");
    log::setThreadRank(rank_);
    Result<transport::UniqueId> id = resolve();
    if (!id.ok()) {
      setAsyncError(id.status());
      return;
    }
    (void)finishInit(*id, options);
  });
}

Result<transport::UniqueId> Communicator::newGrowId(const transport::BootstrapOptions& options) {
  std::lock_guard<std::mutex> lock(growMutex_);
  if (growId_) {
    return Status::error(Errc::InvalidUsage,
                         "this communicator already handed out a grow id that no ncclCommGrow has consumed; grow with "
                         "it first (an id is single-use, and one is outstanding at a time)");
  }
  CFX_TRY_ASSIGN(transport::UniqueId id, transport::createUniqueId(options));
  growId_.emplace();
  id.encode(growId_->data());
  return id;
}

bool Communicator::takeGrowId(const transport::UniqueId& id) {
  std::array<uint8_t, transport::UniqueId::kBytes> wire{};
  id.encode(wire.data());
  std::lock_guard<std::mutex> lock(growMutex_);
  if (!growId_ || *growId_ != wire) return false;
  growId_.reset();
  return true;
}

Status Communicator::connect(const transport::UniqueId& id) {
  log::setThreadRank(rank_);
  transport::TransportRequest request;
  request.ncclNet = config_.netName;
  request.cfxNet = options_.net;
  request.protection = options_.bootstrap.wireProtection;
  request.ifName = options_.bootstrap.options.ifName;
  request.family = options_.bootstrap.options.family;
  request.abortFlag = &bootstrapAbort_;
  CFX_TRY(transport::TransportSet::check(request));
  transport::BootstrapOptions bo = options_.bootstrap.options;
  bo.abortFlag = &bootstrapAbort_;  // ncclCommAbort during a non-blocking init unblocks it
  CFX_TRY_ASSIGN(bootstrap_, transport::Bootstrap::init(id, rank_, nRanks_, bo));
  commHash_ = hashBytes(&id.magic, sizeof(id.magic), hashBytes(id.secret.data(), id.secret.size()));

  transport::PeerInfo self;
  self.rank = rank_;
  self.pid = getpid();
  self.hostHash = computeHostHash(options_.hostId);
  self.cudaDev = cudaDev_;
  gethostname(self.hostName, sizeof(self.hostName) - 1);
  if (struct stat ns{}; ::stat("/proc/self/ns/pid", &ns) == 0) self.pidNamespace = static_cast<uint64_t>(ns.st_ino);
  self.hostLanes = options_.hostLanes;
  self.checkCalls = options_.checkCalls ? 1 : 0;
  peers_.assign(static_cast<size_t>(nRanks_), transport::PeerInfo{});
  peers_[static_cast<size_t>(rank_)] = self;
  CFX_TRY(bootstrap_->allGather(peers_.data(), sizeof(transport::PeerInfo)));
  CFX_TRY(checkSettingsAgree());
  CFX_TRY(checkSecretAcrossHosts());

  CFX_TRY_ASSIGN(transports_, transport::TransportSet::connect(*bootstrap_, peers_, rank_, request));
  doorbell_ = &transports_->doorbell();
  sliceBytes_ = transports_->sliceBytes();
  ringChunkSlices_ = transports_->ringChunkSlices();
  netRails_ = transports_->netRails();
  directMinBytes_ = transports_->directMinBytes();
  directAnyBuffer_ = transports_->directAnyBuffer();
  // After the PeerInfo check, which compares what each rank was configured with: every rank resolves an automatic
  // setting from the same agreed round trip, so all get the same count.
  if (options_.hostLanes == 0) {
    options_.hostLanes = resolveHostLanes(0, transports_->netRttSeconds());
    CFX_INFO(log::Sys::Init, "rank %d: CFX_HOST_LANES automatic: %d (longest round trip between hosts %.3f ms)", rank_,
             options_.hostLanes, transports_->netRttSeconds() * 1e3);
  }
  CFX_TRY(learnPlacement());
  CFX_TRY(agreeCalibration());
  learnTopology();
  CFX_TRY(startHealth());
  CFX_TRY(setupDeviceDirect());

  int nShm = 0;
  int nNet = 0;
  for (int p = 0; p < nRanks_; ++p) {
    if (p == rank_) continue;
    const auto* end = transports_->endpoints().send[transport::kCollChannel][static_cast<size_t>(p)].get();
    if (end && std::strcmp(end->kind(), "shm") == 0) ++nShm;
    else if (end) ++nNet;
  }
  CFX_INFO(log::Sys::Init, "comm %p rank %d nranks %d: %d peers via shm, %d via %s, slice %zu B, ring chunk %d slice%s",
           static_cast<void*>(this), rank_, nRanks_, nShm, nNet, transports_->netName(), sliceBytes_, ringChunkSlices_,
           ringChunkSlices_ == 1 ? "" : "s");
  return Status();
}

// Without a secret anyone who reaches a port can join or feed a communicator; on one host that is this machine's
// users, across hosts the network. Every rank sees the same peers, so all refuse together.
Status Communicator::checkSecretAcrossHosts() const {
  if (bootstrap_->authenticated() || options_.bootstrap.allowInsecure) return Status();
  std::vector<uint64_t> hosts;
  for (const transport::PeerInfo& p : peers_) hosts.push_back(p.hostHash);
  std::sort(hosts.begin(), hosts.end());
  const auto nHosts = std::unique(hosts.begin(), hosts.end()) - hosts.begin();
  if (nHosts < 2) return Status();
  return Status::error(Errc::InvalidUsage,
                       strprintf("rank %d: this communicator spans %lld hosts but its job has no secret, so anyone "
                                 "on the network could join it or change its data: set CFX_SECRET (or "
                                 "CFX_SECRET_FILE) to the same random text on every rank, or CFX_ALLOW_INSECURE=1 "
                                 "to run unauthenticated anyway",
                                 rank_, static_cast<long long>(nHosts)));
}

// Settings that change which messages a collective exchanges, so ranks that differ would not fail at once but pair
// the wrong messages or wait for ones never sent: CFX_HOST_LANES (which lane, so which connections, an async op
// takes; a rank with 1 never makes the lanes the others wait in) and CFX_CHECK_CALLS (an extra all-gather before
// each op). Every rank sees every rank's values, so all refuse together, naming the ranks that differ from rank 0.
Status Communicator::checkSettingsAgree() const {
  const auto check = [&](const char* name, auto field) -> Status {
    const transport::PeerInfo& first = peers_.front();
    std::string odd;
    for (const transport::PeerInfo& p : peers_) {
      if (p.*field != first.*field) odd += strprintf(", rank %d has %d", p.rank, static_cast<int>(p.*field));
    }
    if (odd.empty()) return Status();
    return Status::error(Errc::InvalidUsage,
                         strprintf("rank %d: %s must be the same on every rank of a communicator, but rank 0 has %d%s",
                                   rank_, name, static_cast<int>(first.*field), odd.c_str()));
  };
  CFX_TRY(check("CFX_HOST_LANES", &transport::PeerInfo::hostLanes));
  return check("CFX_CHECK_CALLS", &transport::PeerInfo::checkCalls);
}

// Every rank's health monitor learns every other's UDP address, then starts heartbeating. A peer's pid is watched
// only where shm reached it (the same host) and it shares this rank's pid namespace (else its pid names another
// process here, or none, and a healthy peer would be declared gone).
Status Communicator::startHealth() {
  CFX_TRY_ASSIGN(health_, ft::HealthMonitor::open(rank_, nRanks_, options_.health, bootstrap_->secret(), commHash_,
                                                  bootstrap_->localAddress()));
  std::vector<sockaddr_storage> addrs(static_cast<size_t>(nRanks_));
  addrs[static_cast<size_t>(rank_)] = health_->address();
  CFX_TRY(bootstrap_->allGather(addrs.data(), sizeof(sockaddr_storage)));
  std::vector<ft::PeerIdentity> ids(static_cast<size_t>(nRanks_));
  for (int p = 0; p < nRanks_; ++p) {
    ft::PeerIdentity& id = ids[static_cast<size_t>(p)];
    const transport::PeerInfo& info = peers_[static_cast<size_t>(p)];
    id.pid = info.pid;
    id.host.assign(info.hostName, strnlen(info.hostName, sizeof(info.hostName)));
    id.watchPid =
        p != rank_ && transports_->sharesMemory(rank_, p) && transport::pidVisible(peers_[static_cast<size_t>(rank_)], info);
    id.address = addrs[static_cast<size_t>(p)];
  }
  // A revoke by any rank stops this rank's work too (NCCL: ncclCommRevoke stops all in-flight operations).
  health_->setRevokeSink([this](const ft::RevokeNotice& notice) { revokedRemotely(notice); });
  CFX_TRY(health_->start(std::move(ids), doorbell_, [this](const ft::Failure& f) {
    setAsyncError(Status::error(Errc::RemoteError, f.describe()));
    releaseDeviceBarriers();  // a stream waiting for the failed rank at a device-side barrier goes on
  }));
  // A bootstrap wait (a split, a shrink, the lanes' setup) ends once heartbeats find the peer it waits for dead or
  // stopped, or any peer where every rank must answer, instead of at the bootstrap's timeout. Cleared before
  // health_ goes (the destructor).
  bootstrap_->setPeerWatch([health = health_.get()](int peer) -> Status {
    if (health->failedCount() == 0) return Status();
    for (const ft::Failure& f : health->failures()) {
      if (peer < 0 || f.rank == peer) return Status::error(Errc::RemoteError, f.describe());
    }
    return Status();
  });
  return Status();
}

void Communicator::announceExit() {
  // Acquire pairs with setAsyncError's release: once init has finished, health_ is no longer being assigned.
  // Stopped, not only announced: OpenSSL's own exit handler runs after this one, and a heartbeat signed after it
  // would crash the exiting process.
  if (asyncError() != Errc::InProgress && health_) health_->stop();
  lanes_->announceExit();
}

// The planner's picture of where ranks run: which ranks share a host (from the host hashes every rank exchanged,
// so every rank builds the same picture and makes the same plans), placed on a topology view and priced once.
// The view is NCCL_TOPO_FILE's when given (its host h is the h-th distinct host in rank order, unless the file
// places ranks itself), else one plain host per distinct host joined through a switch with the default class
// figures: local discovery cannot be used to plan, as it differs from host to host and ranks must agree.
// A view that cannot be used is a WARN, and ops are then planned without prices (the ring family).
Status Communicator::agreeCalibration() {
  calibration_.reset();
  if (!options_.topology.calibrate) return Status();
  CFX_TRY_ASSIGN(const topo::TopologyView defaults, topo::TopologyView::create(topo::TopologyData{}));
  const topo::Calibration mine = topo::measureLocalCalibration(defaults);
  // One fixed-size record per rank: per class, whether it was measured and its figures.
  struct Wire {
    double gbps[topo::kNumLinkClasses];
    double latencyUs[topo::kNumLinkClasses];
    uint8_t measured[topo::kNumLinkClasses];
  };
  std::vector<Wire> all(static_cast<size_t>(nRanks_), Wire{});
  Wire& own = all[static_cast<size_t>(rank_)];
  for (size_t c = 0; c < topo::kNumLinkClasses; ++c) {
    if (!mine.measured[c]) continue;
    own.gbps[c] = mine.measured[c]->gbps;
    own.latencyUs[c] = mine.measured[c]->latencyUs;
    own.measured[c] = 1;
  }
  CFX_TRY(bootstrap_->allGather(all.data(), sizeof(Wire)));
  std::vector<topo::Calibration> perRank(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    for (size_t c = 0; c < topo::kNumLinkClasses; ++c) {
      if (all[r].measured[c]) perRank[r].measured[c] = topo::LinkFigures{all[r].gbps[c], all[r].latencyUs[c]};
    }
  }
  calibration_ = topo::agreeOn(perRank);
  const size_t mem = static_cast<size_t>(topo::LinkClass::Memory);
  if (calibration_->measured[mem] && mine.measured[mem]) {
    CFX_INFO(log::Sys::Tuning, "rank %d: CFX_TOPO_CALIBRATE: memory class %.2f GB/s, the median of %d ranks (this "
             "rank measured %.2f)", rank_, calibration_->measured[mem]->gbps, nRanks_, mine.measured[mem]->gbps);
  }
  return Status();
}

Result<topo::TopologyView> Communicator::planningView() const {
  topo::TopologyOptions topology = options_.topology;
  if (rank_ != 0) topology.dumpFile.clear();  // one dump per communicator, as NCCL does
  topology.calibrate = false;                 // a local measurement: ranks would disagree; they agreed instead
  topology.agreed = calibration_;
  std::vector<topo::RankPlace> places(static_cast<size_t>(nRanks_));
  for (int r = 0; r < nRanks_; ++r) places[static_cast<size_t>(r)].host = layout_.hostOf[static_cast<size_t>(r)];
  std::optional<topo::TopologyView> built;
  if (!topology.loadFile.empty() || !topology.dumpFile.empty()) {
    CFX_TRY_ASSIGN(built, topo::buildTopology(topology));  // writes the dump when asked
  }
  if (!topology.loadFile.empty()) {
    if (built->nRanks() == nRanks_) return std::move(*built);
    if (built->nHosts() < layout_.nHosts()) {
      return Status::error(Errc::InvalidArgument,
                           strprintf("NCCL_TOPO_FILE %s declares %d hosts but the ranks run on %d",
                                     topology.loadFile.c_str(), built->nHosts(), layout_.nHosts()));
    }
    return built->withRanks(std::move(places));
  }
  topo::TopologyData data;
  data.hosts.resize(static_cast<size_t>(layout_.nHosts()));
  data.ranks = std::move(places);
  CFX_TRY_ASSIGN(topo::TopologyView plain, topo::TopologyView::create(std::move(data)));
  if (calibration_) return plain.calibrated(*calibration_);
  return plain;
}

void Communicator::learnTopology() {
  std::vector<uint64_t> hostIds;
  for (const transport::PeerInfo& p : peers_) hostIds.push_back(p.hostHash);
  layout_ = coll::Layout::fromHostIds(hostIds);
  fabric_.reset();
  for (std::atomic<uint64_t>& p : lastPlan_) p.store(kNoPlan, std::memory_order_relaxed);
  Result<topo::TopologyView> view = planningView();
  if (!view.ok()) {
    CFX_WARN("rank %d: topology unusable for planning (%s); ops are planned without the cost model", rank_,
             view.status().message().c_str());
    return;
  }
  // Where the view places ranks below hosts (a GPU, a NUMA node: NCCL_TOPO_FILE), or on other hosts than their
  // host ids say (a file declaring the shape an emulation runs), the algorithms follow the view: it is what the
  // user declared, and what the planner prices.
  layout_ = coll::layoutOf(view.value());
  fabric_ = coll::fabricOf(view.value(), layout_, netRails_);
  fabric_->stepUs = coll::stepOverheadUs(ranksPerCpu_);
  const coll::Fabric& f = *fabric_;
  const std::string rails = netRails_ > 1 ? strprintf(", striped over %d rails", netRails_) : std::string();
  CFX_INFO(log::Sys::Tuning,
           "rank %d: %d hosts x %d ranks%s; per-flow figures%s: ring %.2f GB/s %.1f us, biring %.2f GB/s, host %.2f "
           "GB/s, cross-host %.2f GB/s %.1f us; %.0f us per step (%.2f ranks per CPU)",
           rank_, f.hosts, f.localRanks, layout_.uniform() ? "" : " (uneven)", rails.c_str(), f.ring.gbps,
           f.ring.latencyUs, f.biRing.gbps, f.host.gbps, f.cross.gbps, f.cross.latencyUs, f.stepUs, ranksPerCpu_);
  if (f.hier3) {
    CFX_INFO(log::Sys::Tuning,
             "rank %d: 3 levels, %d devices per host x %d ranks per device; per-flow figures: device %.2f GB/s, "
             "between devices %.2f GB/s, cross-host %.2f GB/s %.1f us",
             rank_, f.devices, f.deviceRanks, f.device.gbps, f.midHost.gbps, f.crossDev.gbps, f.crossDev.latencyUs);
  }
}

coll::PlanRequest Communicator::planRequest(coll::Collective coll, size_t count, DataType type) const {
  size_t bytes = count * dataTypeSize(type);
  switch (coll) {
    case coll::Collective::AllReduce:
    case coll::Collective::Broadcast:
    case coll::Collective::Reduce:
    case coll::Collective::BroadcastDelta:
    case coll::Collective::Scan: break;
    default: bytes *= static_cast<size_t>(nRanks_);  // count is per rank: the largest buffer holds them all
  }
  return coll::PlanRequest{coll,     bytes,           nRanks_,          sliceBytes_,
                           fabric(), directMinBytes_, directAnyBuffer_, ringChunkSlices_};
}

coll::Plan Communicator::plan(const coll::PlanRequest& req) const {
  // The plan is a pure function of the request, and the requests of one communicator differ only in collective
  // and size (planRequest), while programs repeat the same op thousands of times: planning each anew was a tenth
  // of a 2-rank 4 KiB all-to-all. So the last plan per collective is kept. Relaxed: two threads racing here both
  // store a correct plan.
  coll::Plan plan;
  std::atomic<uint64_t>& slot = lastPlan_[static_cast<size_t>(req.coll)];
  // Compressed requests are not cached (the plan holds the op's own codec, and such ops are few and large), nor
  // ordered scans (their combine's rate is priced, and they are keyed by collective only).
  const bool cacheable = req.codec == nullptr && !req.orderedCombine && req.bytes < (uint64_t{1} << 56) &&
                         req.nRanks == nRanks_ &&
                         req.fabric == fabric() &&
                         req.sliceBytes == sliceBytes_ && req.directMinBytes == directMinBytes_ &&
                         req.directAnyBuffer == directAnyBuffer_;
  const uint64_t cached = slot.load(std::memory_order_relaxed);
  if (cacheable && cached != kNoPlan && cached >> 8 == req.bytes) {
    plan.algorithm = static_cast<coll::Algorithm>(cached & 0xff);
  } else {
    plan = coll::choosePlan(req, options_.planner);
    if (cacheable) slot.store((uint64_t{req.bytes} << 8) | static_cast<uint64_t>(plan.algorithm), std::memory_order_relaxed);
  }
  plan.layout = &layout_;
  return plan;
}

// Which CPU every rank is pinned to decides how a waiting rank yields (prims::yieldInterval): a peer on our CPU
// can only run once we give the CPU up.
Status Communicator::learnPlacement() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  prims::Placement placement;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    placement.allowedCpus = CPU_COUNT(&mask);
    if (placement.allowedCpus == 1) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &mask)) placement.pinnedCpu = c;
      }
    }
  }
  // Per rank: its pinned CPU, the kernel it runs on and the CPUs it may use. The kernel (its boot id), not the host
  // id, says which ranks share CPUs: containers and network namespaces on one machine are separate hosts that
  // share its cores.
  struct Wire {
    int64_t pinnedCpu;
    uint64_t kernel;
    cpu_set_t cpus;
  };
  std::vector<Wire> all(static_cast<size_t>(nRanks_), Wire{});
  Wire& own = all[static_cast<size_t>(rank_)];
  own.pinnedCpu = placement.pinnedCpu;
  own.kernel = kernelId();
  if (CPU_COUNT(&mask) == 0) {  // no affinity to read: every online CPU
    for (long c = 0; c < std::min<long>(sysconf(_SC_NPROCESSORS_ONLN), CPU_SETSIZE); ++c) CPU_SET(c, &mask);
  }
  own.cpus = mask;
  CFX_TRY(bootstrap_->allGather(all.data(), sizeof(Wire)));
  const uint64_t host = peers_[static_cast<size_t>(rank_)].hostHash;
  for (int p = 0; p < nRanks_; ++p) {
    if (p == rank_ || peers_[static_cast<size_t>(p)].hostHash != host) continue;
    ++placement.localRanks;
    placement.peerPinnedCpus.push_back(static_cast<int>(all[static_cast<size_t>(p)].pinnedCpu));
  }
  yieldEvery_ = prims::yieldInterval(placement);
  // The most crowded kernel's ranks over the CPUs any of them may use: above 1, some rank waits for a CPU at every
  // step, which the planner prices (coll::stepOverheadUs). Every rank computes it from the same records.
  struct Machine {
    int ranks = 0;
    cpu_set_t cpus{};  // the union of its ranks' affinities
  };
  std::unordered_map<uint64_t, Machine> machines;
  for (Wire& w : all) {
    Machine& m = machines[w.kernel];
    ++m.ranks;
    CPU_OR(&m.cpus, &m.cpus, &w.cpus);
  }
  ranksPerCpu_ = 0;
  for (const auto& [kernel, m] : machines) {
    ranksPerCpu_ = std::max(ranksPerCpu_, static_cast<double>(m.ranks) / std::max(CPU_COUNT(&m.cpus), 1));
  }
  CFX_INFO(log::Sys::Init,
           "rank %d: %s, %d ranks on this host, %d CPUs allowed: a waiting rank yields %s; %.2f ranks per CPU on the "
           "most crowded machine",
           rank_, placement.pinnedCpu >= 0 ? strprintf("pinned to CPU %d", placement.pinnedCpu).c_str() : "not pinned",
           placement.localRanks, placement.allowedCpus,
           yieldEvery_ == 0 ? "never" : strprintf("every %d failed polls", yieldEvery_).c_str(), ranksPerCpu_);
  return Status();
}

// ---- stopping ----

void Communicator::abort() {
  // seq_cst pairs with runInline(): running and queued work stops at its next poll.
  abortFlag_.store(true, std::memory_order_seq_cst);
  bootstrapAbort_.store(true, std::memory_order_release);  // read by the bootstrap's waits
  // Before this queue stops: a job here may wait for a lane's job (stream order), which then fails fast.
  lanes_->abort();
  if (health_) health_->stop();  // peers stop expecting heartbeats; failures stay readable
  if (bootstrap_) bootstrap_->abort();
  if (transports_) transports_->abort();  // fails every network end now; no flush to dead peers at destruction
  if (doorbell_) doorbell_->ring();
  stopProgressThread();
  if (device_) device_->releaseAll();  // streams waiting on work that will never run go on
  releaseDeviceBarriers();
  // A thread blocked in this communicator (the user's, while a watchdog aborts) leaves within one executor
  // poll once woken; the bound keeps abort from ever hanging even if that thread is descheduled for long.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (inlineActive_.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < until) {
    if (doorbell_) doorbell_->ring();  // wake a sleeping executor so it sees the flag now
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace cfx::core
