// SPDX-License-Identifier: Apache-2.0
// Parallel strands inside one Work (primitives layer); see parallel.h.
#include "primitives/parallel.h"

namespace cfx::prims {

Parallel::Parallel(std::vector<Coro> tasks) {
  children_.reserve(tasks.size());
  for (Coro& t : tasks) add(std::move(t));
}

namespace {

// A verb as a strand of its own.
Coro awaitVerb(TransferAwaiter verb) { co_return co_await verb; }

}  // namespace

void Parallel::add(TransferAwaiter verb) { add(awaitVerb(std::move(verb))); }

void Parallel::add(Coro task) {
  Work& w = children_.emplace_back();
  w.task = std::move(task);
}

bool Parallel::await_suspend(Coro::Handle parent) {
  Work* owner = parent.promise().work;
  for (Work& w : children_) {
    // Timeout and failure messages name the op the strand belongs to.
    w.what = owner->what;
    w.opCount = owner->opCount;
    w.rank = owner->rank;
    w.peer = owner->peer;
    startWork(w);
    if (w.finished() && !w.task.status().ok()) return false;
  }
  if (joinDone(children_)) return false;
  owner->children = &children_;
  owner->waiting = nullptr;
  owner->resumeAt = parent;
  return true;
}

Status Parallel::await_resume() {
  for (Work& w : children_) {
    if (w.finished() && !w.task.status().ok()) return w.task.status();
  }
  return Status();
}

}  // namespace cfx::prims
