// SPDX-License-Identifier: Apache-2.0
// perf/compare: Gloo's C++ collectives over its TCP transport on 127.0.0.1 (or on the interface named by
// GLOO_SOCKET_IFNAME, as PyTorch's Gloo backend reads it: compare.py's namespace mode sets it to each host's
// device), float32 sum, host memory. One line per size in the format of bench_common.h. Ranks rendezvous through
// a gloo::rendezvous::FileStore directory.
// Build: g++ -O2 -std=c++17 gloo_bench.cc -lgloo -lpthread -o gloo_bench (compare.py does this).
//
// usage: RANK=r WORLD_SIZE=n GLOO_STORE=<dir> gloo_bench --coll all_reduce --sizes 1024,4096 --algo ring
//        [--iters 20] [--warmup 5] [--check 1]
// Algorithms (--algo), each Gloo's own class or function:
//   all_reduce:     ring (AllreduceRing), ring_chunked (AllreduceRingChunked),
//                   halving_doubling (AllreduceHalvingDoubling), bcube (AllreduceBcube)  -- all in place
//   all_gather:     ring (AllgatherRing), default (gloo::allgather)
//   reduce_scatter: halving_doubling (ReduceScatterHalvingDoubling, in place)
//   broadcast:      one_to_all (BroadcastOneToAll, in place), default (gloo::broadcast, in place)
//   alltoall:       default (gloo::alltoall)
// Exit status: 0, 2 bad usage or unsupported algorithm, 7 a check found wrong elements.

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "bench_common.h"

namespace {

using cfxcmp::Coll;
using Ctx = std::shared_ptr<gloo::Context>;

// One prepared op on this size's buffers: run() issues it once. Old-style algorithm objects are built once per
// size (their setup, like a communicator's, is outside the timing); new-style calls are issued as they come.
struct Op {
  std::unique_ptr<gloo::Algorithm> algorithm;
  std::function<void()> call;
  void run() { algorithm ? algorithm->run() : call(); }
};

// Buffers: `send` holds the input; `recv` the output (aliases `send` for in-place algorithms). Returns false when
// the algorithm does not exist for the collective.
bool makeOp(const Ctx& ctx, const cfxcmp::Options& o, const cfxcmp::Layout& l, float* send, float* recv,
            bool* inPlace, Op* op) {
  const std::string& a = o.algo;
  const int count = static_cast<int>(l.sendCount);
  const int n = ctx->size;
  std::vector<float*> ptrs{send};
  *inPlace = true;
  switch (o.coll) {
    case Coll::AllReduce:
      if (a == "ring") op->algorithm.reset(new gloo::AllreduceRing<float>(ctx, ptrs, count));
      else if (a == "ring_chunked") op->algorithm.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, count));
      else if (a == "halving_doubling")
        op->algorithm.reset(new gloo::AllreduceHalvingDoubling<float>(ctx, ptrs, count));
      else if (a == "bcube") op->algorithm.reset(new gloo::AllreduceBcube<float>(ctx, ptrs, count));
      else return false;
      return true;
    case Coll::ReduceScatter:
      if (a != "halving_doubling") return false;
      op->algorithm.reset(new gloo::ReduceScatterHalvingDoubling<float>(
          ctx, ptrs, count, std::vector<int>(n, static_cast<int>(l.block))));
      return true;
    case Coll::AllGather:
      *inPlace = false;
      if (a == "ring") {
        op->algorithm.reset(new gloo::AllgatherRing<float>(ctx, {send}, recv, static_cast<int>(l.block)));
      } else if (a == "default") {
        op->call = [ctx, send, recv, l] {
          gloo::AllgatherOptions opts(ctx);
          opts.setInput(send, l.sendCount);
          opts.setOutput(recv, l.recvCount);
          gloo::allgather(opts);
        };
      } else {
        return false;
      }
      return true;
    case Coll::Broadcast:
      if (a == "one_to_all") {
        op->algorithm.reset(new gloo::BroadcastOneToAll<float>(ctx, ptrs, l.sendCount, 0));
      } else if (a == "default") {
        op->call = [ctx, send, l] {
          gloo::BroadcastOptions opts(ctx);
          opts.setOutput(send, l.sendCount);
          opts.setRoot(0);
          gloo::broadcast(opts);
        };
      } else {
        return false;
      }
      return true;
    case Coll::AllToAll:
      if (a != "default") return false;
      *inPlace = false;
      op->call = [ctx, send, recv, l] {
        gloo::AlltoallOptions opts(ctx);
        opts.setInput(send, l.sendCount);
        opts.setOutput(recv, l.recvCount);
        gloo::alltoall(opts);
      };
      return true;
    case Coll::ExScan:
      return false;  // Gloo has no scan
  }
  return false;
}

// Set just before the final barrier, once every result is printed: from then on a peer closing its connections is
// expected, and Gloo's transport thread seeing that (it throws gloo::IoException into std::terminate) must not fail
// the run.
std::atomic<int> gFinalStatus{-1};

// Sum (or max) of `count` doubles over ranks, on every rank.
void reduceDoubles(const Ctx& ctx, double* v, int count, const gloo::ReductionFunction<double>* fn) {
  gloo::AllreduceRing<double>(ctx, {v}, count, fn).run();
}

}  // namespace

int main(int argc, char** argv) {
  const char* rankEnv = std::getenv("RANK");
  const char* sizeEnv = std::getenv("WORLD_SIZE");
  const char* storeEnv = std::getenv("GLOO_STORE");
  if (!rankEnv || !sizeEnv || !storeEnv) {
    std::fprintf(stderr, "gloo_bench: RANK, WORLD_SIZE and GLOO_STORE (a shared directory) must be set\n");
    return 2;
  }
  const int rank = std::atoi(rankEnv), nRanks = std::atoi(sizeEnv);
  std::set_terminate([] {
    int status = gFinalStatus.load();
    if (status >= 0) std::_Exit(status);
    std::abort();
  });
  cfxcmp::Options o;
  std::string err = cfxcmp::parseOptions(argc, argv, &o);
  if (!err.empty()) {
    std::fprintf(stderr, "gloo_bench: %s\n", err.c_str());
    return 2;
  }

  gloo::transport::tcp::attr attr("127.0.0.1");
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.hostname.clear();
    attr.iface = iface;
  }
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(storeEnv);
  auto rctx = std::make_shared<gloo::rendezvous::Context>(rank, nRanks);
  rctx->setTimeout(std::chrono::seconds(300));
  rctx->connectFullMesh(store, device);
  Ctx ctx = rctx;

  size_t totalWrong = 0;
  for (const size_t& nominal : o.sizes) {
    cfxcmp::Layout l = cfxcmp::layoutFor(o.coll, nominal, nRanks);
    std::vector<float> send(l.sendCount), recvStore(l.recvCount), expected(l.recvCount);
    Op op;
    bool inPlace = true;
    if (!makeOp(ctx, o, l, send.data(), recvStore.data(), &inPlace, &op)) {
      if (rank == 0) std::fprintf(stderr, "gloo_bench: no algorithm '%s' for %s\n", o.algo.c_str(), o.collName.c_str());
      return 2;
    }
    const float* result = inPlace ? send.data() : recvStore.data();

    size_t wrong = 0;
    if (o.check) {
      cfxcmp::fillInput(o.coll, rank, l, send.data());
      cfxcmp::fillExpected(o.coll, rank, nRanks, l, expected.data());
      op.run();
      double local = static_cast<double>(cfxcmp::countWrong(result, expected.data(), l.recvCount));
      reduceDoubles(ctx, &local, 1, gloo::ReductionFunction<double>::sum);
      wrong = static_cast<size_t>(local);
    }
    // In-place algorithms keep reducing their own output; start the timed ops from the input again. The values
    // grow by at most nRanks per op and stay finite floats for the iteration counts used here.
    cfxcmp::fillInput(o.coll, rank, l, send.data());

    for (int i = 0; i < o.warmup; ++i) op.run();
    std::vector<double> iter(o.iters);
    gloo::BarrierAllToAll(ctx).run();
    auto start = std::chrono::steady_clock::now();
    auto prev = start;
    for (int i = 0; i < o.iters; ++i) {
      op.run();
      auto now = std::chrono::steady_clock::now();
      iter[i] = std::chrono::duration<double>(now - prev).count();
      prev = now;
    }
    double mean = std::chrono::duration<double>(prev - start).count() / o.iters;
    reduceDoubles(ctx, &mean, 1, gloo::ReductionFunction<double>::sum);
    reduceDoubles(ctx, iter.data(), o.iters, gloo::ReductionFunction<double>::max);
    if (rank == 0) cfxcmp::printResult("gloo", o, nominal, l, nRanks, mean / nRanks, iter, wrong);
    totalWrong += wrong;
    // All results are out after the last size; from here a peer leaving early is no failure.
    if (&nominal == &o.sizes.back()) gFinalStatus = totalWrong ? 7 : 0;
    // Every peer is done with this size's algorithm object before anyone destroys its buffers.
    gloo::BarrierAllToAll(ctx).run();
  }
  // Leave without tearing down the context: the peers may already be gone (see gFinalStatus).
  std::fflush(stdout);
  std::_Exit(gFinalStatus);
}
