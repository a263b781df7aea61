// SPDX-License-Identifier: Apache-2.0
// Declares the CFX_MPI_* knobs of libconflux_mpi.so (interpose layer). The allreduce threshold comes from
// measurements against Open MPI 4.1 (vader) on one host, 2 and 4 ranks (tests/interpose/run_bench.sh, table in
// docs/notes/mpi_interposer.md): with 2 ranks MPI is faster at 1 KiB, the two tie at 4 KiB and Conflux is ~4x
// faster from 16 KiB on; with 4 ranks on 2 cores Conflux is as fast or faster at every size. So calls of 8 KiB
// and more are routed. The other collectives are not measured yet and keep a conservative 64 KiB.
#include "interpose/mpi_options.h"

#include <limits>

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
CFX_PARAM(int64_t, reduceMinParam, "CFX_MPI_REDUCE_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Reduce calls of fewer bytes (count x type size) stay with MPI.", atLeast<int64_t>(0));
CFX_PARAM(int64_t, bcastMinParam, "CFX_MPI_BCAST_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Bcast calls of fewer bytes (count x type size) stay with MPI.", atLeast<int64_t>(0));
CFX_PARAM(int64_t, allgatherMinParam, "CFX_MPI_ALLGATHER_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Allgather calls whose receive buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, reduceScatterMinParam, "CFX_MPI_REDUCE_SCATTER_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Reduce_scatter(_block) calls whose input holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, alltoallMinParam, "CFX_MPI_ALLTOALL_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Alltoall calls whose receive buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, gatherMinParam, "CFX_MPI_GATHER_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Gather calls whose root buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));
CFX_PARAM(int64_t, scatterMinParam, "CFX_MPI_SCATTER_MIN_BYTES", 65536,
          "libconflux_mpi.so: MPI_Scatter calls whose root buffer holds fewer bytes stay with MPI.",
          atLeast<int64_t>(0));

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
  set(MpiColl::Barrier, kMaxBytes);
  return o;
}

}  // namespace

const char* mpiCollName(MpiColl coll) {
  static constexpr const char* kNames[kNumMpiColls] = {
      "MPI_Allreduce", "MPI_Reduce",  "MPI_Bcast",  "MPI_Allgather", "MPI_Reduce_scatter_block",
      "MPI_Reduce_scatter", "MPI_Alltoall", "MPI_Gather", "MPI_Scatter", "MPI_Barrier",
      "MPI_Iallreduce", "MPI_Ireduce",  "MPI_Ibcast", "MPI_Iallgather", "MPI_Ireduce_scatter_block",
      "MPI_Ireduce_scatter", "MPI_Ialltoall", "MPI_Igather", "MPI_Iscatter", "MPI_Ibarrier"};
  return kNames[static_cast<size_t>(coll)];
}

const MpiOptions& mpiOptions() {
  static const MpiOptions options = load();
  return options;
}

}  // namespace cfx::interpose
