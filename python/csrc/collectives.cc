// SPDX-License-Identifier: Apache-2.0
// The ProcessGroup operations of the "conflux" backend, each as the Conflux calls it makes on a host stream.
//
// Tensors are used in place wherever the call allows; list-shaped inputs and outputs (allgather, gather, scatter,
// reduce_scatter, allgather_coalesced) go through one flat staging tensor, filled at the call or copied out when the
// operation completes. alltoall and uneven alltoall_base are grouped sends and receives straight between the
// tensors. Compression needs nothing here: the group's codec (Options::codec) is its communicator's default, which
// the plain calls carry. Further conflux.h calls (All-Scan, all-to-all-v) would be methods of their own.
#include <cstring>
#include <numeric>

#include "process_group_conflux.h"

namespace cfx::torchext {
namespace {

using c10d::OpType;

ncclDataType_t dataType(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      TORCH_CHECK(false, "conflux: ", op, ": dtype ", t.scalar_type(), " is not supported (float32, float64, float16, ",
                  "bfloat16, int8, uint8, int32, int64, bool)");
  }
}

ncclRedOp_t redOp(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) {
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? ncclMax : ncclSum;  // bool: sum is "any", product "all"
    case c10d::ReduceOp::PRODUCT: return isBool ? ncclMin : ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "conflux: ", name, ": AVG of bool tensors is not defined");
      return ncclAvg;
    default:
      TORCH_CHECK(false, "conflux: ", name, ": reduction ", static_cast<int>(op.op_),
                  " (BAND, BOR, BXOR or PREMUL_SUM) is not supported; use SUM, PRODUCT, MIN, MAX or AVG");
  }
}

void checkTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "conflux: ", op, ": the tensor is on ", t.device(),
              "; the conflux backend takes CPU tensors only (for CUDA tensors use the \"nccl\" backend with "
              "Conflux's libnccl.so.2 preloaded)");
  TORCH_CHECK(t.layout() == at::kStrided, "conflux: ", op, ": ", t.layout(), " tensors are not supported");
  TORCH_CHECK(t.is_contiguous(), "conflux: ", op, ": the tensor is not contiguous (sizes ", t.sizes(), ", strides ",
              t.strides(), "); pass t.contiguous()");
  (void)dataType(t, op);
}

const at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "conflux: ", op, ": takes one tensor per process, got ", tensors.size());
  checkTensor(tensors[0], op);
  return tensors[0];
}

void checkLike(const at::Tensor& t, const at::Tensor& like, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "conflux: ", op, ": a tensor is on ", t.device(), "; CPU tensors only");
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "conflux: ", op, ": dtypes differ (", t.scalar_type(), " and ",
              like.scalar_type(), ")");
  TORCH_CHECK(t.numel() == like.numel(), "conflux: ", op, ": sizes differ (", t.numel(), " and ", like.numel(),
              " elements)");
}

// ncclGroupStart/End around several calls: every call is made, and the group then reports the first refusal (a
// refused call makes ncclGroupEnd launch nothing).
template <typename Body>
void grouped(Body body) {
  check(api().groupStart(), "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  const char* firstCall = nullptr;
  body([&](ncclResult_t rc, const char* call) {
    if (rc != ncclSuccess && first == ncclSuccess) {
      first = rc;
      firstCall = call;
    }
  });
  const ncclResult_t end = api().groupEnd();
  if (first != ncclSuccess) check(first, firstCall);
  check(end, "ncclGroupEnd");
}

// The flat staging tensor of `count` elements shaped like `like`.
at::Tensor flat(const at::Tensor& like, int64_t count) { return at::empty({count}, like.options()); }

void copyOut(const at::Tensor& staged, const std::vector<at::Tensor>& outs) {
  int64_t offset = 0;
  for (const auto& out : outs) {
    out.copy_(staged.narrow(0, offset, out.numel()).view(out.sizes()));
    offset += out.numel();
  }
}

void stageIn(const at::Tensor& staged, const std::vector<at::Tensor>& ins) {
  int64_t offset = 0;
  for (const auto& in : ins) {
    staged.narrow(0, offset, in.numel()).copy_(in.reshape({-1}));
    offset += in.numel();
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  const at::Tensor t = single(tensors, "allreduce");
  const ncclRedOp_t op = redOp(opts.reduceOp, t, "allreduce");
  return enqueue({OpType::ALLREDUCE, "allreduce",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().allReduce(t.data_ptr(), t.data_ptr(), t.numel(), dataType(t, ""), op, comm, s),
                          "ncclAllReduce");
                  },
                  tensors, {}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                        const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "conflux: allreduce_coalesced: no tensors");
  std::vector<ncclRedOp_t> ops;
  for (const auto& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    ops.push_back(redOp(opts.reduceOp, t, "allreduce_coalesced"));
  }
  return enqueue({OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    grouped([&](auto note) {
                      for (size_t i = 0; i < tensors.size(); ++i) {
                        const at::Tensor& t = tensors[i];
                        note(api().allReduce(t.data_ptr(), t.data_ptr(), t.numel(), dataType(t, ""), ops[i], comm, s),
                             "ncclAllReduce");
                      }
                    });
                  },
                  tensors, {}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  const at::Tensor t = single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "conflux: broadcast: rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue({OpType::BROADCAST, "broadcast",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().broadcast(t.data_ptr(), t.data_ptr(), t.numel(), dataType(t, ""), root, comm, s),
                          "ncclBroadcast");
                  },
                  tensors, {}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& opts) {
  const at::Tensor t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "conflux: reduce: rootTensor must be 0 (one tensor per process)");
  const ncclRedOp_t op = redOp(opts.reduceOp, t, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue({OpType::REDUCE, "reduce",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().reduce(t.data_ptr(), t.data_ptr(), t.numel(), dataType(t, ""), op, root, comm, s),
                          "ncclReduce");
                  },
                  tensors, {}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::AllgatherOptions& opts) {
  checkTensor(input, "_allgather_base");
  checkTensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "conflux: _allgather_base: dtypes differ");
  TORCH_CHECK(output.numel() == input.numel() * size_, "conflux: _allgather_base: the output holds ", output.numel(),
              " elements; it needs ", size_, " x ", input.numel());
  return enqueue({OpType::_ALLGATHER_BASE, "_allgather_base",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().allGather(input.data_ptr(), output.data_ptr(), input.numel(), dataType(input, ""),
                                          comm, s),
                          "ncclAllGather");
                  },
                  {output}, {input}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllgatherOptions& opts) {
  const at::Tensor in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
              "conflux: allgather: takes one list of ", size_, " output tensors");
  for (const auto& out : outputs[0]) checkLike(out, in, "allgather");
  at::Tensor staged = flat(in, in.numel() * size_);
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue({OpType::ALLGATHER, "allgather",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().allGather(in.data_ptr(), staged.data_ptr(), in.numel(), dataType(in, ""), comm, s),
                          "ncclAllGather");
                  },
                  outs, {in, staged}, [=] { copyOut(staged, outs); }, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "conflux: allgather_coalesced: no tensors");
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "conflux: allgather_coalesced: takes ", size_,
              " output lists (one per rank)");
  int64_t total = 0;
  for (const auto& in : inputs) {
    checkTensor(in, "allgather_coalesced");
    TORCH_CHECK(in.scalar_type() == inputs[0].scalar_type(), "conflux: allgather_coalesced: dtypes differ");
    total += in.numel();
  }
  std::vector<at::Tensor> outs;  // rank-major: rank i's copy of every input, in input order
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "conflux: allgather_coalesced: each output list needs ", inputs.size(),
                " tensors");
    for (size_t j = 0; j < list.size(); ++j) checkLike(list[j], inputs[j], "allgather_coalesced");
    outs.insert(outs.end(), list.begin(), list.end());
  }
  at::Tensor packed = flat(inputs[0], total);
  stageIn(packed, inputs);
  at::Tensor staged = flat(inputs[0], total * size_);
  return enqueue({OpType::ALLGATHER_COALESCED, "allgather_coalesced",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().allGather(packed.data_ptr(), staged.data_ptr(), total, dataType(packed, ""), comm, s),
                          "ncclAllGather");
                  },
                  outs, {packed, staged}, [=] { copyOut(staged, outs); }, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::GatherOptions& opts) {
  const at::Tensor in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  at::Tensor staged;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "conflux: gather: the root takes one list of ", size_, " output tensors");
    for (const auto& out : outputs[0]) checkLike(out, in, "gather");
    outs = outputs[0];
    staged = flat(in, in.numel() * size_);
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "conflux: gather: only the root passes output tensors");
  }
  ConfluxWork::Finish finish;
  if (staged.defined()) finish = [=] { copyOut(staged, outs); };
  return enqueue({OpType::GATHER, "gather",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().gather(in.data_ptr(), staged.defined() ? staged.data_ptr() : nullptr, in.numel(),
                                       dataType(in, ""), root, comm, s),
                          "ncclGather");
                  },
                  outs, {in, staged}, finish, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ScatterOptions& opts) {
  const at::Tensor out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor staged;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "conflux: scatter: the root takes one list of ", size_, " input tensors");
    for (const auto& in : inputs[0]) checkLike(in, out, "scatter");
    staged = flat(out, out.numel() * size_);
    stageIn(staged, inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "conflux: scatter: only the root passes input tensors");
  }
  return enqueue({OpType::SCATTER, "scatter",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().scatter(staged.defined() ? staged.data_ptr() : nullptr, out.data_ptr(), out.numel(),
                                        dataType(out, ""), root, comm, s),
                          "ncclScatter");
                  },
                  outputs, {staged}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                         const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base");
  checkTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "conflux: _reduce_scatter_base: dtypes differ");
  TORCH_CHECK(input.numel() == output.numel() * size_, "conflux: _reduce_scatter_base: the input holds ",
              input.numel(), " elements; it needs ", size_, " x ", output.numel());
  const ncclRedOp_t op = redOp(opts.reduceOp, input, "_reduce_scatter_base");
  return enqueue({OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().reduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                              dataType(input, ""), op, comm, s),
                          "ncclReduceScatter");
                  },
                  {output}, {input}, nullptr, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                                   const c10d::ReduceScatterOptions& opts) {
  const at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
              "conflux: reduce_scatter: takes one list of ", size_, " input tensors");
  for (const auto& in : inputs[0]) checkLike(in, out, "reduce_scatter");
  const ncclRedOp_t op = redOp(opts.reduceOp, out, "reduce_scatter");
  at::Tensor staged = flat(out, out.numel() * size_);
  stageIn(staged, inputs[0]);
  return enqueue({OpType::REDUCE_SCATTER, "reduce_scatter",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().reduceScatter(staged.data_ptr(), out.data_ptr(), out.numel(), dataType(out, ""), op,
                                              comm, s),
                          "ncclReduceScatter");
                  },
                  outputs, {staged}, nullptr, opts.timeout});
}

namespace {

// Element offsets of the blocks of an uneven split along dim 0 (equal blocks when `splits` is empty).
std::vector<int64_t> splitCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* side) {
  TORCH_CHECK(t.dim() > 0, "conflux: alltoall_base: the ", side, " tensor has no dimension to split");
  const int64_t rows = t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "conflux: alltoall_base: the ", side, " tensor's ", rows,
                " rows do not split equally over ", size, " ranks");
    std::fill(counts.begin(), counts.end(), rows / size * rowElems);
    return counts;
  }
  TORCH_CHECK(splits.size() == static_cast<size_t>(size), "conflux: alltoall_base: ", splits.size(), " ", side,
              " splits for ", size, " ranks");
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "conflux: alltoall_base: the ", side,
              " splits do not add up to the tensor's ", rows, " rows");
  for (int i = 0; i < size; ++i) {
    TORCH_CHECK(splits[i] >= 0, "conflux: alltoall_base: a negative split");
    counts[i] = splits[i] * rowElems;
  }
  return counts;
}

std::vector<int64_t> offsetsOf(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                  std::vector<int64_t>& outputSplits,
                                                                  std::vector<int64_t>& inputSplits,
                                                                  const c10d::AllToAllOptions& opts) {
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "conflux: alltoall_base: dtypes differ");
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(output.numel() == input.numel(), "conflux: alltoall_base: input and output sizes differ");
    TORCH_CHECK(input.numel() % size_ == 0, "conflux: alltoall_base: ", input.numel(),
                " elements do not split equally over ", size_, " ranks");
    return enqueue({OpType::ALLTOALL_BASE, "alltoall_base",
                    [=](ncclComm_t comm, cudaStream_t s) {
                      check(api().alltoAll(input.data_ptr(), output.data_ptr(), input.numel() / size_,
                                           dataType(input, ""), comm, s),
                            "ncclAlltoAll");
                    },
                    {output}, {input}, nullptr, opts.timeout});
  }
  const std::vector<int64_t> sendCounts = splitCounts(input, inputSplits, size_, "input");
  const std::vector<int64_t> recvCounts = splitCounts(output, outputSplits, size_, "output");
  TORCH_CHECK(sendCounts[rank_] == recvCounts[rank_], "conflux: alltoall_base: this rank sends itself ",
              sendCounts[rank_], " elements but expects ", recvCounts[rank_]);
  const std::vector<int64_t> sendOffsets = offsetsOf(sendCounts), recvOffsets = offsetsOf(recvCounts);
  const int64_t item = input.element_size();
  auto* in = static_cast<char*>(input.data_ptr());
  auto* out = static_cast<char*>(output.data_ptr());
  const int me = rank_, n = size_;
  return enqueue({OpType::ALLTOALL_BASE, "alltoall_base",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    const ncclDataType_t dt = dataType(input, "");
                    grouped([&](auto note) {
                      for (int k = 1; k < n; ++k) {  // peers in a staggered order, as the direct algorithms go
                        const int to = (me + k) % n, from = (me - k + n) % n;
                        if (sendCounts[to] > 0) {
                          note(api().send(in + sendOffsets[to] * item, sendCounts[to], dt, to, comm, s), "ncclSend");
                        }
                        if (recvCounts[from] > 0) {
                          note(api().recv(out + recvOffsets[from] * item, recvCounts[from], dt, from, comm, s),
                               "ncclRecv");
                        }
                      }
                    });
                  },
                  {output}, {input},
                  [=] { std::memcpy(out + recvOffsets[me] * item, in + sendOffsets[me] * item, sendCounts[me] * item); },
                  opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              "conflux: alltoall: takes ", size_, " input and ", size_, " output tensors");
  for (int i = 0; i < size_; ++i) {
    checkTensor(inputs[i], "alltoall");
    checkTensor(outputs[i], "alltoall");
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "conflux: alltoall: dtypes differ");
  }
  TORCH_CHECK(inputs[rank_].numel() == outputs[rank_].numel(), "conflux: alltoall: this rank sends itself ",
              inputs[rank_].numel(), " elements but expects ", outputs[rank_].numel());
  std::vector<at::Tensor> keep = inputs;
  const int me = rank_, n = size_;
  return enqueue({OpType::ALLTOALL, "alltoall",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    const ncclDataType_t dt = dataType(inputs[0], "");
                    grouped([&](auto note) {
                      for (int k = 1; k < n; ++k) {
                        const int to = (me + k) % n, from = (me - k + n) % n;
                        if (inputs[to].numel() > 0) {
                          note(api().send(inputs[to].data_ptr(), inputs[to].numel(), dt, to, comm, s), "ncclSend");
                        }
                        if (outputs[from].numel() > 0) {
                          note(api().recv(outputs[from].data_ptr(), outputs[from].numel(), dt, from, comm, s),
                               "ncclRecv");
                        }
                      }
                    });
                  },
                  outputs, keep, [=] { outputs[me].copy_(inputs[me]); }, opts.timeout});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const at::Tensor t = single(tensors, "send");
  return enqueue({OpType::SEND, "send",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().send(t.data_ptr(), t.numel(), dataType(t, ""), dstRank, comm, s), "ncclSend");
                  },
                  tensors, {}, nullptr});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const at::Tensor t = single(tensors, "recv");
  return enqueue({OpType::RECV, "recv",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().recv(t.data_ptr(), t.numel(), dataType(t, ""), srcRank, comm, s), "ncclRecv");
                  },
                  tensors, {}, nullptr});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK(false, "conflux: recv from any source is not supported: Conflux (like NCCL) matches every receive with "
              "a named peer; pass src=");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::barrier(const c10d::BarrierOptions& opts) {
  at::Tensor token = at::zeros({1}, at::kInt);
  return enqueue({OpType::BARRIER, "barrier",
                  [=](ncclComm_t comm, cudaStream_t s) {
                    check(api().allReduce(token.data_ptr(), token.data_ptr(), 1, ncclInt32, ncclSum, comm, s),
                          "ncclAllReduce");
                  },
                  {}, {token}, nullptr, opts.timeout});
}

}  // namespace cfx::torchext
