/* SPDX-License-Identifier: Apache-2.0 */
/* minimpi: the part of MPI that nccl-tests' MPI build uses, for one host, so that the suite runs several processes
 * on a machine without an MPI installation (the GPU machines we are lent have none, and nothing can be installed
 * there). Ranks come from cfxrun's RANK/WORLD_SIZE; collectives meet in a shared-memory file. Anything outside this
 * subset is absent on purpose: a program that needs more fails to link instead of misbehaving. */
#ifndef CFX_MINIMPI_MPI_H
#define CFX_MINIMPI_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;

#define MPI_SUCCESS 0
#define MPI_ERR_COMM 5
#define MPI_ERR_TYPE 3
#define MPI_ERR_OP 9
#define MPI_ERR_ARG 12
#define MPI_ERR_OTHER 16

#define MPI_COMM_NULL (-1)
#define MPI_COMM_WORLD 0
#define MPI_UNDEFINED (-32766)
#define MPI_IN_PLACE ((void*)1)

#define MPI_DATATYPE_NULL 0
#define MPI_BYTE 1
#define MPI_CHAR 2
#define MPI_INT 3
#define MPI_UNSIGNED 4
#define MPI_LONG 5
#define MPI_UNSIGNED_LONG 6
#define MPI_LONG_LONG 7
#define MPI_LONG_LONG_INT MPI_LONG_LONG
#define MPI_INT64_T 8
#define MPI_UINT64_T 9
#define MPI_FLOAT 10
#define MPI_DOUBLE 11

#define MPI_OP_NULL 0
#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3
#define MPI_PROD 4

int MPI_Init(int* argc, char*** argv);
int MPI_Initialized(int* flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* CFX_MINIMPI_MPI_H */
