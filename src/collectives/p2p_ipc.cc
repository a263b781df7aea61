// SPDX-License-Identifier: Apache-2.0
// Sends and receives of device buffers through every rank's CUDA IPC scratch (collectives layer; a device program,
// device_program.h).
//
// Per round: rank r's scratch holds one slot of W = scratch/n bytes per peer, for what r sends it. Each message to a
// peer is cut into chunks of at most W in call order (a pair's messages match in call order, as in NCCL), and round k
// moves the k-th chunk of every pair: the sender copies it into its slot for the receiver and, once the copy is
// done, sends the receiver a token over the host transport; the receiver, with the token, copies from the sender's
// slot into its buffer and, once that is done, sends a token back, after which the sender may refill the slot. Both
// tokens of a round go as one host group, so ranks that send to each other do not wait in a cycle; a pair's rounds
// are counted alike on both sides, so a rank waits only on partners that are in the same round. Sends to self,
// paired with their receives in call order, are one copy each. Cost per round: two token exchanges (shared memory,
// ~10-50 us) and two waits for the device; the bytes cross once into the slot and once out, at device-memory or
// NVLink speed.
#include <algorithm>
#include <map>
#include <memory>

#include "collectives/device_program.h"
#include "transport/cuda_ipc/ipc_scratch.h"

namespace cfx::coll {

namespace {

// One chunk of a message: what one round moves through one slot.
struct P2pChunk {
  cuda::CUdeviceptr buffer;  // the message's device buffer, at the chunk's offset
  size_t bytes;
};

// A token: the round it is for, and how many rounds its sender counts for the pair (both sides must count alike; a
// difference shows on the first token instead of a wait that never ends).
struct P2pToken {
  uint32_t round;
  uint32_t rounds;
};

// What the host steps of one group's sends and receives share.
struct P2pState {
  std::map<int, std::vector<P2pChunk>> sends;  // by peer, chunks in call order
  std::map<int, std::vector<P2pChunk>> recvs;
  std::map<int, P2pToken> out;
  std::map<int, P2pToken> in;
};

// Round k's tokens: one to each peer of `to` that has a chunk k, one from each peer of `from` that has one, as one
// host group; each token received is checked against this rank's count for the pair.
Status exchangeTokens(P2pState& st, bool ready, size_t k,
                      const std::function<Status(const std::vector<HostMessage>&)>& exchange) {
  const auto& to = ready ? st.sends : st.recvs;
  const auto& from = ready ? st.recvs : st.sends;
  std::vector<HostMessage> t;
  for (const auto& [peer, chunks] : to) {
    if (k >= chunks.size()) continue;
    st.out[peer] = {static_cast<uint32_t>(k), static_cast<uint32_t>(chunks.size())};
    t.push_back({true, peer, &st.out[peer], sizeof(P2pToken)});
  }
  for (const auto& [peer, chunks] : from) {
    if (k < chunks.size()) t.push_back({false, peer, &st.in[peer], sizeof(P2pToken)});
  }
  if (t.empty()) return Status();
  CFX_TRY(exchange(t));
  for (const auto& [peer, chunks] : from) {
    if (k >= chunks.size()) continue;
    const P2pToken& got = st.in[peer];
    if (got.round != k || got.rounds != chunks.size()) {
      return Status::error(
          Errc::InvalidUsage,
          strprintf("device-direct send/recv with rank %d: it is at chunk %u of %u, this rank at chunk %zu of %zu "
                    "(the messages between the two differ in number or size, or CFX_CUDA_IPC_BYTES differs)",
                    peer, got.round, got.rounds, k, chunks.size()));
    }
  }
  return Status();
}

}  // namespace

void p2pIpc(const DeviceComm& comm, const std::vector<DeviceMessage>& messages, ProgramBuilder& b) {
  const transport::cuda_ipc::IpcScratch& scratch = *comm.scratch;
  const size_t n = static_cast<size_t>(comm.nRanks);
  const size_t me = static_cast<size_t>(comm.rank);
  const size_t slot = std::max<size_t>(1, scratch.bytes() / n);
  auto st = std::make_shared<P2pState>();
  std::vector<const DeviceMessage*> selfSends;
  std::vector<const DeviceMessage*> selfRecvs;
  for (const DeviceMessage& m : messages) {
    if (m.peer == static_cast<int>(me)) {
      (m.send ? selfSends : selfRecvs).push_back(&m);
      continue;
    }
    std::vector<P2pChunk>& chunks = (m.send ? st->sends : st->recvs)[m.peer];
    for (size_t off = 0; off < m.bytes; off += slot) chunks.push_back({m.buffer + off, std::min(slot, m.bytes - off)});
  }
  for (size_t i = 0; i < selfSends.size() && i < selfRecvs.size(); ++i) {
    b.copy(selfRecvs[i]->buffer, selfSends[i]->buffer, selfSends[i]->bytes);
  }
  size_t rounds = 0;
  for (const auto& [peer, chunks] : st->sends) rounds = std::max(rounds, chunks.size());
  for (const auto& [peer, chunks] : st->recvs) rounds = std::max(rounds, chunks.size());
  const auto exchange = comm.host.exchange;
  for (size_t k = 0; k < rounds; ++k) {
    for (const auto& [peer, chunks] : st->sends) {
      if (k < chunks.size()) {
        b.copy(scratch.block(static_cast<int>(me)) + static_cast<size_t>(peer) * slot, chunks[k].buffer,
               chunks[k].bytes);
      }
    }
    b.host([st, k, exchange] { return exchangeTokens(*st, true, k, exchange); });  // "my slot holds chunk k"
    for (const auto& [peer, chunks] : st->recvs) {
      if (k < chunks.size()) b.copy(chunks[k].buffer, scratch.block(peer) + me * slot, chunks[k].bytes);
    }
    b.host([st, k, exchange] { return exchangeTokens(*st, false, k, exchange); });  // "I have read chunk k"
  }
  if (rounds == 0) b.host([] { return Status(); });  // sends to self only: their copies end the program
}

}  // namespace cfx::coll
