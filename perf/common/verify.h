// SPDX-License-Identifier: Apache-2.0
// perf harness: data for -c checks. Every value is a function of (seed, rank, global element index), so each
// rank can build its inputs and the exact expected output without talking to the others.
//
// Reductions are exact whatever order the library reduces in: inputs are small integers, and for every element
// only as many ranks contribute non-zero values as keep every partial sum exactly representable in the element
// type (fp8 e5m2 holds integers up to 8, so there at most 4 ranks add values in [-2, 2]). Products multiply at
// most a type-dependent number of 2s. avg on floating types has one contributor per element, so the result is
// v/nRanks rounded once; it is compared with a 2-ULP tolerance because the library may pre-scale by 1/nRanks
// in the element type, as NCCL does. mulsum is ncclRedOpCreatePreMulSum with scalar 1 on even and 2 on odd
// ranks. Everything else must match bit for bit.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace cfx::perf {

// The values of one check iteration of one reduction (type, op, nRanks, seed).
class ReductionData {
 public:
  ReductionData(ncclDataType_t type, int opIndex, int nRanks, uint64_t seed);

  ncclDataType_t type() const { return type_; }
  // What rank puts into its send buffer at global element index.
  double input(int rank, size_t index) const;
  // The reduced value at index, before it is rounded to the element type.
  double expected(size_t index) const;
  // The ncclRedOpCreatePreMulSum scalar of rank for mulsum.
  static double preMulScalar(int rank) { return (rank % 2) ? 2.0 : 1.0; }

 private:
  // Which ranks contribute at index: those with (rank + first) % nRanks < count.
  struct Share {
    int first;
    int count;
  };
  Share share(size_t index) const;
  bool contributes(int rank, const Share& s) const { return (rank + s.first) % nRanks_ < s.count; }
  uint64_t hash(int rank, size_t index) const;

  ncclDataType_t type_;
  int opIndex_;
  int nRanks_;
  uint64_t seed_;
  int maxShare_;      // how many ranks may contribute non-zero values / factors of 2 at one index
  int64_t maxValue_;  // magnitude bound of one contribution
  bool signedValues_;
};

// Writes count elements of rank's input, global indices [firstIndex, firstIndex + count).
void fillReductionInput(const ReductionData& data, int rank, size_t firstIndex, size_t count, void* dst);
// Writes the expected result for global indices [firstIndex, firstIndex + count).
void fillReductionExpected(const ReductionData& data, size_t firstIndex, size_t count, void* dst);

// Data for collectives that only move elements: element index of owner's data under seed. Integer types get
// full-width random bits; floating types get small integers (always finite, never -0).
void fillPattern(ncclDataType_t type, uint64_t seed, int owner, size_t firstIndex, size_t count, void* dst);

// Counts elements of got that differ from expected: bitwise, or within 2 ULP when ulpTolerance is set.
int64_t countWrong(ncclDataType_t type, const void* got, const void* expected, size_t count, bool ulpTolerance);

// --codec checks: results lie within a tolerance of the exact ones instead of matching them. The error of one encoding
// of an element is at most codecUnit(format) times the absmax of its block (conflux.h states every format's bound),
// so a sum is off by at most unit * (the contributions' absmax summed + the result's absmax), and the result is then
// rounded to its type.
double codecUnit(int format, bool stochastic);
// Elements of got farther than tolerance (+ the rounding of the type) from expected; *relL2 gets
// ||got - expected|| / ||expected||.
int64_t countWrongWithin(ncclDataType_t type, const void* got, const void* expected, size_t count, double tolerance,
                         double* relL2);
// The largest magnitude among count elements.
double maxAbs(ncclDataType_t type, const void* values, size_t count);

// Stores the mulsum scalar of rank in type into scalar (at least 8 bytes).
void storePreMulScalar(ncclDataType_t type, int rank, void* scalar);

}  // namespace cfx::perf
