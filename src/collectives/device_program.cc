// SPDX-License-Identifier: Apache-2.0
// Device programs (collectives layer): the builder, the windows of zero-copy ops, and the dispatch of a group's
// steps to their forms (device_program.h).
#include "collectives/device_program.h"

#include <memory>

#include "primitives/device/reduce_args.h"
#include "primitives/device_kernels.h"
#include "transport/cuda_ipc/flag_board.h"
#include "transport/cuda_ipc/ipc_scratch.h"
#include "transport/cuda_ipc/ipc_window.h"

namespace cfx::coll {

namespace {

// What the scratch forms' first barrier agrees on: a value no zero-copy op's fingerprint is expected to take, so a
// rank on the scratch form beside one on the zero-copy form fails as the broken symmetric promise it is.
constexpr uint64_t kScratchForm = 0x5c7a7c4f00000001ull;

// Every rank's copy of [p, p + bytes), where p lies in a zero-copy window of this rank and the same offset fits in
// every peer's window (NCCL_WIN_COLL_SYMMETRIC: the offset is the same on every rank). Empty where not.
std::vector<cuda::CUdeviceptr> symmetricSpans(const DeviceComm& comm, const void* p, size_t bytes,
                                              uint64_t* fingerprint) {
  if (!comm.findWindow) return {};
  const WindowSpan span = comm.findWindow(p, bytes);
  if (span.window == nullptr) return {};
  std::vector<cuda::CUdeviceptr> all(static_cast<size_t>(comm.nRanks));
  for (int r = 0; r < comm.nRanks; ++r) {
    if (span.offset + bytes > span.window->bytes(r)) return {};
    all[static_cast<size_t>(r)] = span.window->base(r) + span.offset;
  }
  // Offsets and sizes, which every rank must share; not addresses, which differ between processes.
  *fingerprint = (*fingerprint * 1000003u) ^ (span.offset * 31u + span.window->bytes(0));
  return all;
}

}  // namespace

void ProgramBuilder::copy(cuda::CUdeviceptr dst, cuda::CUdeviceptr src, size_t bytes) {
  work_.push_back([=](cuda::CUstream s) {
    return cuda::check(cuda::driver()->memcpyDtoDAsync(dst, src, bytes, s), "cuMemcpyDtoDAsync (device-direct)");
  });
}

void ProgramBuilder::host(std::function<Status()> step) {
  program_->segments.push_back([work = std::move(work_)](cuda::CUstream s) -> Status {
    for (const auto& w : work) CFX_TRY(w(s));
    return Status();
  });
  work_.clear();
  program_->hostSteps.push_back(std::move(step));
}

void ProgramBuilder::deviceBarrier(transport::cuda_ipc::FlagBoard* board) {
  const uint32_t e = board->nextBarrier();
  work([board, e](cuda::CUstream s) -> Status {
    const cuda::Driver* d = cuda::driver();
    const int me = board->rank();
    // Arrival, to every peer's row and to this row (what the watchdog reads); the writes' default fence orders
    // the stream's earlier copies and kernels before them.
    for (int p = 0; p < board->nRanks(); ++p) {
      if (p == me) continue;
      CFX_TRY(cuda::check(d->streamWriteValue32(s, board->tell(p), e, 0), "cuStreamWriteValue32 (device barrier)"));
    }
    CFX_TRY(cuda::check(d->streamWriteValue32(s, board->arrivedWord(), e, 0), "cuStreamWriteValue32 (device barrier)"));
    for (int p = 0; p < board->nRanks(); ++p) {
      if (p == me) continue;
      CFX_TRY(cuda::check(d->streamWaitValue32(s, board->from(p), e, cuda::kStreamWaitValueGeq),
                          "cuStreamWaitValue32 (device barrier)"));
    }
    return cuda::check(d->streamWriteValue32(s, board->passedWord(), e, 0), "cuStreamWriteValue32 (device barrier)");
  });
}

void ProgramBuilder::finish() {
  if (work_.empty()) return;
  program_->segments.push_back([work = std::move(work_)](cuda::CUstream s) -> Status {
    for (const auto& w : work) CFX_TRY(w(s));
    return Status();
  });
  work_.clear();
}

void ProgramBuilder::reduce(const prims::DeviceKernels* kernels, const ReduceOp& op, cuda::CUdeviceptr dst,
                            const std::vector<cuda::CUdeviceptr>& srcs, size_t count) {
  if (count == 0) return;
  work([kernels, op, dst, srcs, count](cuda::CUstream s) {
    return kernels->reduceCopy(op, dst, srcs.data(), static_cast<int>(srcs.size()), count, true, s);
  });
}

cuda::CUdeviceptr DeviceOp::block(size_t rank, size_t byteOffset) const {
  return comm.scratch->block(static_cast<int>(rank)) + byteOffset;
}

size_t DeviceOp::scratchBytes() const { return comm.scratch->bytes() - 2 * comm.oneShotBytes; }

void DeviceOp::sync(ProgramBuilder& b) const {
  if (comm.board != nullptr) {
    b.deviceBarrier(comm.board);
  } else {
    b.host(barrier);
  }
}

std::optional<ZeroCopySpans> zeroCopySpans(const DeviceComm& comm, const CollArgs& a) {
  const size_t es = dataTypeSize(a.type);
  const size_t n = static_cast<size_t>(comm.nRanks);
  ZeroCopySpans z;
  switch (a.coll) {
    case Collective::AllReduce:
      z.send = symmetricSpans(comm, a.sendbuff, a.count * es, &z.fingerprint);
      z.recv = symmetricSpans(comm, a.recvbuff, a.count * es, &z.fingerprint);
      if (z.send.empty() || z.recv.empty()) return std::nullopt;
      return z;
    case Collective::AllGather:
      if (a.sendbuff == static_cast<const char*>(a.recvbuff) + static_cast<size_t>(comm.rank) * a.count * es) {
        // In place, each rank's input is its block of its output, at a different offset on every rank: found
        // through the output's window. The mark makes a rank in place and one not fail the agreement.
        z.send = symmetricSpans(comm, a.recvbuff, a.count * es * n, &z.fingerprint);
        for (size_t p = 0; p < z.send.size(); ++p) z.send[p] += p * a.count * es;
        z.fingerprint ^= 0x9e3779b97f4a7c15ull;
      } else {
        z.send = symmetricSpans(comm, a.sendbuff, a.count * es, &z.fingerprint);
      }
      break;
    case Collective::AlltoAll:
      // In place, a rank would overwrite blocks of its buffer that peers are still reading: the scratch form.
      if (a.sendbuff == a.recvbuff) return std::nullopt;
      [[fallthrough]];
    case Collective::ReduceScatter:
      z.send = symmetricSpans(comm, a.sendbuff, a.count * es * n, &z.fingerprint);
      break;
    default:
      return std::nullopt;
  }
  if (z.send.empty()) return std::nullopt;
  return z;
}

Result<DeviceProgram> buildDeviceProgram(const DeviceComm& comm, const std::vector<DeviceStep>& colls,
                                         const std::vector<DeviceMessage>& p2p) {
  DeviceProgram program;
  ProgramBuilder b(&program);
  // With device-side barriers only (every step a scratch or one-shot form, no sends or receives), the program needs
  // no host step: core orders it after the communicator's earlier device programs on the stream instead.
  bool deviceOnly = comm.deviceOnly && comm.board != nullptr && p2p.empty();
  for (const DeviceStep& step : colls) deviceOnly = deviceOnly && step.algorithm != Algorithm::IpcZeroCopy;
  if (!deviceOnly) b.host([] { return Status(); });  // see buildDeviceProgram's contract: the op starts in call order
  if (!p2p.empty()) p2pIpc(comm, p2p, b);
  for (const DeviceStep& step : colls) {
    const CollArgs& a = step.args;
    if (!hasDeviceAlgorithm(a.coll, step.algorithm)) {
      return Status::error(Errc::InvalidUsage, strprintf("%s has no %s form", collectiveName(a.coll),
                                                         algorithmName(step.algorithm)));
    }
    if (reducesOnDevice(a.coll) && comm.kernels == nullptr) {
      return Status::error(Errc::InvalidUsage, strprintf("%s over %s needs the reduce kernels, which are not loaded",
                                                         collectiveName(a.coll), algorithmName(step.algorithm)));
    }
    const size_t es = dataTypeSize(a.type);
    const auto n = static_cast<size_t>(comm.nRanks);
    const auto me = static_cast<size_t>(comm.rank);
    if (step.algorithm == Algorithm::IpcZeroCopy) {
      const std::optional<ZeroCopySpans> z = zeroCopySpans(comm, a);
      if (!z) {
        return Status::error(Errc::InvalidUsage, strprintf("%s planned zero-copy, but its buffers are not in "
                                                           "symmetric windows", collectiveName(a.coll)));
      }
      const DeviceOp d{comm, a, comm.host.barrier, es, n, me};
      b.host([agree = comm.host.agree, v = z->fingerprint] { return agree(v); });
      if (a.coll == Collective::AllReduce) {
        allReduceIpcZeroCopy(d, *z, b);
      } else if (a.coll == Collective::ReduceScatter) {
        reduceScatterIpcZeroCopy(d, *z, b);
      } else {
        allGatherIpcZeroCopy(d, *z, b);
      }
      continue;
    }
    // The scratch forms' first barrier agrees that every rank took a scratch form (see kScratchForm); the op's host
    // steps run one after another on the progress thread, so the flag needs no lock.
    auto scratchBarrier = [agreed = std::make_shared<bool>(false), agree = comm.host.agree,
                           barrier = comm.host.barrier]() {
      if (*agreed) return barrier();
      *agreed = true;
      return agree(kScratchForm);
    };
    const DeviceOp d{comm, a, scratchBarrier, es, n, me};
    if (step.algorithm == Algorithm::IpcOneShot) {
      if (comm.board == nullptr || a.coll != Collective::AllReduce || a.count * es > comm.oneShotBytes) {
        return Status::error(Errc::InvalidUsage, "IpcOneShot needs an all-reduce that fits its slot and a flag board");
      }
      allReduceIpcOneShot(d, b);
      continue;
    }
    switch (a.coll) {
      case Collective::AllReduce:
      case Collective::Reduce: allReduceIpcScratch(d, b); break;
      case Collective::ReduceScatter: reduceScatterIpcScratch(d, b); break;
      case Collective::AllGather:
      case Collective::Gather:
      case Collective::Broadcast: allGatherIpcScratch(d, b); break;
      case Collective::AlltoAll:
      case Collective::Scatter: alltoAllIpcScratch(d, b); break;
      case Collective::BroadcastDelta:
      case Collective::Scan:
      case Collective::AllToAllv:
      case Collective::MoeDispatch:
      case Collective::MoeCombine: break;  // no form (hasDeviceAlgorithm said so above)
    }
  }
  if (deviceOnly) {
    b.finish();
  } else if (b.pending()) {
    b.host([] { return Status(); });  // device-side barriers last: the op still ends at a host step
  }
  return program;
}

}  // namespace cfx::coll
