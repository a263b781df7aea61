// SPDX-License-Identifier: Apache-2.0
// Closed-form inputs and expected results for the collective sweep. Inputs are small integers chosen so that
// every partial reduction is exactly representable in the element type, whatever order the library reduces in.
#pragma once

#include "integration/dtypes.h"

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cfx::itest {

enum class Coll { AllReduce, Broadcast, Bcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter };
// Copy: data-movement collectives, whose inputs are arbitrary bit patterns (NaNs included).
enum class Op { Copy, Sum, Prod, Max, Min, Avg, PreMulSum };

const char* collName(Coll coll);
const char* opName(Op op);
bool isReduction(Coll coll);
bool hasRoot(Coll coll);
// Every rank ends with the same output bytes, so result hashes must agree across ranks.
bool isReplicated(Coll coll);

// The scalar used for PreMulSum: 3, or 2 for fp8 (keeps every partial sum exact).
double preMulScalar(const DtypeInfo& dt);

// Inputs and expected reductions for one (datatype, op, nRanks). Inputs repeat with a prime period (so a
// misplaced chunk does not line up with the pattern), which lets the sweep fill and compare buffers with memcpy and
// memcmp. Reduction inputs are small integers; Copy inputs are arbitrary bit patterns (NaNs included).
class ValueModel {
 public:
  ValueModel(const DtypeInfo& dt, Op op, int nRanks);

  size_t period() const { return period_; }
  // period() elements of rank's input, as raw element bytes; element i of the input is element i % period().
  const unsigned char* inputTable(int rank) const { return inputs_.data() + rank * period_ * dt_.size; }
  // period() elements of the expected reduction across ranks (reductions only).
  const unsigned char* reducedTable() const { return reduced_.data(); }
  uint64_t input(int rank, size_t index) const { return loadBits(inputTable(rank), index % period_, dt_.size); }
  uint64_t expectedReduction(size_t index) const { return loadBits(reduced_.data(), index % period_, dt_.size); }
  // True when got is the correct reduction across ranks of the inputs at index.
  bool matchesReduction(uint64_t got, size_t index) const;
  // Floating-point average over a non-power-of-two rank count: not exact, compared within nRanks ULP.
  bool tolerant() const { return tolerant_; }
  std::string describeExpected(size_t index) const;

 private:
  static constexpr size_t kReducePeriod = 4099;
  static constexpr size_t kCopyPeriod = 65521;

  int64_t inputValue(int rank, size_t k) const;

  const DtypeInfo& dt_;
  Op op_;
  int nRanks_;
  size_t period_;
  bool tolerant_ = false;
  std::vector<unsigned char> inputs_;   // [rank][k] element bytes
  std::vector<unsigned char> reduced_;  // [k] element bytes
  std::vector<double> exact_;           // [k]
};

}  // namespace cfx::itest
