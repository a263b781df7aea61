// SPDX-License-Identifier: Apache-2.0
// One compressed collective (core layer); see compressed_op.h.
#include "core/compressed_op.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/planner.h"
#include "common/log.h"
#include "compress/sparse_delta.h"

namespace cfx::core {

namespace {

// The elements of the op's input and output on this rank, by NCCL's count semantics.
size_t inputValues(const coll::CollArgs& a, int nRanks) {
  return a.coll == coll::Collective::ReduceScatter ? a.count * static_cast<size_t>(nRanks) : a.count;
}
size_t outputValues(const coll::CollArgs& a, int nRanks) {
  return a.coll == coll::Collective::AllGather ? a.count * static_cast<size_t>(nRanks) : a.count;
}

double relativeL2(const void* got, const void* want, size_t n, DataType type) {
  std::vector<float> a(n), b(n);
  compress::toFloat(type, got, n, a.data());
  compress::toFloat(type, want, n, b.data());
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    err += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  return ref > 0 ? std::sqrt(err / ref) : std::sqrt(err);
}

}  // namespace

prims::Coro runCompressedOp(Communicator* comm, const coll::CollArgs& args, uint32_t seq, uint64_t opCount,
                            prims::Prims& prims) {
  const int n = comm->nRanks();
  const size_t elt = dataTypeSize(args.type);
  coll::PlanRequest req = comm->planRequest(args.coll, args.count, args.type);
  req.codec = &args.compress->codec;
  req.compressMode = args.compress->mode;
  const coll::Plan plan = comm->plan(req);
  CFX_INFO(log::Sys::Tuning, "%s opCount %lx: %s", coll::collectiveName(args.coll), static_cast<unsigned long>(opCount),
           coll::describePlan(req, plan, comm->options().planner).c_str());
  // The input, kept for the plain reference run before an in-place op overwrites it. A root-less broadcast rank has
  // no input of its own; it still takes part in the reference run.
  const bool measure = args.compress->measureError;
  const bool hasInput = args.coll != coll::Collective::Broadcast || comm->rank() == args.root;
  std::vector<char> input;
  if (measure && hasInput) {
    const char* in = static_cast<const char*>(args.sendbuff);
    input.assign(in, in + inputValues(args, n) * elt);
  }
  uint64_t sent = 0;
  prims.setOpSeq(seq);
  prims.setSentCounter(&sent);
  Status st = co_await coll::runCollective(args, plan, prims);
  prims.setSentCounter(nullptr);
  CFX_CO_TRY(std::move(st));
  CompressStats stats;
  stats.compressed = plan.codec != nullptr;
  stats.codec = stats.compressed ? compress::codecText(plan.codec->spec()) : "";
  stats.algorithm = coll::algorithmName(plan.algorithm);
  stats.bufferBytes = req.bytes;
  stats.wireBytes = sent;
  if (measure) {
    // Every rank measures (the codec says so on every rank): the plain op runs under a sequence number of its own.
    coll::CollArgs plain = args;
    plain.compress = nullptr;
    std::vector<char> reference(outputValues(args, n) * elt);
    plain.sendbuff = hasInput ? input.data() : reference.data();
    plain.recvbuff = reference.data();
    // Under a stamp of its own, so that its messages never pass for the compressed run's.
    const prims::OpStamp compressed = prims.opStamp();
    prims.setOpStamp({compressed.kind, compressed.params ^ 0x2545f491u}, prims.opNaming());
    CFX_CO_TRY(co_await coll::runCollective(plain, comm->plan(comm->planRequest(args.coll, args.count, args.type)), prims));
    prims.setOpStamp(compressed, prims.opNaming());
    stats.relL2Error = relativeL2(args.recvbuff, reference.data(), outputValues(args, n), args.type);
  }
  comm->compression().recordStats(std::move(stats));
  co_return Status();
}

prims::Coro runDeltaOp(Communicator* comm, const coll::CollArgs& args, uint32_t seq, uint64_t opCount,
                       prims::Prims& prims) {
  const coll::PlanRequest req = comm->planRequest(args.coll, args.count, args.type);
  const coll::Plan plan = comm->plan(req);
  CFX_INFO(log::Sys::Tuning, "%s opCount %lx: %s", coll::collectiveName(args.coll), static_cast<unsigned long>(opCount),
           coll::describePlan(req, plan, comm->options().planner).c_str());
  uint64_t sent = 0;
  prims.setOpSeq(seq);
  prims.setSentCounter(&sent);
  Status st = co_await coll::runCollective(args, plan, prims);
  prims.setSentCounter(nullptr);
  CFX_CO_TRY(std::move(st));
  CompressStats stats;
  const auto mode = static_cast<compress::DeltaMode>(args.delta->mode);
  stats.compressed = mode != compress::DeltaMode::Full;
  stats.codec = std::string("delta:") + compress::deltaModeName(mode);
  stats.algorithm = coll::algorithmName(plan.algorithm);
  stats.bufferBytes = req.bytes;
  stats.wireBytes = sent;
  comm->compression().recordStats(std::move(stats));
  co_return Status();
}

}  // namespace cfx::core
