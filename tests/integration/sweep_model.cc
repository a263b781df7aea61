// SPDX-License-Identifier: Apache-2.0
// Closed-form inputs and expected results for the collective sweep.
#include "integration/sweep_model.h"

#include <cmath>
#include <cstdio>

namespace cfx::itest {
namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Largest input magnitude per type: nRanks (<= 8) * bound * preMulScalar stays exactly representable, and so does
// every integer below it (fp16 up to 2048, bf16 256, e4m3 16 (even numbers to 32), e5m2 8 (even numbers to 16)).
int64_t inputBound(const DtypeInfo& dt) {
  switch (dt.type) {
    case ncclInt8:
    case ncclUint8: return 4;
    case ncclInt32:
    case ncclUint32: return int64_t{1} << 20;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return int64_t{1} << 40;
    case ncclFloat16: return 64;
    case ncclFloat32: return int64_t{1} << 19;
    case ncclBfloat16: return 8;
    case ncclFloat8e4m3: return 2;
    case ncclFloat8e5m2: return 1;
    default: return 1;
  }
}

}  // namespace

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Bcast: return "Bcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
  }
  return "?";
}

const char* opName(Op op) {
  switch (op) {
    case Op::Copy: return "copy";
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Avg: return "avg";
    case Op::PreMulSum: return "premulsum";
  }
  return "?";
}

bool isReduction(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool hasRoot(Coll coll) {
  return coll == Coll::Broadcast || coll == Coll::Bcast || coll == Coll::Reduce || coll == Coll::Gather ||
         coll == Coll::Scatter;
}

bool isReplicated(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Broadcast || coll == Coll::Bcast || coll == Coll::AllGather;
}

double preMulScalar(const DtypeInfo& dt) {
  return (dt.type == ncclFloat8e4m3 || dt.type == ncclFloat8e5m2) ? 2.0 : 3.0;
}

ValueModel::ValueModel(const DtypeInfo& dt, Op op, int nRanks)
    : dt_(dt), op_(op), nRanks_(nRanks), period_(op == Op::Copy ? kCopyPeriod : kReducePeriod) {
  const bool powerOfTwo = (nRanks & (nRanks - 1)) == 0;
  tolerant_ = op == Op::Avg && dt.kind == Kind::Float && !powerOfTwo;
  inputs_.resize(static_cast<size_t>(nRanks) * period_ * dt.size);
  if (op == Op::Copy) {
    for (int r = 0; r < nRanks; ++r) {
      for (size_t k = 0; k < period_; ++k) {
        const uint64_t bits = mix64((static_cast<uint64_t>(r + 1) << 48) ^ k ^ (static_cast<uint64_t>(dt.type) << 56));
        storeBits(inputs_.data(), r * period_ + k, dt.size, bits);
      }
    }
    return;
  }
  reduced_.resize(period_ * dt.size);
  exact_.resize(period_);
  for (size_t k = 0; k < period_; ++k) {
    // Every partial result is an exactly representable integer, so double arithmetic here is exact too.
    double acc = 0;
    for (int r = 0; r < nRanks; ++r) {
      const int64_t v = inputValue(r, k);
      storeBits(inputs_.data(), r * period_ + k, dt.size, encodeValue(dt, static_cast<double>(v)));
      const double x = static_cast<double>(v);
      if (r == 0) {
        acc = x;
      } else if (op == Op::Prod) {
        acc *= x;
      } else if (op == Op::Max) {
        acc = std::max(acc, x);
      } else if (op == Op::Min) {
        acc = std::min(acc, x);
      } else {
        acc += x;
      }
    }
    double exact = acc;
    if (op == Op::PreMulSum) exact = acc * preMulScalar(dt);
    if (op == Op::Avg) {
      // Integers: NCCL sums, then divides truncating toward zero. Floats: the real quotient.
      exact = dt.kind == Kind::Float ? acc / nRanks : static_cast<double>(static_cast<int64_t>(acc) / nRanks);
    }
    exact_[k] = exact;
    storeBits(reduced_.data(), k, dt.size, encodeValue(dt, exact));
  }
}

int64_t ValueModel::inputValue(int rank, size_t k) const {
  const uint64_t h = mix64((static_cast<uint64_t>(op_) << 56) ^ (static_cast<uint64_t>(rank) << 40) ^ k);
  const int64_t bound = inputBound(dt_);
  if (op_ == Op::Prod) {
    // Mostly ones: per index, one rank may contribute a 2 and one a 3, and signs flip; |product| <= 6.
    int64_t v = 1;
    if (k % nRanks_ == static_cast<size_t>(rank) && (k / nRanks_) % 3 == 0) v *= 2;
    if ((k + 1) % nRanks_ == static_cast<size_t>(rank) && (k / nRanks_) % 5 == 1) v *= 3;
    if (dt_.kind != Kind::Unsigned && h % 7 == 0) v = -v;
    return v;
  }
  const bool nonNegative = dt_.kind == Kind::Unsigned || (op_ == Op::Avg && dt_.kind == Kind::Float);
  if (nonNegative) return static_cast<int64_t>(h % static_cast<uint64_t>(bound + 1));
  return static_cast<int64_t>(h % static_cast<uint64_t>(2 * bound + 1)) - bound;
}

bool ValueModel::matchesReduction(uint64_t got, size_t index) const {
  const size_t k = index % period_;
  if (!tolerant_) return got == expectedReduction(index);
  const double value = decodeValue(dt_, got);
  if (std::isnan(value)) return false;
  return std::fabs(value - exact_[k]) <= nRanks_ * ulpAt(dt_, exact_[k]);
}

std::string ValueModel::describeExpected(size_t index) const {
  char buf[96];
  const size_t k = index % period_;
  if (tolerant_) {
    std::snprintf(buf, sizeof(buf), "%.9g within %d ulp", exact_[k], nRanks_);
  } else {
    std::snprintf(buf, sizeof(buf), "0x%llx (%.9g)", static_cast<unsigned long long>(expectedReduction(index)),
                  exact_[k]);
  }
  return buf;
}

}  // namespace cfx::itest
