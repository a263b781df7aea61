// SPDX-License-Identifier: Apache-2.0
// Parallel strands inside one Work (primitives layer).
//
// An algorithm that drives two independent streams of verbs at once — a bidirectional ring sends half the
// buffer clockwise and half counter-clockwise, each on its own FIFOs — cannot write them as one straight line of
// co_awaits: the clockwise verb would wait for its data while the counter-clockwise bytes sit idle. So it writes
// each stream as its own Coro and awaits them together:
//
//   CFX_CO_TRY(co_await prims::Parallel(ringA(...), ringB(...)));
//
// Each task runs as a child Work of the awaiting one, parked on its own verb; the executor progresses all of
// them and resumes the parent once every child finished, or as soon as one failed (the first failure is what the
// parent sees; the others are abandoned with the run, as a failed Work always fails the whole run).
//
// A strand may also be a single verb (prims.send(...), ...): Parallel(prims.send(q, ...), prims.recv(q, ...))
// sends to and receives from one peer at once, on its two FIFOs.
//
// The strands share a thread, so they need no locking; they must not share a FIFO (two strands sending to one
// peer on one channel would interleave their slices). Children can await Parallel again.
#pragma once

#include <utility>
#include <vector>

#include "primitives/executor.h"

namespace cfx::prims {

class [[nodiscard]] Parallel {
 public:
  template <typename... Coros>
  explicit Parallel(Coros&&... tasks) {
    children_.reserve(sizeof...(tasks));
    (add(std::forward<Coros>(tasks)), ...);
  }
  explicit Parallel(std::vector<Coro> tasks);
  Parallel(const Parallel&) = delete;
  Parallel& operator=(const Parallel&) = delete;

  bool await_ready() const noexcept { return children_.empty(); }
  // Starts every child; suspends the parent unless they all finished (or one failed) at once.
  bool await_suspend(Coro::Handle parent);
  Status await_resume();

 private:
  void add(Coro task);
  void add(TransferAwaiter verb);
  std::vector<Work> children_;  // never resized once started: the executor holds pointers into it
};

}  // namespace cfx::prims
