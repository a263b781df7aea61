// SPDX-License-Identifier: Apache-2.0
// Declares the CFX_MPI_* knobs of libconflux_mpi.so (interpose layer). The size-rule defaults come from sweeps of
// all eight collectives, 1 KiB to 256 MiB, against Open MPI 4.1 (vader) on one host with 2 and 4 ranks
// (tests/interpose/run_coll_bench.sh, tables in docs/notes/mpi_interposer.md). Each minimum is the smallest
// measured size from which Conflux was as fast or faster at every larger size, with both rank counts: MPI won
// allreduce at 1-4 KiB (2 ranks), reduce at 1 KiB (2 ranks) and alltoall at 1-4 KiB (4 ranks); allgather and
// reduce_scatter tied at 1 KiB; bcast, gather and scatter were faster routed at every size, and sizes below
// 1 KiB were not measured, so they stay with MPI. No middle band where MPI wins showed up through the
// interposer, so every MPI_BAND defaults to none; the knob exists for machines where one does.
#include "interpose/mpi_options.h"

#include <cctype>
#include <limits>
#include <string>

#include "common/param.h"

namespace cfx::interpose {
namespace {

using param::atLeast;

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

CFX_PARAM(bool, disableParam, "CFX_MPI_DISABLE", false,
          "libconflux_mpi.so: 1 passes every MPI call through to the MPI library (PMPI_*) unchanged.");
CFX_PARAM(bool, statsParam, "CFX_MPI_STATS", false,
          "libconflux_mpi.so: 1 prints, at MPI_Finalize on rank 0 of MPI_COMM_WORLD, how many calls of each "
          "collective were routed to Conflux and how many were passed through to MPI.");
CFX_PARAM(bool, barrierParam, "CFX_MPI_BARRIER", false,
          "libconflux_mpi.so: 1 routes MPI_Barrier and MPI_Ibarrier to Conflux (a 1-element allreduce); 0 leaves "
          "them with MPI.");
CFX_PARAM(int64_t, allreduceMinParam, "CFX_MPI_ALLREDUCE_MIN_BYTES", 8192,
          "libconflux_mpi.so: MPI_Allreduce calls of fewer bytes (count x type size) stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, reduceMinParam, "CFX_MPI_REDUCE_MIN_BYTES", 4096,
          "libconflux_mpi.so: MPI_Reduce calls of fewer bytes (count x type size) stay with MPI.", atLeast<int64_t>(0));
CFX_PARAM(int64_t, bcastMinParam, "CFX_MPI_BCAST_MIN_BYTES", 1024,
          "libconflux_mpi.so: MPI_Bcast calls of fewer bytes (count x type size) stay with MPI.", atLeast<int64_t>(0));
CFX_PARAM(int64_t, allgatherMinParam, "CFX_MPI_ALLGATHER_MIN_BYTES", 4096,
          "libconflux_mpi.so: MPI_Allgather calls whose receive buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, reduceScatterMinParam, "CFX_MPI_REDUCE_SCATTER_MIN_BYTES", 4096,
          "libconflux_mpi.so: MPI_Reduce_scatter(_block) calls whose input holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, alltoallMinParam, "CFX_MPI_ALLTOALL_MIN_BYTES", 16384,
          "libconflux_mpi.so: MPI_Alltoall calls whose receive buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, gatherMinParam, "CFX_MPI_GATHER_MIN_BYTES", 1024,
          "libconflux_mpi.so: MPI_Gather calls whose root buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, scatterMinParam, "CFX_MPI_SCATTER_MIN_BYTES", 1024,
          "libconflux_mpi.so: MPI_Scatter calls whose root buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, alltoallvMinParam, "CFX_MPI_ALLTOALLV_MIN_BYTES", 0,
          "libconflux_mpi.so: MPI_Alltoallv calls in which no rank sends or receives this many bytes stay with MPI. "
          "Ranks move different amounts, so a value above 0 (or a band) makes every blocking call agree on the "
          "largest first (one small MPI_Allreduce), and keeps MPI_Ialltoallv with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, scanMinParam, "CFX_MPI_SCAN_MIN_BYTES", 8192,
          "libconflux_mpi.so: MPI_Scan and MPI_Exscan calls of fewer bytes (count x type size) stay with MPI.",
          atLeast<int64_t>(0));

// The pass-through bands: "LO-HI,..." byte ranges (K/M/G suffixes) where a call above the minimum still stays
// with MPI; "none" for no band.
param::Validator<std::string> validBands() {
  return [](const std::string& text) {
    ByteBands unused;
    return parseByteBands(text, unused);
  };
}
#define CFX_MPI_BAND_PARAM(var, env, def, coll)                                                                    \
  CFX_PARAM(std::string, var, env, def,                                                                            \
            "libconflux_mpi.so: " coll                                                                             \
            " calls of LO <= bytes < HI (bytes as for the _MIN_BYTES knob) stay with "                             \
            "MPI, for each comma-separated LO-HI range (byte counts with an optional K, M or G suffix, at most 4 " \
            "ranges); none: no band.",                                                                             \
            validBands())
CFX_MPI_BAND_PARAM(allreduceBandParam, "CFX_MPI_ALLREDUCE_MPI_BAND", "none", "MPI_Allreduce");
CFX_MPI_BAND_PARAM(reduceBandParam, "CFX_MPI_REDUCE_MPI_BAND", "none", "MPI_Reduce");
CFX_MPI_BAND_PARAM(bcastBandParam, "CFX_MPI_BCAST_MPI_BAND", "none", "MPI_Bcast");
CFX_MPI_BAND_PARAM(allgatherBandParam, "CFX_MPI_ALLGATHER_MPI_BAND", "none", "MPI_Allgather");
CFX_MPI_BAND_PARAM(reduceScatterBandParam, "CFX_MPI_REDUCE_SCATTER_MPI_BAND", "none", "MPI_Reduce_scatter(_block)");
CFX_MPI_BAND_PARAM(alltoallBandParam, "CFX_MPI_ALLTOALL_MPI_BAND", "none", "MPI_Alltoall");
CFX_MPI_BAND_PARAM(gatherBandParam, "CFX_MPI_GATHER_MPI_BAND", "none", "MPI_Gather");
CFX_MPI_BAND_PARAM(scatterBandParam, "CFX_MPI_SCATTER_MPI_BAND", "none", "MPI_Scatter");
CFX_MPI_BAND_PARAM(alltoallvBandParam, "CFX_MPI_ALLTOALLV_MPI_BAND", "none", "MPI_Alltoallv");
CFX_MPI_BAND_PARAM(scanBandParam, "CFX_MPI_SCAN_MPI_BAND", "none", "MPI_Scan and MPI_Exscan");
#undef CFX_MPI_BAND_PARAM

// A default that fails to parse is a bug caught by the knob registry test (defaultIsValid); here it means no band.
ByteBands bandsOf(const param::Param<std::string>& p) {
  ByteBands b;
  if (parseByteBands(p.get(), b)) b = ByteBands{};
  return b;
}

MpiOptions load() {
  MpiOptions o;
  o.disable = disableParam.get();
  o.stats = statsParam.get();
  o.routeBarrier = barrierParam.get();
  auto set = [&o](MpiColl c, int64_t v) { o.minBytes[static_cast<size_t>(c)] = v; };
  set(MpiColl::Allreduce, allreduceMinParam.get());
  set(MpiColl::Reduce, reduceMinParam.get());
  set(MpiColl::Bcast, bcastMinParam.get());
  set(MpiColl::Allgather, allgatherMinParam.get());
  set(MpiColl::ReduceScatterBlock, reduceScatterMinParam.get());
  set(MpiColl::ReduceScatter, reduceScatterMinParam.get());
  set(MpiColl::Alltoall, alltoallMinParam.get());
  set(MpiColl::Gather, gatherMinParam.get());
  set(MpiColl::Scatter, scatterMinParam.get());
  set(MpiColl::Alltoallv, alltoallvMinParam.get());
  set(MpiColl::Scan, scanMinParam.get());
  set(MpiColl::Exscan, scanMinParam.get());
  set(MpiColl::Barrier, kMaxBytes);
  auto band = [&o](MpiColl c, const param::Param<std::string>& p) { o.mpiBands[static_cast<size_t>(c)] = bandsOf(p); };
  band(MpiColl::Allreduce, allreduceBandParam);
  band(MpiColl::Reduce, reduceBandParam);
  band(MpiColl::Bcast, bcastBandParam);
  band(MpiColl::Allgather, allgatherBandParam);
  band(MpiColl::ReduceScatterBlock, reduceScatterBandParam);
  band(MpiColl::ReduceScatter, reduceScatterBandParam);
  band(MpiColl::Alltoall, alltoallBandParam);
  band(MpiColl::Gather, gatherBandParam);
  band(MpiColl::Scatter, scatterBandParam);
  band(MpiColl::Alltoallv, alltoallvBandParam);
  band(MpiColl::Scan, scanBandParam);
  band(MpiColl::Exscan, scanBandParam);
  return o;
}

// A byte count: decimal digits, then optionally K, M or G (binary). Advances pos past it.
std::optional<std::string> parseBytes(const std::string& text, size_t& pos, int64_t& out) {
  const size_t start = pos;
  int64_t v = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
    const int digit = text[pos] - '0';
    if (v > (kMaxBytes - digit) / 10) return "byte count too large in '" + text + "'";
    v = v * 10 + digit;
    ++pos;
  }
  if (pos == start) return "expected a byte count at offset " + std::to_string(start) + " of '" + text + "'";
  int shift = 0;
  if (pos < text.size()) {
    switch (text[pos]) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) ++pos;
  }
  if (v > (kMaxBytes >> shift)) return "byte count too large in '" + text + "'";
  out = v << shift;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> parseByteBands(const std::string& text, ByteBands& out) {
  ByteBands bands;
  if (text.empty() || text == "none") {
    out = bands;
    return std::nullopt;
  }
  size_t pos = 0;
  while (true) {
    if (bands.count == kMaxMpiBands) return "more than " + std::to_string(kMaxMpiBands) + " ranges in '" + text + "'";
    ByteBand b;
    if (auto err = parseBytes(text, pos, b.lo)) return err;
    if (pos >= text.size() || text[pos] != '-') return "expected LO-HI in '" + text + "'";
    ++pos;
    if (auto err = parseBytes(text, pos, b.hi)) return err;
    if (b.lo >= b.hi) return "empty range (LO >= HI) in '" + text + "'";
    bands.band[bands.count++] = b;
    if (pos == text.size()) break;
    if (text[pos] != ',') return "unexpected '" + text.substr(pos, 1) + "' in '" + text + "'";
    ++pos;
  }
  out = bands;
  return std::nullopt;
}

bool sizeRoutes(const MpiOptions& options, MpiColl coll, int64_t bytes) {
  const auto i = static_cast<size_t>(blockingForm(coll));
  if (bytes < options.minBytes[i]) return false;
  const ByteBands& bands = options.mpiBands[i];
  for (size_t k = 0; k < bands.count; ++k) {
    if (bytes >= bands.band[k].lo && bytes < bands.band[k].hi) return false;
  }
  return true;
}

bool routesEverySize(const MpiOptions& options, MpiColl coll) {
  const auto i = static_cast<size_t>(blockingForm(coll));
  return options.minBytes[i] == 0 && options.mpiBands[i].count == 0;
}

const char* mpiCollName(MpiColl coll) {
  static constexpr const char* kNames[kNumMpiColls] = {
      "MPI_Allreduce",       "MPI_Reduce",     "MPI_Bcast",   "MPI_Allgather",  "MPI_Reduce_scatter_block",
      "MPI_Reduce_scatter",  "MPI_Alltoall",   "MPI_Gather",  "MPI_Scatter",    "MPI_Alltoallv",
      "MPI_Scan",            "MPI_Exscan",     "MPI_Barrier", "MPI_Iallreduce", "MPI_Ireduce",
      "MPI_Ibcast",          "MPI_Iallgather", "MPI_Ireduce_scatter_block",     "MPI_Ireduce_scatter",
      "MPI_Ialltoall",       "MPI_Igather",    "MPI_Iscatter", "MPI_Ialltoallv", "MPI_Iscan",
      "MPI_Iexscan",         "MPI_Ibarrier"};
  return kNames[static_cast<size_t>(coll)];
}

const MpiOptions& mpiOptions() {
  static const MpiOptions options = load();
  return options;
}

}  // namespace cfx::interpose
