// SPDX-License-Identifier: Apache-2.0
// Fortran bindings of libconflux_mpi.so (interpose layer). Open MPI's mpif.h / `use mpi` layer calls PMPI_*
// directly, so a program's Fortran calls never reach our C MPI_* definitions; these definitions take the
// Fortran names first (gfortran's mpi_x_, and the mpi_x, mpi_x__ and MPI_X manglings as aliases), convert the
// handles and the MPI_IN_PLACE / MPI_BOTTOM sentinels to C, and call the C entry points above, which decide.
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

}  // namespace

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

// Fortran's MPI_FINALIZE calls PMPI_Finalize directly; without this the stats and the mirrors' teardown would
// be skipped for Fortran programs.
[[gnu::visibility("default")]] void mpi_finalize_(MPI_Fint* ierr) { *ierr = MPI_Finalize(); }
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void mpi_finalize(MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void mpi_finalize__(MPI_Fint*);
[[gnu::visibility("default"), gnu::alias("mpi_finalize_")]] void MPI_FINALIZE(MPI_Fint*);

}  // extern "C"
