// SPDX-License-Identifier: Apache-2.0
// In-memory FIFOs implementing transport::SendEnd / RecvEnd, and the ranks-as-threads runner (test support).
#include "loopback.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "common/log.h"
#include "primitives/executor.h"

namespace cfx::testing {

namespace {

// One direction between two ranks: nSlots slots of slotBytes. The sender owns tail_, the receiver head_.
struct Fifo {
  Fifo(transport::FifoGeometry g, size_t direct, std::shared_ptr<std::atomic<size_t>> reads, Doorbell* sender,
       Doorbell* receiver)
      : geometry(g),
        directThreshold(direct),
        directReads(std::move(reads)),
        data(g.slotBytes * static_cast<size_t>(g.nSlots)),
        bytes(g.nSlots),
        tags(g.nSlots),
        senderBell(sender),
        receiverBell(receiver) {}

  char* slot(uint64_t i) { return data.data() + (i % static_cast<uint64_t>(geometry.nSlots)) * geometry.slotBytes; }

  transport::FifoGeometry geometry;
  size_t directThreshold;
  std::shared_ptr<std::atomic<size_t>> directReads;
  std::vector<char> data;
  std::vector<size_t> bytes;
  std::vector<uint64_t> tags;
  Doorbell* senderBell;
  Doorbell* receiverBell;
  std::atomic<uint64_t> head{0};  // slots released by the receiver
  std::atomic<uint64_t> tail{0};  // slots posted by the sender
  // Posts stay unseen until the receiver checks the sender (shown then), which then reports it gone where
  // exitWhenShown (LoopbackWorld::senderExitsAsItIsChecked); silentPosts: posts ring nobody
  // (LoopbackWorld::messagesShowOnlyWhenChecked).
  std::atomic<bool> hideUntilChecked{false};
  std::atomic<bool> exitWhenShown{false};
  std::atomic<bool> silentPosts{false};
  std::atomic<bool> shown{false};
  std::atomic<bool> senderGone{false};
};

class LoopbackSend final : public transport::SendEnd {
 public:
  explicit LoopbackSend(std::shared_ptr<Fifo> f) : f_(std::move(f)) {}
  void* tryAcquire() override {
    const uint64_t tail = f_->tail.load(std::memory_order_relaxed);
    // Acquire pairs with the release store in LoopbackRecv::release(): the receiver is done reading the slot.
    const uint64_t head = f_->head.load(std::memory_order_acquire);
    if (tail - head >= static_cast<uint64_t>(f_->geometry.nSlots)) return nullptr;
    return f_->slot(tail);
  }
  void post(size_t bytes, uint64_t tag) override {
    const uint64_t tail = f_->tail.load(std::memory_order_relaxed);
    const size_t i = tail % static_cast<uint64_t>(f_->geometry.nSlots);
    f_->bytes[i] = bytes;
    f_->tags[i] = tag;
    // Release pairs with the acquire load in LoopbackRecv::tryPeek(): the slot's bytes and tag are visible.
    f_->tail.store(tail + 1, std::memory_order_release);
    if (!f_->silentPosts.load(std::memory_order_acquire)) f_->receiverBell->ring();
  }
  size_t slotBytes() const override { return f_->geometry.slotBytes; }
  int nSlots() const override { return f_->geometry.nSlots; }
  Status check() override { return Status(); }
  const char* kind() const override { return "loopback"; }
  size_t directThreshold() const override { return f_->directThreshold; }
  bool drained() override {
    // Acquire pairs with the release store in LoopbackRecv::release(): the receiver is done reading.
    return f_->head.load(std::memory_order_acquire) == f_->tail.load(std::memory_order_relaxed);
  }

 private:
  std::shared_ptr<Fifo> f_;
};

class LoopbackRecv final : public transport::RecvEnd {
 public:
  explicit LoopbackRecv(std::shared_ptr<Fifo> f) : f_(std::move(f)) {}
  Fifo& fifo() { return *f_; }
  const void* tryPeek(size_t* bytes, uint64_t* tag) override {
    if (f_->hideUntilChecked.load(std::memory_order_acquire)) return nullptr;
    const uint64_t head = f_->head.load(std::memory_order_relaxed);
    // Acquire pairs with the release store in LoopbackSend::post().
    if (f_->tail.load(std::memory_order_acquire) == head) return nullptr;
    const size_t i = head % static_cast<uint64_t>(f_->geometry.nSlots);
    *bytes = f_->bytes[i];
    *tag = f_->tags[i];
    return f_->slot(head);
  }
  void release() override {
    // Release pairs with the acquire load in LoopbackSend::tryAcquire().
    f_->head.store(f_->head.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    f_->senderBell->ring();
  }
  Status check() override {
    // Once the sender has posted, its message shows at this check (and the sender, where it exits when shown, has
    // exited just before it).
    const bool posted = f_->tail.load(std::memory_order_acquire) != f_->head.load(std::memory_order_relaxed);
    if (posted && f_->hideUntilChecked.exchange(false, std::memory_order_acq_rel)) {
      f_->shown.store(true, std::memory_order_release);
      if (f_->exitWhenShown.load()) f_->senderGone.store(true);
    }
    if (f_->senderGone.load()) return Status::error(Errc::RemoteError, "loopback: the sender has exited");
    return Status();
  }
  const char* kind() const override { return "loopback"; }
  Status readDirect(const transport::DirectRegion& region, size_t offset, void* dst, size_t bytes) override {
    if (region.magic != transport::kDirectMagic || offset + bytes > region.bytes) {
      return Status::error(Errc::RemoteError, "loopback: direct read outside the posted region");
    }
    std::memcpy(dst, reinterpret_cast<const char*>(region.address) + offset, bytes);
    f_->directReads->fetch_add(1, std::memory_order_relaxed);  // a statistic: no ordering needed
    return Status();
  }

 private:
  std::shared_ptr<Fifo> f_;
};

}  // namespace

LoopbackWorld::LoopbackWorld(int nRanks, transport::FifoGeometry geometry, size_t directThreshold)
    : nRanks_(nRanks),
      geometry_(geometry),
      bells_(new Doorbell[static_cast<size_t>(nRanks)]),
      endpoints_(nRanks),
      directReads_(std::make_shared<std::atomic<size_t>>(0)) {
  for (auto& ep : endpoints_) ep.resize(nRanks);
  for (int from = 0; from < nRanks; ++from) {
    for (int to = 0; to < nRanks; ++to) {
      if (from == to) continue;
      auto fifo = std::make_shared<Fifo>(geometry, directThreshold, directReads_, &bells_[from], &bells_[to]);
      endpoints_[from].send[transport::kCollChannel][to] = std::make_unique<LoopbackSend>(fifo);
      endpoints_[to].recv[transport::kCollChannel][from] = std::make_unique<LoopbackRecv>(fifo);
    }
  }
}

LoopbackWorld::~LoopbackWorld() = default;

namespace {
// The FIFO from -> to, through to's receiving end (every end of a LoopbackWorld is a loopback one).
Fifo& fifoOf(std::vector<transport::Endpoints>& endpoints, int from, int to) {
  return static_cast<LoopbackRecv&>(*endpoints[static_cast<size_t>(to)].recv[transport::kCollChannel][from]).fifo();
}
}  // namespace

void LoopbackWorld::senderExitsAsItIsChecked(int from, int to) {
  Fifo& fifo = fifoOf(endpoints_, from, to);
  fifo.exitWhenShown.store(true);
  fifo.hideUntilChecked.store(true);
}

void LoopbackWorld::senderHasExited(int from, int to) { fifoOf(endpoints_, from, to).senderGone.store(true); }

void LoopbackWorld::messagesShowOnlyWhenChecked(int from, int to) {
  Fifo& fifo = fifoOf(endpoints_, from, to);
  fifo.silentPosts.store(true);
  fifo.hideUntilChecked.store(true);
}

bool LoopbackWorld::shownByCheck(int from, int to) { return fifoOf(endpoints_, from, to).shown.load(); }

bool LoopbackWorld::asleepOnShownMessage(int from, int to) {
  Fifo& fifo = fifoOf(endpoints_, from, to);
  // Unread before and after the look at the sleepers: the receiver did not take it in between.
  const bool unread = fifo.shown.load() && fifo.head.load() != fifo.tail.load();
  return unread && bells_[to].sleepers.load() > 0 && fifo.head.load() != fifo.tail.load();
}

std::vector<Status> LoopbackWorld::runRanks(const CoroFactory& makeCoro, std::chrono::milliseconds timeout,
                                            std::chrono::milliseconds checkInterval) {
  std::vector<Status> results(static_cast<size_t>(nRanks_));
  const uint32_t seq = ++opSeq_;
  auto body = [&](int rank) {
    log::setThreadRank(rank);
    prims::Prims prims(endpoints_[rank], transport::kCollChannel, rank, nRanks_, geometry_.slotBytes);
    prims.setRingChunkSlices(ringChunkSlices_);
    prims.setOpSeq(seq);
    prims::Work work;
    work.task = makeCoro(rank, prims);
    work.what = "test op";
    work.opCount = seq;
    work.rank = rank;
    prims::ExecOptions options;
    options.doorbell = &bells_[rank];
    options.spins = 64;  // more threads than cores: sleep soon and let the peer run
    options.timeout = timeout;
    options.checkInterval = checkInterval;
    std::vector<prims::Work*> works{&work};
    results[static_cast<size_t>(rank)] = prims::execute(works, options);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nRanks_));
  for (int r = 1; r < nRanks_; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace cfx::testing
