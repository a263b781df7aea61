// SPDX-License-Identifier: Apache-2.0
// The one wire encoder (common layer): how every authenticated protocol of this library writes integers and
// bytes, and reads them back with bounds checks. Used by the unique id, the bootstrap, the tcp handshake and
// stripes, the ucx hello, the health datagrams and the membership frames.
//
// Byte order: little-endian everywhere. The data-path headers (tcp stripes, ucx records) are written once per
// slot, and every host this library builds for is little-endian, so an encode is a plain store there; a
// big-endian host still speaks the same bytes (the helpers shift, they never memcpy an integer).
//
// Two writers and one reader:
//   Writer  into a fixed buffer the caller sized; a write past its end is dropped and marks it overflowed
//           (encoders size their buffers from constants, so this is a bug, caught by the tests' ok() checks);
//   Out     appending to a std::vector (variable-length frames);
//   Reader  within a span only; a read past the end returns zeros and marks it bad, so a parser reads every field
//           first and checks bad() once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cfx::wire {

inline void putU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void putU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t getU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Writes into [p, p + size). See the file comment for what happens past the end.
class Writer {
 public:
  Writer(uint8_t* p, size_t size) : p_(p), size_(size) {}
  explicit Writer(std::span<uint8_t> s) : Writer(s.data(), s.size()) {}
  void u8(uint8_t v) {
    if (uint8_t* q = take(1)) q[0] = v;
  }
  void u16(uint16_t v) {
    if (uint8_t* q = take(2)) putU16(q, v);
  }
  void u32(uint32_t v) {
    if (uint8_t* q = take(4)) putU32(q, v);
  }
  void u64(uint64_t v) {
    if (uint8_t* q = take(8)) putU64(q, v);
  }
  void bytes(const void* data, size_t n) {
    if (uint8_t* q = take(n); q != nullptr && n != 0) std::memcpy(q, data, n);
  }
  void bytes(std::span<const uint8_t> s) { bytes(s.data(), s.size()); }
  void zeros(size_t n) {
    if (uint8_t* q = take(n); q != nullptr && n != 0) std::memset(q, 0, n);
  }
  size_t written() const { return pos_; }
  bool ok() const { return !overflow_; }

 private:
  uint8_t* take(size_t n) {
    if (overflow_ || n > size_ - pos_) {
      overflow_ = true;
      return nullptr;
    }
    uint8_t* q = p_ + pos_;
    pos_ += n;
    return q;
  }
  uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  bool overflow_ = false;
};

// Appends to a vector.
class Out {
 public:
  explicit Out(std::vector<uint8_t>& v) : v_(v) {}
  void u8(uint8_t x) { v_.push_back(x); }
  void u16(uint16_t x) { put(x, 2); }
  void u32(uint32_t x) { put(x, 4); }
  void u64(uint64_t x) { put(x, 8); }
  void bytes(std::string_view s) { v_.insert(v_.end(), s.begin(), s.end()); }
  void bytes(std::span<const uint8_t> s) { v_.insert(v_.end(), s.begin(), s.end()); }
  void zeros(size_t n) { v_.insert(v_.end(), n, 0); }

 private:
  void put(uint64_t x, int n) {
    for (int i = 0; i < n; ++i) v_.push_back(static_cast<uint8_t>(x >> (8 * i)));
  }
  std::vector<uint8_t>& v_;
};

// Reads within a span only (file comment).
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> s) : s_(s) {}
  Reader(const uint8_t* p, size_t n) : s_(p, n) {}
  uint8_t u8() {
    const uint8_t* q = take(1);
    return q ? q[0] : 0;
  }
  uint16_t u16() {
    const uint8_t* q = take(2);
    return q ? getU16(q) : 0;
  }
  uint32_t u32() {
    const uint8_t* q = take(4);
    return q ? getU32(q) : 0;
  }
  uint64_t u64() {
    const uint8_t* q = take(8);
    return q ? getU64(q) : 0;
  }
  // Copies n bytes into out (zeros, and bad, when fewer are left).
  void bytes(void* out, size_t n) {
    const uint8_t* q = take(n);
    if (n == 0) return;
    if (q != nullptr) {
      std::memcpy(out, q, n);
    } else {
      std::memset(out, 0, n);
    }
  }
  template <size_t N>
  void bytes(std::array<uint8_t, N>& out) {
    bytes(out.data(), N);
  }
  std::string text(size_t n) {
    const uint8_t* q = take(n);
    return q ? std::string(reinterpret_cast<const char*>(q), n) : std::string();
  }
  // The next n bytes as a view into the input (empty, and bad, when fewer are left).
  std::span<const uint8_t> view(size_t n) {
    const uint8_t* q = take(n);
    return q ? std::span<const uint8_t>(q, n) : std::span<const uint8_t>();
  }
  void skip(size_t n) { (void)take(n); }
  bool bad() const { return bad_; }
  size_t left() const { return s_.size() - pos_; }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* take(size_t n) {
    if (bad_ || n > s_.size() - pos_) {
      bad_ = true;
      return nullptr;
    }
    const uint8_t* q = s_.data() + pos_;
    pos_ += n;
    return q;
  }
  std::span<const uint8_t> s_;
  size_t pos_ = 0;
  bool bad_ = false;
};

}  // namespace cfx::wire
