// SPDX-License-Identifier: Apache-2.0
// The UCX transport's worker, endpoints, hello and proxy thread (transport layer).
#include "transport/ucx/ucx_proxy.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "common/crypto.h"
#include "common/log.h"
#include "common/thread_affinity.h"
#include "common/wire.h"
#include "transport/owner_drive.h"
#include "transport/ucx/ucx_hello.h"

namespace cfx::transport::ucx {

namespace {
constexpr int kIdleWaitMs = 100;  // the longest the thread sleeps without looking at its stop flag
// The event fd does not cover everything: a send UCX queued because the peer's shared-memory FIFO was full, or a
// rendezvous step, can become possible without any event reaching this worker (measured: 64 MiB all-reduces over
// sm,cma 4-6x slower with only the idle wait). So while traffic is in flight, or was recently, sleep at most this.
constexpr int kBusyWaitMs = 1;
constexpr std::chrono::milliseconds kBusyWindow{50};
constexpr int kIdlePolls = 32;    // unproductive progress rounds before the thread arms the worker and sleeps
constexpr uint64_t kFullMask = ~uint64_t{0};
constexpr std::chrono::milliseconds kCloseBound{2000};  // force-closing endpoints never takes longer

std::string ucsError(ucs_status_t status) { return ucs_status_string(status); }
}  // namespace

uint64_t makeTag(uint32_t key24, TagKind kind, int channel, int rank, uint64_t seq) {
  return (uint64_t{key24 & 0xFFFFFFu} << 40) | (static_cast<uint64_t>(kind) << 38) |
         (static_cast<uint64_t>(channel & 3) << 36) | (static_cast<uint64_t>(rank & (kMaxRanks - 1)) << 16) |
         (seq & 0xFFFFu);
}

// What a completion callback needs to find its slot. One per slot and direction, preallocated.
struct UcxProxy::RequestContext {
  LinkState* state = nullptr;
  uint64_t index = 0;     // slot index (mod nSlots) for data; unused for credits
  void* request = nullptr;  // the outstanding request, for cancelling at close; null when none
};

struct UcxProxy::PeerState {
  int rank = -1;
  std::string description;
  ucp_ep_h ep = nullptr;
  UcxProxy* proxy = nullptr;
  std::array<LinkState*, kNumChannels> links{};
  bool failed = false;  // proxy thread (and the error callback it runs)
};

// The proxy's bookkeeping for one link; proxy thread only (and setup/teardown on the owner, never concurrently).
struct UcxProxy::LinkState {
  std::shared_ptr<UcxLink> link;
  PeerState* peer = nullptr;
  int nSlots = 0;
  // Send side: slots handed to UCX, the prefix whose sends completed (the ring's tail), completions per slot.
  uint64_t sendIssued = 0;
  uint64_t sendDone = 0;
  std::vector<uint8_t> sendComplete;
  std::vector<RequestContext> sendCtx;
  uint64_t peerReleased = 0;  // credits: slots the peer's owner has released in total
  // Receive side: receives posted, the prefix published to the owner (the ring's head), completions per slot.
  uint64_t recvPosted = 0;
  uint64_t recvPublished = 0;
  std::vector<uint8_t> recvComplete;
  std::vector<size_t> recvLength;
  std::vector<RequestContext> recvCtx;
  // Credits we told the peer about, and the messages carrying them.
  uint64_t releasedSent = 0;
  std::array<uint8_t, 8> creditOut{};  // the buffer of the outstanding credit send (common/wire.h's u64)
  std::array<uint8_t, 8> creditIn{};   // the buffer of the posted credit receive
  RequestContext creditSendCtx;
  RequestContext creditRecvCtx;
  bool creditRecvDone = true;  // post a credit receive at the next step
};

Result<UcxInstance> UcxInstance::open(bool eagerSlots) {
  UcxInstance u;
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);  // UCX_* from the environment (UCX_TLS, ...)
  if (st != UCS_OK) {
    return Status::error(Errc::SystemError, "ucx: ucp_config_read(): " + ucsError(st) + "; check the UCX_* variables");
  }
  if (eagerSlots) {
    // Every slot lands in a receive posted for it (credits), so eager sends are never buffered as unexpected;
    // rendezvous would only add its RTS/RTR round trips, each needing the peer's proxy awake.
    st = ucp_config_modify(config, "RNDV_THRESH", "inf");
    if (st != UCS_OK) {
      ucp_config_release(config);
      return Status::error(Errc::SystemError, "ucx: ucp_config_modify(RNDV_THRESH=inf): " + ucsError(st) +
                                                  "; set CFX_UCX_EAGER=0");
    }
    CFX_INFO(log::Sys::Net, "ucx: slots go eagerly (RNDV_THRESH=inf; CFX_UCX_EAGER)");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = "conflux";
  ucp_context_h context = nullptr;
  st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    return Status::error(Errc::SystemError,
                         "ucx: ucp_init(): " + ucsError(st) + "; check UCX_TLS and UCX_NET_DEVICES (ucx_info -d lists "
                         "what this host offers)");
  }
  u.context.reset(context);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // Serialized: setup and teardown run on the owner thread, everything between on the proxy thread, never both.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h worker = nullptr;
  st = ucp_worker_create(context, &wp, &worker);
  if (st != UCS_OK) return Status::error(Errc::SystemError, "ucx: ucp_worker_create(): " + ucsError(st));
  u.worker.reset(worker);
  st = ucp_worker_get_efd(worker, &u.eventFd);
  if (st != UCS_OK) {
    return Status::error(Errc::SystemError, "ucx: ucp_worker_get_efd(): " + ucsError(st) +
                                                "; a UCX transport in UCX_TLS cannot wake a sleeping thread");
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(worker, &address, &length);
  if (st != UCS_OK) return Status::error(Errc::SystemError, "ucx: ucp_worker_get_address(): " + ucsError(st));
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  u.address.assign(bytes, bytes + length);
  ucp_worker_release_address(worker, address);
  return u;
}

UcxProxy::UcxProxy(UcxInstance instance, int rank, uint32_t key24, Doorbell& doorbell)
    : ucx_(std::move(instance)), rank_(rank), key24_(key24), doorbell_(doorbell) {}

Result<std::unique_ptr<UcxProxy>> UcxProxy::create(UcxInstance instance, const Setup& setup, Doorbell& doorbell) {
  std::unique_ptr<UcxProxy> proxy(new UcxProxy(std::move(instance), setup.rank, setup.key24, doorbell));
  proxy->inlineProgress_ = setup.inlineProgress;
  CFX_TRY_ASSIGN(proxy->waker_, ProxyWaker::create("ucx"));
  proxy->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (proxy->epoll_ < 0) {
    return Status::error(Errc::SystemError, strprintf("ucx: epoll_create1(): %s", std::strerror(errno)));
  }
  for (int fd : {proxy->ucx_.eventFd, proxy->waker_->fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(proxy->epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::error(Errc::SystemError, strprintf("ucx: epoll_ctl(): %s", std::strerror(errno)));
    }
  }
  CFX_TRY(proxy->openEndpoints(setup));
  CFX_TRY(proxy->hello(setup));
  return proxy;
}

namespace {

void onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<UcxProxy::PeerState*>(arg);
  peer->failed = true;
  for (UcxProxy::LinkState* s : peer->links) {
    if (s == nullptr) continue;
    s->link->fail(Status::error(Errc::RemoteError,
                                strprintf("ucx: connection to %s failed: %s; check that process for its own error",
                                          peer->description.c_str(), ucs_status_string(status))));
  }
}

}  // namespace

Status UcxProxy::openEndpoints(const Setup& setup) {
  const int nRanks = static_cast<int>(setup.peerAddresses.size());
  peers_.resize(static_cast<size_t>(nRanks));
  for (int p = 0; p < nRanks; ++p) {
    const std::vector<uint8_t>& address = setup.peerAddresses[static_cast<size_t>(p)];
    if (p == rank_ || address.empty()) continue;
    auto peer = std::make_unique<PeerState>();
    peer->rank = p;
    peer->description = setup.peerDescriptions[static_cast<size_t>(p)];
    peer->proxy = this;
    for (int ch = 0; ch < kNumChannels; ++ch) {
      auto link = std::make_shared<UcxLink>(p, ch, strprintf("%s, channel %d", peer->description.c_str(), ch),
                                            setup.geometry, waker_, setup.probePids[static_cast<size_t>(p)]);
      if (inlineProgress_) link->setGate(gate_);
      auto state = std::make_unique<LinkState>();
      state->link = link;
      state->peer = peer.get();
      state->nSlots = setup.geometry.nSlots;
      const auto n = static_cast<size_t>(state->nSlots);
      state->sendComplete.assign(n, 0);
      state->recvComplete.assign(n, 0);
      state->recvLength.assign(n, 0);
      state->sendCtx.resize(n);
      state->recvCtx.resize(n);
      for (size_t i = 0; i < n; ++i) {
        state->sendCtx[i] = RequestContext{state.get(), i, nullptr};
        state->recvCtx[i] = RequestContext{state.get(), i, nullptr};
      }
      state->creditSendCtx.state = state.get();
      state->creditRecvCtx.state = state.get();
      peer->links[static_cast<size_t>(ch)] = state.get();
      links_.push_back(std::move(link));
      states_.push_back(std::move(state));
    }
    // Peer-failure handling (UCP_ERR_HANDLING_MODE_PEER) for peers on other hosts. UCX 1.13's shared-memory
    // transports (posix, sysv, cma) cannot report a failed peer, so asking for it on a same-host pair would
    // leave UCX_TLS=sm,cma with no usable transport (and UCX logging errors); a same-host peer's death is
    // noticed by the ends' process probe instead (UcxLink::check()), whatever transport carries it, or, for a peer
    // in another pid namespace, by the health monitor's heartbeats.
    const bool sameHost = setup.sameHost[static_cast<size_t>(p)] != 0;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
    ep.err_mode = sameHost ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = onPeerError;
    ep.err_handler.arg = peer.get();
    const ucs_status_t st = ucp_ep_create(ucx_.worker.get(), &ep, &peer->ep);
    if (st != UCS_OK) {
      return Status::error(Errc::RemoteError, strprintf("ucx: cannot open an endpoint to %s: %s (UCX_TLS may name no "
                                                        "transport both hosts share)",
                                                        peer->description.c_str(), ucsError(st).c_str()));
    }
    peers_[static_cast<size_t>(p)] = std::move(peer);
  }
  return Status();
}

namespace {

// Polls a request without a callback until done; frees it. Returns its status, or UCS_INPROGRESS.
ucs_status_t pollRequest(void*& request) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  const ucs_status_t st = ucp_request_check_status(request);
  if (st == UCS_INPROGRESS) return st;
  ucp_request_free(request);
  request = nullptr;
  return st;
}

}  // namespace

Status UcxProxy::hello(const Setup& setup) {
  struct Pending {
    PeerState* peer;
    crypto::Digest out{};
    crypto::Digest in{};
    void* send = nullptr;
    void* recv = nullptr;
    bool sendDone = false;
    bool recvDone = false;
  };
  std::vector<Pending> pending;
  for (auto& peer : peers_) {
    if (peer) pending.push_back(Pending{peer.get()});
  }
  for (Pending& h : pending) {
    CFX_TRY_ASSIGN(h.out, helloDigest(setup.secret, rank_, h.peer->rank,
                                      setup.peerAddresses[static_cast<size_t>(h.peer->rank)]));
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    h.recv = ucp_tag_recv_nbx(ucx_.worker.get(), h.in.data(), h.in.size(),
                              makeTag(key24_, TagKind::Hello, 0, h.peer->rank, 0), kFullMask, &rp);
    ucp_request_param_t sp{};
    sp.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    h.send = ucp_tag_send_nbx(h.peer->ep, h.out.data(), h.out.size(), makeTag(key24_, TagKind::Hello, 0, rank_, 0),
                              &sp);
  }
  // A stuck hello must not leave requests pointing at `pending` behind: cancel whatever is left on every exit.
  struct Cancel {
    UcxProxy* self;
    std::vector<Pending>& pending;
    ~Cancel() {
      for (Pending& h : pending) {
        for (void** r : {&h.send, &h.recv}) {
          if (*r == nullptr || UCS_PTR_IS_ERR(*r)) continue;
          ucp_request_cancel(self->ucx_.worker.get(), *r);
          const Deadline bound(std::chrono::milliseconds(500));
          while (ucp_request_check_status(*r) == UCS_INPROGRESS && !bound.expired()) {
            ucp_worker_progress(self->ucx_.worker.get());
          }
          ucp_request_free(*r);
          *r = nullptr;
        }
      }
    }
  } cancel{this, pending};

  const std::vector<uint8_t>& myAddress = ucx_.address;
  for (;;) {
    while (ucp_worker_progress(ucx_.worker.get()) != 0) {
    }
    size_t done = 0;
    for (Pending& h : pending) {
      if (h.peer->failed) return h.peer->links[0]->link->status();
      if (!h.sendDone) {
        const ucs_status_t st = pollRequest(h.send);
        if (st != UCS_INPROGRESS && st != UCS_OK) {
          return Status::error(Errc::RemoteError, strprintf("ucx: sending the hello to %s failed: %s",
                                                            h.peer->description.c_str(), ucsError(st).c_str()));
        }
        h.sendDone = st == UCS_OK;
      }
      if (!h.recvDone) {
        const ucs_status_t st = pollRequest(h.recv);
        if (st != UCS_INPROGRESS && st != UCS_OK) {
          return Status::error(Errc::RemoteError, strprintf("ucx: receiving the hello from %s failed: %s",
                                                            h.peer->description.c_str(), ucsError(st).c_str()));
        }
        if (st == UCS_OK) {
          // UCX fails a longer message with MESSAGE_TRUNCATED, and a shorter one leaves zeros that no HMAC matches.
          CFX_TRY(checkHello(h.in, setup.secret, h.peer->rank, rank_, myAddress, h.peer->description));
          h.recvDone = true;
        }
      }
      done += (h.sendDone && h.recvDone) ? 1 : 0;
    }
    if (done == pending.size()) return Status();
    if (setup.deadline.expired()) {
      std::string missing;
      for (Pending& h : pending) {
        if (!(h.sendDone && h.recvDone)) missing += (missing.empty() ? "" : "; ") + h.peer->description;
      }
      return Status::error(Errc::Timeout, "ucx: timed out connecting to " + missing +
                                              " (CFX_UCX_CONNECT_TIMEOUT_MS); check UCX_TLS and UCX_NET_DEVICES on "
                                              "both hosts");
    }
    waitIdle(kBusyWaitMs);
  }
}

// Sleeps until the worker or an owner has something for us, or timeoutMs passed.
void UcxProxy::waitIdle(int timeoutMs) {
  const ucs_status_t st = ucp_worker_arm(ucx_.worker.get());
  if (st == UCS_ERR_BUSY) return;  // events arrived meanwhile: progress again
  sleepArmed(timeoutMs);
}

void UcxProxy::sleepArmed(int timeoutMs) {
  std::array<epoll_event, 2> events{};
  const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeoutMs);
  for (int i = 0; i < n; ++i) {
    if (events[static_cast<size_t>(i)].data.fd == waker_->fd()) waker_->drain();
  }
}

std::shared_ptr<UcxLink> UcxProxy::link(int peer, int channel) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !peers_[static_cast<size_t>(peer)]) return nullptr;
  return peers_[static_cast<size_t>(peer)]->links[static_cast<size_t>(channel)]->link;
}

Status UcxProxy::start() {
  {
    std::lock_guard<std::mutex> lock(gate_->mutex);
    gate_->drive = [this] { driveInline(); };
  }
  thread_ = std::thread([this] { run(); });
  return Status();
}

void UcxProxy::driveInline() {
  bool progressed = step();
  unsigned events = 0;
  while (ucp_worker_progress(ucx_.worker.get()) != 0) ++events;  // the completion callbacks run here now
  if (events != 0) progressed |= step();
  // A proxy asleep on its armed worker may have lost the events this round consumed (ucx_proxy.h).
  if ((progressed || events != 0) && gate_->proxyAsleep.load(std::memory_order_relaxed)) waker_->wake();
}

UcxProxy::~UcxProxy() {
  stop(std::chrono::milliseconds(0));
  // The worker goes first, while the peer and link state its callbacks point to still exists.
  ucx_.worker.reset();
  ucx_.context.reset();
  if (epoll_ >= 0) ::close(epoll_);
}

namespace {

void onSendDone(void* request, ucs_status_t status, void* userData) {
  auto* ctx = static_cast<UcxProxy::RequestContext*>(userData);
  ctx->request = nullptr;
  ucp_request_free(request);
  ctx->state->sendComplete[ctx->index] = 1;
  if (status != UCS_OK && status != UCS_ERR_CANCELED) {
    ctx->state->link->fail(Status::error(Errc::RemoteError,
                                         strprintf("ucx: sending to %s failed: %s; check that process for its own "
                                                   "error",
                                                   ctx->state->link->description().c_str(), ucs_status_string(status))));
  }
}

void recvFinished(UcxProxy::RequestContext* ctx, ucs_status_t status, const ucp_tag_recv_info_t* info) {
  if (status == UCS_ERR_CANCELED) return;
  if (status != UCS_OK) {
    ctx->state->link->fail(Status::error(Errc::RemoteError,
                                         strprintf("ucx: receiving from %s failed: %s (a message larger than a slot "
                                                   "means ranks disagree on CFX_UCX_SLOT_BYTES)",
                                                   ctx->state->link->description().c_str(), ucs_status_string(status))));
    return;
  }
  ctx->state->recvComplete[ctx->index] = 1;
  ctx->state->recvLength[ctx->index] = info->length;
}

void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* userData) {
  auto* ctx = static_cast<UcxProxy::RequestContext*>(userData);
  ctx->request = nullptr;
  ucp_request_free(request);
  recvFinished(ctx, status, info);
}

void onCreditSent(void* request, ucs_status_t status, void* userData) {
  auto* ctx = static_cast<UcxProxy::RequestContext*>(userData);
  ctx->request = nullptr;
  ucp_request_free(request);
  if (status != UCS_OK && status != UCS_ERR_CANCELED) {
    ctx->state->link->fail(Status::error(Errc::RemoteError, strprintf("ucx: sending credits to %s failed: %s",
                                                                      ctx->state->link->description().c_str(),
                                                                      ucs_status_string(status))));
  }
}

void creditFinished(UcxProxy::RequestContext* ctx, ucs_status_t status) {
  if (status == UCS_ERR_CANCELED) return;
  if (status != UCS_OK) {
    ctx->state->link->fail(Status::error(Errc::RemoteError, strprintf("ucx: receiving credits from %s failed: %s",
                                                                      ctx->state->link->description().c_str(),
                                                                      ucs_status_string(status))));
    return;
  }
  ctx->state->peerReleased = std::max(ctx->state->peerReleased, wire::getU64(ctx->state->creditIn.data()));
  ctx->state->creditRecvDone = true;
}

void onCreditReceived(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* userData) {
  auto* ctx = static_cast<UcxProxy::RequestContext*>(userData);
  ctx->request = nullptr;
  ucp_request_free(request);
  creditFinished(ctx, status);
}

// Records a request that UCX could not even start, or the request to wait for. An operation that completed at
// once returns null and runs no callback (the callers finish it); otherwise the callback runs later, from
// ucp_worker_progress, and clears ctx.request. (UCP_OP_ATTR_FLAG_NO_IMM_CMPL is not used: with it UCX runs the
// callback, which frees the request, before returning that request.)
bool started(void* request, UcxProxy::RequestContext& ctx, UcxLink& link, const char* what) {
  if (UCS_PTR_IS_ERR(request)) {
    link.fail(Status::error(Errc::RemoteError, strprintf("ucx: %s %s failed: %s", what, link.description().c_str(),
                                                         ucs_status_string(UCS_PTR_STATUS(request)))));
    return false;
  }
  ctx.request = request;
  return true;
}

}  // namespace

bool UcxProxy::stepSend(LinkState& s) {
  SlotRing& ring = s.link->sendRing();
  const auto n = static_cast<uint64_t>(s.nSlots);
  bool progressed = false;
  // Acquire pairs with ProxiedSendEnd::post()'s release store: posted payloads and headers are visible.
  const uint64_t posted = ring.head.load(std::memory_order_acquire);
  while (!s.link->failed() && s.sendIssued < posted && s.sendIssued < s.peerReleased + n) {
    const uint64_t seq = s.sendIssued;
    const size_t bytes = static_cast<size_t>(ring.header(seq).bytes);
    encodeFrameHeader(ring, seq);
    RequestContext& ctx = s.sendCtx[seq % n];
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = onSendDone;
    p.user_data = &ctx;
    void* r = ucp_tag_send_nbx(s.peer->ep, frame(ring, seq), kFrameHeaderBytes + bytes,
                               makeTag(key24_, TagKind::Data, s.link->channel(), rank_, seq), &p);
    if (!started(r, ctx, *s.link, "sending to")) break;
    if (r == nullptr) s.sendComplete[seq % n] = 1;
    ++s.sendIssued;
  }
  const uint64_t before = s.sendDone;
  while (s.sendDone < s.sendIssued && s.sendComplete[s.sendDone % n] != 0) {
    s.sendComplete[s.sendDone % n] = 0;
    ++s.sendDone;
  }
  if (s.sendDone != before) {
    // Release pairs with ProxiedSendEnd::tryAcquire()'s acquire load: the owner may now overwrite these slots.
    ring.tail.store(s.sendDone, std::memory_order_release);
    progressed = true;
  }
  return progressed;
}

bool UcxProxy::stepRecv(LinkState& s) {
  SlotRing& ring = s.link->recvRing();
  const auto n = static_cast<uint64_t>(s.nSlots);
  bool progressed = false;
  // Publish completed receives in slot order.
  const uint64_t before = s.recvPublished;
  while (s.recvPublished < s.recvPosted && s.recvComplete[s.recvPublished % n] != 0) {
    const uint64_t seq = s.recvPublished;
    const size_t length = s.recvLength[seq % n];
    const SlotHeader header = decodeFrameHeader(ring, seq);
    const uint64_t bytes = header.bytes;
    if (length < kFrameHeaderBytes || bytes > ring.slotBytes() || length != kFrameHeaderBytes + bytes) {
      s.link->fail(Status::error(Errc::RemoteError,
                                 strprintf("ucx: %s sent a malformed frame (%zu bytes, header says %llu): the peer "
                                           "runs an incompatible version",
                                           s.link->description().c_str(), length,
                                           static_cast<unsigned long long>(bytes))));
      progressed = true;
      break;
    }
    ring.header(seq) = header;
    s.recvComplete[seq % n] = 0;
    ++s.recvPublished;
  }
  if (s.recvPublished != before) {
    // Release pairs with ProxiedRecvEnd::tryPeek()'s acquire load: the whole frame is in the slot, its header read.
    ring.head.store(s.recvPublished, std::memory_order_release);
    progressed = true;
  }
  if (s.link->failed()) return progressed;
  // Post a receive on every slot the owner has given back (and on all of them at the start).
  // Acquire pairs with ProxiedRecvEnd::release()'s release store: the owner is done reading those slots.
  const uint64_t released = ring.tail.load(std::memory_order_acquire);
  while (s.recvPosted < released + n) {
    const uint64_t seq = s.recvPosted;
    RequestContext& ctx = s.recvCtx[seq % n];
    ucp_request_param_t p{};
    ucp_tag_recv_info_t info{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO;
    p.cb.recv = onRecvDone;
    p.user_data = &ctx;
    p.recv_info.tag_info = &info;
    void* r = ucp_tag_recv_nbx(ucx_.worker.get(), frame(ring, seq), maxFrameBytes(ring),
                               makeTag(key24_, TagKind::Data, s.link->channel(), s.peer->rank, seq), kFullMask, &p);
    if (!started(r, ctx, *s.link, "receiving from")) return true;
    if (r == nullptr) recvFinished(&ctx, UCS_OK, &info);
    ++s.recvPosted;
  }
  // Tell the sender, once the receives behind them are posted. One credit message in flight per link.
  if (released > s.releasedSent && s.creditSendCtx.request == nullptr) {
    wire::putU64(s.creditOut.data(), released);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = onCreditSent;
    p.user_data = &s.creditSendCtx;
    void* r = ucp_tag_send_nbx(s.peer->ep, s.creditOut.data(), s.creditOut.size(),
                               makeTag(key24_, TagKind::Credit, s.link->channel(), rank_, 0), &p);
    if (!started(r, s.creditSendCtx, *s.link, "sending credits to")) return true;
    s.releasedSent = released;
  }
  // Credits usually arrive before their receive is posted again, so this receive often completes at once.
  while (s.creditRecvDone) {
    ucp_tag_recv_info_t info{};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO;
    p.cb.recv = onCreditReceived;
    p.user_data = &s.creditRecvCtx;
    p.recv_info.tag_info = &info;
    void* r = ucp_tag_recv_nbx(ucx_.worker.get(), s.creditIn.data(), s.creditIn.size(),
                               makeTag(key24_, TagKind::Credit, s.link->channel(), s.peer->rank, 0), kFullMask, &p);
    if (!started(r, s.creditRecvCtx, *s.link, "receiving credits from")) return true;
    s.creditRecvDone = false;
    if (r == nullptr) creditFinished(&s.creditRecvCtx, UCS_OK);  // sets creditRecvDone again: post the next one
  }
  return progressed;
}

bool UcxProxy::step() {
  bool progressed = false;
  for (auto& s : states_) {
    const bool wasFailed = s->link->failed();
    progressed |= stepRecv(*s);
    progressed |= stepSend(*s);
    progressed |= !wasFailed && s->link->failed();  // failed just now: the owner must hear of it
  }
  return progressed;
}

bool UcxProxy::anyUnsent() const {
  for (const auto& s : states_) {
    if (s->link->failed()) continue;
    // Acquire pairs with post()'s release store; the proxy thread is the only caller.
    if (s->sendDone != s->link->sendRing().head.load(std::memory_order_acquire)) return true;
  }
  return false;
}

bool UcxProxy::anyInFlight() const {
  for (const auto& s : states_) {
    if (s->sendIssued != s->sendDone || s->creditSendCtx.request != nullptr) return true;
  }
  return false;
}

void UcxProxy::run() {
  pthread_setname_np(pthread_self(), "cfx-ucx-proxy");
  releaseHelperThreadAffinity("ucx proxy");
  log::setThreadRank(rank_);
  int idle = 0;
  auto lastActive = Deadline::Clock::now();
  OwnerWatch watch(gate_->ticks.load(std::memory_order_relaxed));
  for (;;) {
    // Owner-driven progress (ucx_proxy.h): while an owner's tick count moves, stay off the worker.
    if (watch.ownerDriving(gate_->ticks.load(std::memory_order_relaxed)) &&
        !stopping_.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(kOwnerParkStep);
      continue;
    }
    std::unique_lock<std::mutex> lock(gate_->mutex);  // owners drive inline between our rounds
    bool progressed = step();
    unsigned events = 0;
    while (ucp_worker_progress(ucx_.worker.get()) != 0) ++events;  // runs the completion callbacks
    if (events != 0) progressed |= step();
    if (progressed) doorbell_.ring();
    if (progressed || events != 0) lastActive = Deadline::Clock::now();
    // Acquire pairs with stop()'s release store.
    if (stopping_.load(std::memory_order_acquire) && (Deadline::Clock::now() >= lingerUntil_ || !anyUnsent())) break;
    if (progressed || events != 0) {
      idle = 0;
    } else if (++idle >= kIdlePolls) {
      const bool busy = anyInFlight() || Deadline::Clock::now() - lastActive < kBusyWindow;
      const ucs_status_t armed = ucp_worker_arm(ucx_.worker.get());
      if (armed != UCS_ERR_BUSY) gate_->proxyAsleep.store(true, std::memory_order_relaxed);
      lock.unlock();
      if (armed != UCS_ERR_BUSY) sleepArmed(busy ? kBusyWaitMs : kIdleWaitMs);  // BUSY: events came, go again
      gate_->proxyAsleep.store(false, std::memory_order_relaxed);
      idle = 0;
    }
  }
}

void UcxProxy::stop(std::chrono::milliseconds linger) {
  {
    std::lock_guard<std::mutex> lock(gate_->mutex);
    gate_->drive = nullptr;  // owners holding ends from now on leave everything to this thread, then to closeAll
  }
  if (thread_.joinable()) {
    lingerUntil_ = Deadline::Clock::now() + linger;
    // Release pairs with run()'s acquire load: the proxy sees lingerUntil_ once it sees the flag.
    stopping_.store(true, std::memory_order_release);
    waker_->wake();
    thread_.join();
  }
  closeAll(std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(lingerUntil_ - Deadline::Clock::now())));
}

// Owner thread, after the proxy thread stopped (or never ran): flushes what is in flight to live peers for at
// most `flushFor`, cancels every posted request, force-closes the endpoints. Bounded whatever the peers do.
void UcxProxy::closeAll(std::chrono::milliseconds flushFor) {
  if (closed_ || !ucx_.worker) return;
  closed_ = true;
  ucp_worker_h worker = ucx_.worker.get();
  // Eager sends complete locally before they reach the peer: a worker flush waits for remote completion. It is
  // needed only while some live peer has not yet credited (consumed) every slot we sent; skipping it otherwise
  // also keeps UCX from logging errors about peers that closed first.
  bool unconfirmed = false;
  for (const auto& s : states_) unconfirmed |= !s->link->failed() && s->peerReleased < s->sendIssued;
  if (flushFor.count() > 0 && unconfirmed) {
    ucp_request_param_t p{};
    void* r = ucp_worker_flush_nbx(worker, &p);
    const Deadline until(flushFor);
    while (r != nullptr && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS && !until.expired()) {
      if (ucp_worker_progress(worker) == 0) waitIdle(kBusyWaitMs);
    }
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(worker, r);
      ucp_request_free(r);
    }
  }
  for (auto& s : states_) {
    for (RequestContext* ctx : {&s->creditRecvCtx, &s->creditSendCtx}) {
      if (ctx->request != nullptr) ucp_request_cancel(worker, ctx->request);
    }
    for (auto* v : {&s->recvCtx, &s->sendCtx}) {
      for (RequestContext& ctx : *v) {
        if (ctx.request != nullptr) ucp_request_cancel(worker, ctx.request);
      }
    }
  }
  std::vector<void*> closing;
  for (auto& peer : peers_) {
    if (!peer || peer->ep == nullptr) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;  // the flush above already waited for what mattered
    void* r = ucp_ep_close_nbx(peer->ep, &p);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    peer->ep = nullptr;
  }
  // Cancelled requests run their callbacks (which free them) from progress; force-closes finish there too.
  const Deadline bound(kCloseBound);
  auto outstanding = [&] {
    for (void* r : closing) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return true;
    }
    for (auto& s : states_) {
      if (s->creditRecvCtx.request || s->creditSendCtx.request) return true;
      for (auto* v : {&s->recvCtx, &s->sendCtx}) {
        for (RequestContext& ctx : *v) {
          if (ctx.request != nullptr) return true;
        }
      }
    }
    return false;
  };
  while (outstanding() && !bound.expired()) {
    if (ucp_worker_progress(worker) == 0) waitIdle(kBusyWaitMs);
  }
  for (void* r : closing) ucp_request_free(r);
  if (outstanding()) {
    CFX_WARN("ucx: rank %d: some UCX requests did not finish within %lld ms of closing; releasing the worker anyway",
             rank_, static_cast<long long>(kCloseBound.count()));
  }
}

}  // namespace cfx::transport::ucx
