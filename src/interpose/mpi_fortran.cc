// SPDX-License-Identifier: Apache-2.0
// Fortran bindings of libconflux_mpi.so (interpose layer). Open MPI's mpif.h / `use mpi` layer calls PMPI_*
// directly, so a program's Fortran calls never reach our C MPI_* definitions; these definitions take the
// Fortran names first (gfortran's mpi_x_, and the mpi_x, mpi_x__ and MPI_X manglings as aliases), convert the
// handles and the MPI_IN_PLACE / MPI_BOTTOM sentinels to C, and call the C entry points above, which decide.
// The non-blocking forms return the C request converted with MPI_Request_c2f; a routed one is a generalized
// request, so Fortran's MPI_WAIT/MPI_TEST and friends (which call PMPI_* too) handle it without our help.
// The `use mpi_f08` bindings (MPI_X_f08) are not covered yet: they pass through to MPI.
#include <dlfcn.h>
#include <mpi.h>

namespace {

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are common blocks; their addresses are the sentinels. Looked up in the
// global scope, which finds the program's copy when it has one, as Open MPI's own check does.
struct FortranSentinels {
  void* inPlace = dlsym(RTLD_DEFAULT, "mpi_fortran_in_place_");
  void* bottom = dlsym(RTLD_DEFAULT, "mpi_fortran_bottom_");
};

const FortranSentinels& sentinels() {
  static const FortranSentinels s;
  return s;
}

const void* cBuffer(const void* f) {
  const auto& s = sentinels();
  if (f != nullptr && f == s.inPlace) return MPI_IN_PLACE;
  if (f != nullptr && f == s.bottom) return MPI_BOTTOM;
  return f;
}
void* cBuffer(void* f) { return const_cast<void*>(cBuffer(static_cast<const void*>(f))); }

MPI_Comm comm(const MPI_Fint* f) { return PMPI_Comm_f2c(*f); }
MPI_Datatype type(const MPI_Fint* f) { return PMPI_Type_f2c(*f); }
MPI_Op op(const MPI_Fint* f) { return PMPI_Op_f2c(*f); }

// Open MPI's own bindings set the Fortran request only when the call succeeded.
void setRequest(int err, MPI_Request c, MPI_Fint* f) {
  if (err == MPI_SUCCESS) *f = PMPI_Request_c2f(c);
}

static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Reduce_scatter's Fortran recvcounts are passed as C ints");

}  // namespace

// The other manglings Open MPI exports besides gfortran's mpi_x_ (which holds the definition): mpi_x, mpi_x__
// and MPI_X, as aliases of mpi_x_.
#define CFX_FORTRAN_ALIASES(lower, upper, ...)                                             \
  [[gnu::visibility("default"), gnu::alias(#lower "_")]] void lower(__VA_ARGS__);          \
  [[gnu::visibility("default"), gnu::alias(#lower "_")]] void lower##__(__VA_ARGS__);      \
  [[gnu::visibility("default"), gnu::alias(#lower "_")]] void upper(__VA_ARGS__);

extern "C" {

[[gnu::visibility("default")]] void mpi_allreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count,
                                                   MPI_Fint* datatype, MPI_Fint* o, MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Allreduce(cBuffer(sendbuf), cBuffer(recvbuf), *count, type(datatype), op(o), comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_allreduce_")]] void mpi_allreduce(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                                MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_allreduce_")]] void mpi_allreduce__(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                                  MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_allreduce_")]] void MPI_ALLREDUCE(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                                MPI_Fint*, MPI_Fint*, MPI_Fint*);

[[gnu::visibility("default")]] void mpi_reduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                                                MPI_Fint* o, MPI_Fint* root, MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Reduce(cBuffer(sendbuf), cBuffer(recvbuf), *count, type(datatype), op(o), *root, comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_reduce_")]] void mpi_reduce(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                          MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_reduce_")]] void mpi_reduce__(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                            MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_reduce_")]] void MPI_REDUCE(void*, void*, MPI_Fint*, MPI_Fint*,
                                                                          MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);

[[gnu::visibility("default")]] void mpi_bcast_(void* buffer, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* root,
                                               MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Bcast(cBuffer(buffer), *count, type(datatype), *root, comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_bcast_")]] void mpi_bcast(void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                        MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_bcast_")]] void mpi_bcast__(void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                          MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_bcast_")]] void MPI_BCAST(void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                        MPI_Fint*, MPI_Fint*);

[[gnu::visibility("default")]] void mpi_allgather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                   void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                   MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Allgather(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                        comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_allgather_")]] void mpi_allgather(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                                MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                                MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_allgather_")]] void mpi_allgather__(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                                  MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                                  MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_allgather_")]] void MPI_ALLGATHER(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                                MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                                MPI_Fint*);

[[gnu::visibility("default")]] void mpi_alltoall_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                  void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* c,
                                                  MPI_Fint* ierr) {
  *ierr = MPI_Alltoall(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                       comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_alltoall_")]] void mpi_alltoall(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                              MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                              MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_alltoall_")]] void mpi_alltoall__(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                                MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                                MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_alltoall_")]] void MPI_ALLTOALL(void*, MPI_Fint*, MPI_Fint*, void*,
                                                                              MPI_Fint*, MPI_Fint*, MPI_Fint*,
                                                                              MPI_Fint*);

[[gnu::visibility("default")]] void mpi_reduce_scatter_block_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount,
                                                              MPI_Fint* datatype, MPI_Fint* o, MPI_Fint* c,
                                                              MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter_block(cBuffer(sendbuf), cBuffer(recvbuf), *recvcount, type(datatype), op(o), comm(c));
}
[[gnu::visibility("default"), gnu::alias("mpi_reduce_scatter_block_")]] void mpi_reduce_scatter_block(
    void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_reduce_scatter_block_")]] void mpi_reduce_scatter_block__(
    void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_reduce_scatter_block_")]] void MPI_REDUCE_SCATTER_BLOCK(
    void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);

[[gnu::visibility("default")]] void mpi_barrier_(MPI_Fint* c, MPI_Fint* ierr) { *ierr = MPI_Barrier(comm(c)); }
[[gnu::visibility("default"), gnu::alias("mpi_barrier_")]] void mpi_barrier(MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_barrier_")]] void mpi_barrier__(MPI_Fint*, MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_barrier_")]] void MPI_BARRIER(MPI_Fint*, MPI_Fint*);

[[gnu::visibility("default")]] void mpi_reduce_scatter_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts,
                                                        MPI_Fint* datatype, MPI_Fint* o, MPI_Fint* c,
                                                        MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter(cBuffer(sendbuf), cBuffer(recvbuf), recvcounts, type(datatype), op(o), comm(c));
}
CFX_FORTRAN_ALIASES(mpi_reduce_scatter, MPI_REDUCE_SCATTER, void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*)

[[gnu::visibility("default")]] void mpi_gather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                MPI_Fint* root, MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Gather(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                     *root, comm(c));
}
CFX_FORTRAN_ALIASES(mpi_gather, MPI_GATHER, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_scatter_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                 void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                 MPI_Fint* root, MPI_Fint* c, MPI_Fint* ierr) {
  *ierr = MPI_Scatter(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                      *root, comm(c));
}
CFX_FORTRAN_ALIASES(mpi_scatter, MPI_SCATTER, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*)

// Non-blocking forms.

[[gnu::visibility("default")]] void mpi_iallreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                                                    MPI_Fint* o, MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Iallreduce(cBuffer(sendbuf), cBuffer(recvbuf), *count, type(datatype), op(o), comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_iallreduce, MPI_IALLREDUCE, void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ireduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                                                 MPI_Fint* o, MPI_Fint* root, MPI_Fint* c, MPI_Fint* request,
                                                 MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ireduce(cBuffer(sendbuf), cBuffer(recvbuf), *count, type(datatype), op(o), *root, comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ireduce, MPI_IREDUCE, void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ibcast_(void* buffer, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* root,
                                                MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ibcast(cBuffer(buffer), *count, type(datatype), *root, comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ibcast, MPI_IBCAST, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_iallgather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                    void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                    MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Iallgather(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                         comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_iallgather, MPI_IALLGATHER, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ireduce_scatter_block_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount,
                                                               MPI_Fint* datatype, MPI_Fint* o, MPI_Fint* c,
                                                               MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ireduce_scatter_block(cBuffer(sendbuf), cBuffer(recvbuf), *recvcount, type(datatype), op(o), comm(c),
                                    &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK, void*, void*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ireduce_scatter_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts,
                                                         MPI_Fint* datatype, MPI_Fint* o, MPI_Fint* c,
                                                         MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ireduce_scatter(cBuffer(sendbuf), cBuffer(recvbuf), recvcounts, type(datatype), op(o), comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER, void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ialltoall_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                   void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                   MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ialltoall(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                        comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ialltoall, MPI_IALLTOALL, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_igather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                 void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                 MPI_Fint* root, MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Igather(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                      *root, comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_igather, MPI_IGATHER, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_iscatter_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype,
                                                  void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype,
                                                  MPI_Fint* root, MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Iscatter(cBuffer(sendbuf), *sendcount, type(sendtype), cBuffer(recvbuf), *recvcount, type(recvtype),
                       *root, comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_iscatter, MPI_ISCATTER, void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                    MPI_Fint*, MPI_Fint*, MPI_Fint*)

[[gnu::visibility("default")]] void mpi_ibarrier_(MPI_Fint* c, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = MPI_Ibarrier(comm(c), &r);
  setRequest(*ierr, r, request);
}
CFX_FORTRAN_ALIASES(mpi_ibarrier, MPI_IBARRIER, MPI_Fint*, MPI_Fint*, MPI_Fint*)

// Fortran's MPI_FINALIZE calls PMPI_Finalize directly; without this the stats and the mirrors' teardown would
// be skipped for Fortran programs.
[[gnu::visibility("default")]] void mpi_finalize_(MPI_Fint* ierr) { *ierr = MPI_Finalize(); }
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void mpi_finalize(MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void mpi_finalize__(MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void MPI_FINALIZE(MPI_Fint*);

}  // extern "C"
