// SPDX-License-Identifier: Apache-2.0
// The process-wide pool behind takeScratch (collectives layer).
#include "collectives/scratch.h"

#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <new>

namespace cfx::coll {

namespace {

struct Pool {
  std::mutex mutex;
  std::multimap<size_t, char*> free;  // capacity -> block
  size_t keptBytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may come back from threads running at exit
  return *p;
}

void giveBack(char* data, size_t capacity) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.keptBytes + capacity <= kScratchKeepBytes) {
      p.free.emplace(capacity, data);
      p.keptBytes += capacity;
      return;
    }
  }
  delete[] data;
}

}  // namespace

ScratchBlock::ScratchBlock(ScratchBlock&& other) noexcept : data_(other.data_), capacity_(other.capacity_) {
  other.data_ = nullptr;
  other.capacity_ = 0;
}

ScratchBlock& ScratchBlock::operator=(ScratchBlock&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) giveBack(data_, capacity_);
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

ScratchBlock::~ScratchBlock() {
  if (data_ != nullptr) giveBack(data_, capacity_);
}

Result<ScratchBlock> takeScratch(size_t bytes) {
  const size_t want = std::max<size_t>(bytes, 1);
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    if (auto it = p.free.lower_bound(want); it != p.free.end()) {
      ScratchBlock block(it->second, it->first);
      p.keptBytes -= it->first;
      p.free.erase(it);
      return block;
    }
  }
  const size_t capacity = want > (size_t{1} << 62) ? want : std::bit_ceil(want);
  char* data = new (std::nothrow) char[capacity];
  if (data == nullptr) {
    return Status::error(Errc::SystemError, strprintf("cannot allocate %zu bytes of scratch memory", capacity));
  }
  return ScratchBlock(data, capacity);
}

size_t scratchKeptBytes() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.keptBytes;
}

}  // namespace cfx::coll
