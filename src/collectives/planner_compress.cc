// SPDX-License-Identifier: Apache-2.0
// The planner's compressed side (collectives layer): when a codec pays, and which compressed algorithm. Pure.
//
// A codec trades CPU for wire bytes. On shared memory a rank copies at several GB/s and a codec encodes at one to
// ten: it never pays there, and Auto keeps such ops plain. Across a network link of 1-10 Gbit/s the wire is the
// narrower pipe by far, and a quarter of the bytes (int8) is nearly a quarter of the time. The model prices each
// phase of a compressed algorithm at the larger of its wire time and its CPU time (a verb encodes slice by slice
// while earlier slices travel), plus a message latency per phase.
#include <algorithm>
#include <cmath>
#include <limits>

#include "collectives/planner.h"

namespace cfx::coll {

namespace {

double cpuUs(double fp32Bytes, double gbs) { return gbs > 0 ? fp32Bytes / (gbs * 1e3) : 0; }

// Wire bytes per buffer byte of this op under its codec, as the verbs cut it.
double wireRatio(const PlanRequest& req) {
  const size_t elt = dataTypeSize(req.codec->valueType());
  const size_t count = std::max<size_t>(req.bytes / elt, 1);
  const size_t piece = std::max<size_t>(req.codec->pieceElems(req.sliceBytes), 1);
  return static_cast<double>(req.codec->framedBytes(count, piece)) / static_cast<double>(count * elt);
}

// Quantise-once over g ranks on `link`, of `bytes` of buffer (encoded.h): two all-to-all phases, each a message
// latency plus the larger of its wire time and its CPU time. `bytes` counted as fp32 for the CPU rates.
double quantOnceUs(const PlanRequest& req, const topo::LinkFigures& link, double g, double bytes) {
  if (g <= 1) return 0;
  const Fabric& f = *req.fabric;
  const CodecSpeed speed = codecSpeed(req.codec->format());
  const double fp32 = bytes * 4.0 / static_cast<double>(dataTypeSize(req.codec->valueType()));
  const double out = (g - 1) / g * bytes * wireRatio(req);
  // A phase is g - 1 shifted steps (encoded.h), each a message latency and a step's overhead.
  const double hop = (g - 1) * (link.latencyUs + f.stepUs);
  const double phase1 = std::max(transferUs(link, out), cpuUs((g - 1) / g * fp32, speed.encodeGBs) +
                                                            cpuUs((g - 1) / g * fp32, speed.decodeGBs));
  const double phase2 = std::max(transferUs(link, out), cpuUs(fp32 / g, speed.encodeGBs) +
                                                            cpuUs((g - 1) / g * fp32, speed.decodeGBs));
  return 2 * hop + phase1 + phase2;
}

bool compressible(Collective coll) {
  return coll == Collective::AllReduce || coll == Collective::ReduceScatter || coll == Collective::AllGather ||
         coll == Collective::Broadcast;
}

}  // namespace

CodecSpeed codecSpeed(compress::Format format) {
  // One core of this project's 2-core test machine, 32 MiB buffers (perf/bench/codec_bench.cc; memory-bound, the
  // in-cache rates are 1.5-3x these). docs/notes/compression.md has the table.
  switch (format) {
    case compress::Format::Bf16: return {4.5, 7.0};
    case compress::Format::Fp16: return {3.0, 3.8};
    case compress::Format::Int8: return {3.6, 5.9};
    case compress::Format::MxInt8: return {2.7, 3.6};
    case compress::Format::MxFp8: return {0.7, 1.3};
    case compress::Format::Int4: return {0.6, 2.2};
    case compress::Format::Fp8: return {0.6, 3.8};
    case compress::Format::TopK: return {0.27, 20.0};
    case compress::Format::None: break;
  }
  return {1.0, 1.0};
}

double estimateCompressedUs(const PlanRequest& req, Algorithm algorithm) {
  if (req.fabric == nullptr || req.codec == nullptr || req.nRanks < 1 ||
      !hasCompressedAlgorithm(req.coll, algorithm, req.codec->format())) {
    return -1;
  }
  const Fabric& f = *req.fabric;
  const double n = req.nRanks;
  const double bytes = static_cast<double>(req.bytes);
  const CodecSpeed speed = codecSpeed(req.codec->format());
  const double fp32 = bytes * 4.0 / static_cast<double>(dataTypeSize(req.codec->valueType()));
  const double ratio = wireRatio(req);
  const double hop = f.ring.latencyUs + f.stepUs;
  const double fanOut = (n - 1) * (f.ring.latencyUs + f.stepUs);  // a phase of n - 1 shifted steps
  switch (algorithm) {
    case Algorithm::QuantOnce:
      if (req.coll == Collective::AllReduce) return quantOnceUs(req, f.ring, n, bytes);
      // ReduceScatter: phase 1 of n blocks; AllGather: phase 2 of this rank's block to n - 1 peers.
      if (req.coll == Collective::ReduceScatter) {
        return fanOut + std::max(transferUs(f.ring, (n - 1) / n * bytes * ratio),
                              cpuUs((n - 1) / n * fp32, speed.encodeGBs) + cpuUs((n - 1) / n * fp32, speed.decodeGBs));
      }
      return fanOut + std::max(transferUs(f.ring, (n - 1) / n * bytes * ratio),
                               cpuUs(fp32 / n, speed.encodeGBs) + cpuUs(fp32, speed.decodeGBs));
    case Algorithm::SparseGather:
      // Every rank's whole encoding to every other rank; then n decodes into an fp32 accumulator of the buffer.
      return fanOut + std::max(transferUs(f.ring, (n - 1) * bytes * ratio), cpuUs(fp32, speed.encodeGBs)) +
             cpuUs(n * fp32 * ratio, speed.decodeGBs) + cpuUs(fp32, 10.0);
    case Algorithm::Hier: {
      if (!f.hier) return quantOnceUs(req, f.ring, n, bytes);
      const double local = f.localRanks;
      const double k = static_cast<double>(hierSegments(req.bytes, f.localRanks, req.sliceBytes));
      const double host =
          2 * (local - 1) * (f.host.latencyUs + f.stepUs + transferUs(f.host, bytes / local / k));
      const double cross = quantOnceUs(req, f.cross, f.hosts, bytes / local) / k;
      return k * std::max(host, cross) + std::min(host, cross);
    }
    case Algorithm::Ring: {
      if (req.coll == Collective::Broadcast) break;
      // The plain ring's pattern at the codec's wire bytes, plus a decode and an encode of a chunk per hop.
      const double stages = 2 * (n - 1);
      const double slice = static_cast<double>(std::max<size_t>(req.sliceBytes, 1));
      const double loops = std::max(1.0, std::ceil(bytes * ratio / n / slice));
      const double stepUs = hop + transferUs(f.ring, bytes * ratio / n / loops);
      return loops * stages * stepUs +
             cpuUs((n - 1) / n * fp32, speed.encodeGBs) + cpuUs(2 * (n - 1) / n * fp32, speed.decodeGBs);
    }
    case Algorithm::Chain: {
      // Broadcast: a pipeline of slices down the chain, encoded at the root and decoded everywhere.
      const double slice = static_cast<double>(std::max<size_t>(req.sliceBytes, 1));
      const double wire = bytes * ratio;
      return (n - 1) * (hop + transferUs(f.ring, std::min(wire, slice))) + transferUs(f.ring, wire) +
             cpuUs(fp32, speed.encodeGBs) + cpuUs(fp32, speed.decodeGBs);
    }
    default: break;
  }
  return -1;
}

std::optional<Plan> chooseCompressed(const PlanRequest& req, const PlannerOptions& opts, double plainUs) {
  if (req.codec == nullptr || req.compressMode == CompressArgs::Mode::Never || !compressible(req.coll)) {
    return std::nullopt;
  }
  const compress::Format format = req.codec->format();
  auto usable = [&](Algorithm a) {
    if (!hasCompressedAlgorithm(req.coll, a, format) || !opts.allows(req.coll, a)) return false;
    return a != Algorithm::Hier || (req.fabric != nullptr && req.fabric->hier);
  };
  std::optional<Algorithm> best;
  double bestUs = -1;
  for (Algorithm a : {Algorithm::SparseGather, Algorithm::QuantOnce, Algorithm::Hier, Algorithm::Chain}) {
    if (!usable(a)) continue;
    const double us = estimateCompressedUs(req, a);
    if (!best || (us >= 0 && (bestUs < 0 || us < bestUs * (1 - kModelMargin)))) {
      best = a;
      bestUs = us;
    }
  }
  // The requantising ring's error grows with the ranks: only where NCCL_ALGO leaves nothing else.
  if (!best && usable(Algorithm::Ring)) {
    best = Algorithm::Ring;
    bestUs = estimateCompressedUs(req, Algorithm::Ring);
  }
  if (!best) return std::nullopt;
  if (req.compressMode == CompressArgs::Mode::Auto && !(plainUs >= 0 && bestUs >= 0 && bestUs < plainUs * (1 - kModelMargin))) {
    return std::nullopt;
  }
  Plan plan{*best};
  plan.codec = req.codec;
  return plan;
}

}  // namespace cfx::coll
