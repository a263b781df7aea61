// SPDX-License-Identifier: Apache-2.0
// What the MPI entry points of libconflux_mpi.so share (interpose layer): the Conflux communicator mirrored
// onto an MPI communicator, MPI-to-NCCL datatype and op mapping, and the per-collective counters.
//
// Every routing decision must come out the same on every rank of the communicator, or one rank enters Conflux
// while another enters MPI and both hang. So decisions only use what MPI requires to agree across ranks: the
// communicator, counts x type sizes, the op and (for reductions) the datatype. Data-movement collectives route
// only predefined datatypes; a program that pairs a derived type on one rank with a predefined one on another
// is legal MPI that this rule does not cover (it would hang), a documented limitation.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "interpose/mpi_async.h"
#include "interpose/mpi_options.h"
#include "nccl.h"

namespace cfx::interpose {

// A Conflux communicator with the same ranks as one MPI intra-communicator.
struct Mirror {
  ncclComm_t comm = nullptr;  // nullptr: mirroring failed on some rank; the communicator stays with MPI.
  int rank = 0;
  int nRanks = 0;
  uint64_t seq = 0;  // Creation order in this process; mirrors are freed newest first.
  // Every rank runs at MPI_THREAD_MULTIPLE, so non-blocking calls may be routed (see mpi_async.h).
  bool asyncOk = false;
  // The host stream and waiter of non-blocking calls; created by the first one. Touched only by the thread that
  // issues collectives on the communicator (MPI forbids concurrent collectives on one communicator).
  std::unique_ptr<AsyncLane> async;
};

// The mirror of comm, built on first use (collective over comm: every rank reaches this call for the same
// collective, because the decision that leads here is the same on every rank). Returns nullptr when comm must
// stay with MPI: an inter-communicator, a single rank, or a failed bootstrap.
Mirror* mirrorFor(MPI_Comm comm);

// The mirror of comm if an earlier call built it, else nullptr; never bootstraps. Non-blocking calls use this:
// their initiation must be local, and bootstrapping waits for every rank of comm.
Mirror* existingMirror(MPI_Comm comm);

// Destroys every mirror still alive (MPI_Finalize, before PMPI_Finalize), after completing their non-blocking
// calls.
void freeAllMirrors();

// The NCCL type a reduction on dt computes in, or nullopt (MPI_BYTE, pair types, derived types, ...).
std::optional<ncclDataType_t> reduceType(MPI_Datatype dt);
// The NCCL op for a predefined MPI op; nullopt for the logical/bitwise ops, MINLOC/MAXLOC and user ops.
std::optional<ncclRedOp_t> reduceOp(MPI_Op op);
// The bytes of one element of dt when dt is predefined and dense (size == extent, lower bound 0), so that
// count elements can be moved as count * size bytes; nullopt otherwise.
std::optional<size_t> denseSize(MPI_Datatype dt);
size_t ncclTypeSize(ncclDataType_t t);

// Counts one call; printed by printStats when CFX_MPI_STATS=1.
void countCall(MpiColl coll, bool routed);
// Prints rank 0's counts to stderr, one line per collective that was called.
void printStats();

// Turns a Conflux failure into MPI's error path for comm (its error handler decides whether to abort).
int mpiError(MPI_Comm comm, ncclResult_t result, const char* what);

}  // namespace cfx::interpose
