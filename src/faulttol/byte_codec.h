// SPDX-License-Identifier: Apache-2.0
// Big-endian writing and bounds-checked reading of wire integers (faulttol layer), shared by the health datagrams
// and the membership frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cfx::ft::wire {

class Out {
 public:
  explicit Out(std::vector<uint8_t>& v) : v_(v) {}
  void u8(uint8_t x) { v_.push_back(x); }
  void u16(uint16_t x) { put(x, 2); }
  void u32(uint32_t x) { put(x, 4); }
  void u64(uint64_t x) { put(x, 8); }
  void bytes(const std::string& s) { v_.insert(v_.end(), s.begin(), s.end()); }
  void bytes(std::span<const uint8_t> s) { v_.insert(v_.end(), s.begin(), s.end()); }

 private:
  void put(uint64_t x, int n) {
    for (int i = n - 1; i >= 0; --i) v_.push_back(static_cast<uint8_t>(x >> (8 * i)));
  }
  std::vector<uint8_t>& v_;
};

// Reads within a span only; a read past the end returns zeros and marks the reader bad.
class In {
 public:
  explicit In(std::span<const uint8_t> s) : s_(s) {}
  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  std::string text(size_t n) {
    if (n > s_.size() - pos_) {
      bad_ = true;
      return {};
    }
    std::string t(reinterpret_cast<const char*>(s_.data() + pos_), n);
    pos_ += n;
    return t;
  }
  // Copies n bytes into out (zeros and bad when fewer are left).
  void bytes(uint8_t* out, size_t n) {
    if (n > s_.size() - pos_) {
      bad_ = true;
      for (size_t i = 0; i < n; ++i) out[i] = 0;
      return;
    }
    for (size_t i = 0; i < n; ++i) out[i] = s_[pos_ + i];
    pos_ += n;
  }
  bool bad() const { return bad_; }
  size_t left() const { return s_.size() - pos_; }

 private:
  uint64_t get(size_t n) {
    if (n > s_.size() - pos_) {
      bad_ = true;
      return 0;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x = (x << 8) | s_[pos_ + i];
    pos_ += n;
    return x;
  }
  std::span<const uint8_t> s_;
  size_t pos_ = 0;
  bool bad_ = false;
};

}  // namespace cfx::ft::wire
