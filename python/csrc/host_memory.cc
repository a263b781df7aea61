// SPDX-License-Identifier: Apache-2.0
// The shared-host-memory CPU allocator (host_memory.h).
#include "host_memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cfx_api.h"

namespace cfx::torchext {
namespace {

// Free blocks kept for reuse, at most: a few models' worth of gradient buckets, not a second heap.
constexpr size_t kMaxCachedBytes = size_t{512} << 20;
constexpr size_t kPage = 4096;
// Larger requests go to the previous allocator: sizeClass's rounding cannot overflow below this, and no host buffer
// is this large (the library refuses far smaller ones).
constexpr size_t kMaxSharedBytes = SIZE_MAX / 4;

// Sizes round up to a page, then to one of four classes per power of two (p, 1.25p, 1.5p, 1.75p): a freed block
// serves any later request of its class, at most a quarter of it unused. n <= kMaxSharedBytes.
size_t sizeClass(size_t n) {
  n = (n + kPage - 1) / kPage * kPage;
  size_t p = kPage;
  while (p * 2 <= n) p *= 2;
  const size_t step = p / 4 >= kPage ? p / 4 : kPage;
  return (n + step - 1) / step * step;
}

class SharedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    // Atomics, no lock: a child forked while another thread held mutex_ must still allocate.
    const size_t minBytes = minBytes_.load(std::memory_order_relaxed);
    // A child made by fork (a DataLoader worker) has none of the library's threads, and may have been forked while
    // one held a lock the library's allocation takes: it allocates from the previous allocator only.
    if (n < minBytes || n == 0 || n > kMaxSharedBytes || getpid() != owner_) return base_->allocate(n);
    void* p = take(n);
    if (p == nullptr) return base_->allocate(n);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter() != nullptr ? &releaseAny : nullptr; }

  void install(size_t minBytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    minBytes_.store(minBytes);
    if (installed_) return;
    owner_.store(getpid());
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current != this) base_ = current;
    c10::SetCPUAllocator(this, kPriority);
    TORCH_CHECK(c10::GetCPUAllocator() == this,
                "conflux: use_shared_host_memory: PyTorch keeps another CPU allocator at a higher priority; this "
                "process's CPU tensors cannot come from shared memory");
    installed_ = true;
  }

  void uninstall() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!installed_) return;
    c10::SetCPUAllocator(base_, kPriority);
    installed_ = false;
    minBytes_.store(SIZE_MAX);  // storages made meanwhile keep a pointer to this allocator, and grow through it
  }

  SharedHostStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    SharedHostStats s = stats_;
    s.installed = installed_;
    s.minBytes = installed_ ? minBytes_.load() : 0;
    return s;
  }

  static SharedHostAllocator& instance() {
    static auto* a = new SharedHostAllocator();  // never destroyed: tensors may outlive static destruction
    return *a;
  }

 private:
  static constexpr uint8_t kPriority = 1;  // above PyTorch's own registration (0)

  void* take(size_t n) const {
    const size_t bytes = sizeClass(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.cachedBytes -= bytes;
        stats_.liveBytes += bytes;
        ++stats_.reuses;
        live_[p] = bytes;
        return p;
      }
    }
    void* p = nullptr;
    if (api().memAlloc(&p, bytes) != ncclSuccess || p == nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.fallbacks;
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.blocksMade;
    stats_.liveBytes += bytes;
    live_[p] = bytes;
    return p;
  }

  // Returns `p` to the cache (or the library) when it is one of ours; false otherwise. In a forked child a block
  // inherited from the parent is left alone: it is the parent's, and the child's mapping of it ends with the child.
  bool give(void* p) {
    size_t bytes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (getpid() != owner_) return live_.count(p) != 0;
      auto it = live_.find(p);
      if (it == live_.end()) return false;
      bytes = it->second;
      live_.erase(it);
      stats_.liveBytes -= bytes;
      if (stats_.cachedBytes + bytes <= kMaxCachedBytes) {
        free_[bytes].push_back(p);
        stats_.cachedBytes += bytes;
        return true;
      }
    }
    (void)api().memFree(p);
    return true;
  }

  static void release(void* p) {
    if (getpid() == instance().owner_.load(std::memory_order_relaxed)) (void)instance().give(p);
  }

  static void releaseAny(void* p) {
    if (!instance().give(p)) instance().base_->raw_deleter()(p);
  }

  mutable std::mutex mutex_;
  c10::Allocator* base_ = c10::GetCPUAllocator();
  std::atomic<size_t> minBytes_{0};
  bool installed_ = false;
  std::atomic<pid_t> owner_{0};  // the process that installed it
  mutable SharedHostStats stats_;
  mutable std::unordered_map<void*, size_t> live_;
  mutable std::map<size_t, std::vector<void*>> free_;
};

}  // namespace

void useSharedHostMemory(size_t minBytes) {
  TORCH_CHECK(minBytes > 0, "conflux: use_shared_host_memory: min_bytes must be positive");
  TORCH_CHECK(api().memAlloc != nullptr, "conflux: use_shared_host_memory: the Conflux library is not loaded");
  SharedHostAllocator::instance().install(minBytes);
}

void stopSharedHostMemory() { SharedHostAllocator::instance().uninstall(); }

SharedHostStats sharedHostStats() { return SharedHostAllocator::instance().stats(); }

}  // namespace cfx::torchext
