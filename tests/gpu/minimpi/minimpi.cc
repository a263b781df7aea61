// SPDX-License-Identifier: Apache-2.0
// minimpi: the MPI subset of mpi.h beside this file, for the processes of one host started by cfxrun.
//
// Why: nccl-tests runs several ranks on one GPU only in its MPI build (one process per rank), and the GPU machines
// this project is lent have no MPI and cannot install one. nccl-tests needs a dozen MPI calls, all of them small
// collectives used for set-up and for reporting, so a shared-memory implementation is enough and keeps the proof
// free of anything that would have to be carried there.
//
// How: every rank maps one file in /dev/shm (CFX_MINIMPI_DIR) named after its launcher (cfxrun's pid and port,
// or CFX_MINIMPI_KEY).
// A communicator owns a region: one arrival counter per member and two banks of one slot per member. An exchange
// step writes this rank's bytes into its slot of bank (step & 1), publishes the step number, and waits until every
// member has published it; then every member reads every slot. A rank can be at most one step ahead of the slowest
// (it cannot pass the next step's wait before the slow one arrives there, after it finished reading), so it never
// overwrites a bank that is still being read. Larger payloads go through in slot-sized steps. Reductions combine
// contributions in rank order, so every rank gets the same bits. Waits spin briefly, then sleep, and stop at a
// deadline (CFX_MINIMPI_TIMEOUT_S, default 600 s) with a line naming the rank that did not arrive; like MPI's
// default error handler, errors end the process, and cfxrun then stops the others.
// Without RANK/WORLD_SIZE a program runs as a single rank. Only MPI_COMM_WORLD can be split (nccl-tests splits it
// once); a program that needs more gets MPI_ERR_COMM.
#include "mpi.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMaxRanks = 32;
constexpr int kMaxSplits = 4;
constexpr std::size_t kSlotBytes = 16 * 1024;
constexpr int kRegions = 1 + kMaxSplits * kMaxRanks;

struct alignas(64) Arrival {
  std::atomic<std::uint64_t> step;
};

struct Region {
  Arrival arrived[kMaxRanks];
  unsigned char slot[2][kMaxRanks][kSlotBytes];
};

struct Comm {
  bool live = false;
  Region* region = nullptr;
  std::vector<int> worldRanks;  // members in communicator order
  int me = 0;
  std::uint64_t step = 0;
};

struct State {
  bool initialized = false;
  bool finalized = false;
  int rank = 0;
  int size = 1;
  Region* regions = nullptr;
  std::size_t mapBytes = 0;
  std::vector<Comm> comms;
  int worldSplits = 0;
  double timeoutSec = 600;
};

State g;

[[noreturn]] void fatal(const char* op, const std::string& why) {
  fprintf(stderr, "minimpi: rank %d: %s: %s\n", g.rank, op, why.c_str());
  fflush(stderr);
  _exit(1);
}

Comm& commOf(MPI_Comm c, const char* op) {
  if (!g.initialized || g.finalized) fatal(op, "called outside MPI_Init/MPI_Finalize");
  if (c < 0 || c >= static_cast<int>(g.comms.size()) || !g.comms[c].live) {
    fatal(op, "invalid communicator " + std::to_string(c));
  }
  return g.comms[c];
}

std::size_t typeSize(MPI_Datatype t) {
  switch (t) {
    case MPI_BYTE:
    case MPI_CHAR: return 1;
    case MPI_INT:
    case MPI_UNSIGNED:
    case MPI_FLOAT: return 4;
    case MPI_LONG:
    case MPI_UNSIGNED_LONG:
    case MPI_LONG_LONG:
    case MPI_INT64_T:
    case MPI_UINT64_T:
    case MPI_DOUBLE: return 8;
    default: return 0;
  }
}

std::size_t bytesOf(int count, MPI_Datatype t, const char* op) {
  std::size_t s = typeSize(t);
  if (count < 0) fatal(op, "negative count " + std::to_string(count));
  if (s == 0 && count > 0) fatal(op, "unsupported datatype " + std::to_string(t));
  return s * static_cast<std::size_t>(count);
}

// Waits until every member has published `step`.
void waitAll(const Comm& c, std::uint64_t step, const char* op) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(g.timeoutSec);
  for (std::size_t i = 0; i < c.worldRanks.size(); ++i) {
    std::atomic<std::uint64_t>& a = c.region->arrived[i].step;
    int spins = 0;
    while (a.load(std::memory_order_acquire) < step) {
      if (++spins < 2000) {
        sched_yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 20000 ? 50 : 1000));
      if (std::chrono::steady_clock::now() > deadline) {
        fatal(op, "timed out after " + std::to_string(static_cast<int>(g.timeoutSec)) + " s waiting for world rank " +
                      std::to_string(c.worldRanks[i]));
      }
    }
  }
}

// One collective exchange of `len` bytes per member: this rank contributes `mine` (nullptr: nothing, e.g. a
// broadcast's non-roots) and `read(member, bytes, offset, n)` sees every member's bytes, slot by slot.
template <typename Read>
void exchange(Comm& c, const void* mine, std::size_t len, const char* op, Read&& read) {
  std::size_t off = 0;
  do {
    std::size_t n = std::min(kSlotBytes, len - off);
    std::uint64_t step = ++c.step;
    unsigned char(*bank)[kSlotBytes] = c.region->slot[step & 1];
    if (mine != nullptr && n > 0) std::memcpy(bank[c.me], static_cast<const unsigned char*>(mine) + off, n);
    c.region->arrived[c.me].step.store(step, std::memory_order_release);
    waitAll(c, step, op);
    for (std::size_t j = 0; j < c.worldRanks.size(); ++j) read(static_cast<int>(j), bank[j], off, n);
    off += n;
  } while (off < len);
}

template <typename T>
void combine(T* acc, const T* in, std::size_t n, MPI_Op op) {
  for (std::size_t i = 0; i < n; ++i) {
    switch (op) {
      case MPI_SUM: acc[i] = static_cast<T>(acc[i] + in[i]); break;
      case MPI_PROD: acc[i] = static_cast<T>(acc[i] * in[i]); break;
      case MPI_MIN: acc[i] = std::min(acc[i], in[i]); break;
      case MPI_MAX: acc[i] = std::max(acc[i], in[i]); break;
      default: break;
    }
  }
}

void combineBytes(void* acc, const void* in, std::size_t bytes, MPI_Datatype t, MPI_Op op) {
  switch (t) {
    case MPI_BYTE:
    case MPI_CHAR:
      combine(static_cast<unsigned char*>(acc), static_cast<const unsigned char*>(in), bytes, op);
      break;
    case MPI_INT: combine(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), bytes / 4, op); break;
    case MPI_UNSIGNED: combine(static_cast<uint32_t*>(acc), static_cast<const uint32_t*>(in), bytes / 4, op); break;
    case MPI_FLOAT: combine(static_cast<float*>(acc), static_cast<const float*>(in), bytes / 4, op); break;
    case MPI_LONG:
    case MPI_LONG_LONG:
    case MPI_INT64_T: combine(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), bytes / 8, op); break;
    case MPI_UNSIGNED_LONG:
    case MPI_UINT64_T: combine(static_cast<uint64_t*>(acc), static_cast<const uint64_t*>(in), bytes / 8, op); break;
    case MPI_DOUBLE: combine(static_cast<double*>(acc), static_cast<const double*>(in), bytes / 8, op); break;
    default: break;
  }
}

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atoi(v) : fallback;
}

}  // namespace

extern "C" {

int MPI_Init(int*, char***) {
  if (g.initialized) fatal("MPI_Init", "called twice");
  g.rank = envInt("RANK", 0);
  g.size = envInt("WORLD_SIZE", 1);
  if (const char* t = getenv("CFX_MINIMPI_TIMEOUT_S")) g.timeoutSec = std::max(1.0, atof(t));
  if (g.size < 1 || g.size > kMaxRanks || g.rank < 0 || g.rank >= g.size) {
    fatal("MPI_Init", "RANK " + std::to_string(g.rank) + " / WORLD_SIZE " + std::to_string(g.size) +
                          " out of range (at most " + std::to_string(kMaxRanks) + " ranks)");
  }
  g.mapBytes = sizeof(Region) * kRegions;
  std::string path;
  int fd = -1;
  if (g.size > 1) {
    const char* key = getenv("CFX_MINIMPI_KEY");
    std::string k = key != nullptr ? key
                                   : std::to_string(static_cast<long>(getppid())) + "-" +
                                         (getenv("MASTER_PORT") != nullptr ? getenv("MASTER_PORT") : "0");
    // /dev/shm where it exists (a tmpfs); some containers lack it, and any directory all ranks see will do.
    const char* dir = getenv("CFX_MINIMPI_DIR");
    if (dir == nullptr) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(dir) + "/cfx-minimpi-" + k;
    fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(g.mapBytes)) != 0) {
      fatal("MPI_Init", "cannot create " + path + ": " + strerror(errno));
    }
  }
  void* p = mmap(nullptr, g.mapBytes, PROT_READ | PROT_WRITE, fd >= 0 ? MAP_SHARED : (MAP_PRIVATE | MAP_ANONYMOUS),
                 fd, 0);
  if (fd >= 0) close(fd);
  if (p == MAP_FAILED) fatal("MPI_Init", std::string("cannot map the shared file: ") + strerror(errno));
  g.regions = static_cast<Region*>(p);
  Comm world;
  world.live = true;
  world.region = &g.regions[0];
  for (int r = 0; r < g.size; ++r) world.worldRanks.push_back(r);
  world.me = g.rank;
  g.comms.push_back(world);
  g.initialized = true;
  // Once every rank has mapped the file it can go: a crashed job leaves nothing behind in /dev/shm.
  MPI_Barrier(MPI_COMM_WORLD);
  if (g.rank == 0 && !path.empty()) unlink(path.c_str());
  return MPI_SUCCESS;
}

int MPI_Initialized(int* flag) {
  *flag = g.initialized ? 1 : 0;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  munmap(g.regions, g.mapBytes);
  g.finalized = true;
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm, int errorcode) {
  fprintf(stderr, "minimpi: rank %d: MPI_Abort(%d)\n", g.rank, errorcode);
  fflush(stderr);
  _exit(errorcode != 0 ? errorcode : 1);
}

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  *rank = commOf(comm, "MPI_Comm_rank").me;
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  *size = static_cast<int>(commOf(comm, "MPI_Comm_size").worldRanks.size());
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  Comm& parent = commOf(comm, "MPI_Comm_split");
  if (comm != MPI_COMM_WORLD) {
    fprintf(stderr, "minimpi: rank %d: MPI_Comm_split: only MPI_COMM_WORLD can be split\n", g.rank);
    return MPI_ERR_COMM;
  }
  if (g.worldSplits >= kMaxSplits) fatal("MPI_Comm_split", "more than " + std::to_string(kMaxSplits) + " splits");
  int seq = g.worldSplits++;
  int mine[2] = {color, key};
  std::vector<int> all(2 * parent.worldRanks.size());
  exchange(parent, mine, sizeof(mine), "MPI_Comm_split",
           [&](int j, const unsigned char* b, std::size_t, std::size_t) { std::memcpy(&all[2 * j], b, sizeof(mine)); });
  if (color == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  std::vector<int> members;
  for (std::size_t j = 0; j < parent.worldRanks.size(); ++j) {
    if (all[2 * j] == color) members.push_back(static_cast<int>(j));
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  Comm c;
  c.live = true;
  c.worldRanks = members;
  c.me = static_cast<int>(std::find(members.begin(), members.end(), g.rank) - members.begin());
  int lowest = *std::min_element(members.begin(), members.end());
  c.region = &g.regions[1 + seq * kMaxRanks + lowest];
  g.comms.push_back(c);
  *newcomm = static_cast<int>(g.comms.size()) - 1;
  return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm* comm) {
  if (*comm == MPI_COMM_WORLD) return MPI_ERR_COMM;
  commOf(*comm, "MPI_Comm_free").live = false;
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) {
  exchange(commOf(comm, "MPI_Barrier"), nullptr, 0, "MPI_Barrier",
           [](int, const unsigned char*, std::size_t, std::size_t) {});
  return MPI_SUCCESS;
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  Comm& c = commOf(comm, "MPI_Bcast");
  if (root < 0 || root >= static_cast<int>(c.worldRanks.size())) fatal("MPI_Bcast", "bad root");
  std::size_t len = bytesOf(count, datatype, "MPI_Bcast");
  auto* out = static_cast<unsigned char*>(buffer);
  exchange(c, c.me == root ? buffer : nullptr, len, "MPI_Bcast",
           [&](int j, const unsigned char* b, std::size_t off, std::size_t n) {
             if (j == root && c.me != root) std::memcpy(out + off, b, n);
           });
  return MPI_SUCCESS;
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Comm& c = commOf(comm, "MPI_Allreduce");
  if (op != MPI_SUM && op != MPI_MIN && op != MPI_MAX && op != MPI_PROD) fatal("MPI_Allreduce", "unsupported op");
  std::size_t len = bytesOf(count, datatype, "MPI_Allreduce");
  const void* mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  auto* out = static_cast<unsigned char*>(recvbuf);
  exchange(c, mine, len, "MPI_Allreduce", [&](int j, const unsigned char* b, std::size_t off, std::size_t n) {
    if (j == 0) {
      std::memcpy(out + off, b, n);
    } else {
      combineBytes(out + off, b, n, datatype, op);
    }
  });
  return MPI_SUCCESS;
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  Comm& c = commOf(comm, "MPI_Gather");
  if (root < 0 || root >= static_cast<int>(c.worldRanks.size())) fatal("MPI_Gather", "bad root");
  bool inPlace = sendbuf == MPI_IN_PLACE;
  if (inPlace && c.me != root) fatal("MPI_Gather", "MPI_IN_PLACE at a non-root");
  std::size_t len = inPlace ? bytesOf(recvcount, recvtype, "MPI_Gather") : bytesOf(sendcount, sendtype, "MPI_Gather");
  if (c.me == root && bytesOf(recvcount, recvtype, "MPI_Gather") != len) {
    fatal("MPI_Gather", "the root's receive size differs from its send size");
  }
  auto* out = static_cast<unsigned char*>(recvbuf);
  const void* mine = inPlace ? out + static_cast<std::size_t>(c.me) * len : sendbuf;
  exchange(c, mine, len, "MPI_Gather", [&](int j, const unsigned char* b, std::size_t off, std::size_t n) {
    if (c.me == root && !(inPlace && j == c.me)) std::memcpy(out + static_cast<std::size_t>(j) * len + off, b, n);
  });
  return MPI_SUCCESS;
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  Comm& c = commOf(comm, "MPI_Allgather");
  bool inPlace = sendbuf == MPI_IN_PLACE;
  std::size_t len = bytesOf(recvcount, recvtype, "MPI_Allgather");
  if (!inPlace && bytesOf(sendcount, sendtype, "MPI_Allgather") != len) {
    fatal("MPI_Allgather", "send and receive sizes differ");
  }
  auto* out = static_cast<unsigned char*>(recvbuf);
  const void* mine = inPlace ? out + static_cast<std::size_t>(c.me) * len : sendbuf;
  exchange(c, mine, len, "MPI_Allgather", [&](int j, const unsigned char* b, std::size_t off, std::size_t n) {
    if (!(inPlace && j == c.me)) std::memcpy(out + static_cast<std::size_t>(j) * len + off, b, n);
  });
  return MPI_SUCCESS;
}

}  // extern "C"
