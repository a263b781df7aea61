# SPDX-License-Identifier: Apache-2.0
# An ordinary mpi4py program that knows nothing about Conflux: buffer-based collectives on numpy arrays (the
# upper-case API, blocking and non-blocking), pickle-based ones on Python objects (the lower-case API), a user
# op and a derived datatype. Rank 0 prints one line per case. run_compare.sh runs it with and without
# libconflux_mpi.so and requires identical output. Values are small integers, so sums are exact in any order.
import hashlib

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def report(name, a):
    # Pickle-based gather: itself a lower-case collective under test.
    all_digests = comm.gather(digest(a) if a is not None else "-", root=0)
    if rank == 0:
        print(f"{name:32s} {' '.join(all_digests)}")


def data(n, salt, dtype=np.float64):
    i = np.arange(n, dtype=np.int64)
    return (((rank + 1 + salt) * ((i * 7 + salt) % 13)) % 5 + 1).astype(dtype)


for n in (100, 100000):
    tag = f"n{n}"
    root = size - 1

    out = np.empty(n)
    comm.Allreduce(data(n, 1), out, op=MPI.SUM)
    report(f"{tag} Allreduce sum", out)
    buf = data(n, 2, np.int32)
    comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
    report(f"{tag} Allreduce max inplace", buf)
    out = np.zeros(n) if rank == root else None
    comm.Reduce(data(n, 3), out, op=MPI.SUM, root=root)
    report(f"{tag} Reduce", out)
    buf = data(n, 4) if rank == 0 else np.zeros(n)
    comm.Bcast(buf, root=0)
    report(f"{tag} Bcast", buf)
    out = np.empty(n * size)
    comm.Allgather(data(n, 5), out)
    report(f"{tag} Allgather", out)
    out = np.empty(n)
    comm.Reduce_scatter_block(data(n * size, 6), out, op=MPI.SUM)
    report(f"{tag} Reduce_scatter_block", out)
    comm.Reduce_scatter(data(n * size, 7), out, recvcounts=[n] * size, op=MPI.MIN)
    report(f"{tag} Reduce_scatter", out)
    out = np.empty(n * size, dtype=np.int32)
    comm.Alltoall(data(n * size, 8, np.int32), out)
    report(f"{tag} Alltoall", out)
    out = np.empty(n * size) if rank == root else None
    comm.Gather(data(n, 9), out, root=root)
    report(f"{tag} Gather", out)
    out = np.empty(n)
    comm.Scatter(data(n * size, 10) if rank == 0 else None, out, root=0)
    report(f"{tag} Scatter", out)

    # Non-blocking, completed by Wait, a Test loop and Request.Waitall.
    out = np.empty(n)
    s11 = data(n, 11)
    req = comm.Iallreduce(s11, out, op=MPI.SUM)
    req.Wait()
    report(f"{tag} Iallreduce", out)
    buf = data(n, 12) if rank == root else np.zeros(n)
    req = comm.Ibcast(buf, root=root)
    while not req.Test():
        pass
    report(f"{tag} Ibcast", buf)
    ag = np.empty(n * size)
    a2a = np.empty(n * size)
    rsb = np.empty(n)
    # The send buffers are named: they must outlive the requests.
    s13, s14, s15 = data(n, 13), data(n * size, 14), data(n * size, 15)
    reqs = [comm.Iallgather(s13, ag), comm.Ialltoall(s14, a2a),
            comm.Ireduce_scatter_block(s15, rsb, op=MPI.PROD), comm.Ibarrier()]
    MPI.Request.Waitall(reqs)
    report(f"{tag} Iallgather", ag)
    report(f"{tag} Ialltoall", a2a)
    report(f"{tag} Ireduce_scatter_block", rsb)

    # Scans (rank 0's exclusive result is undefined in MPI: not reported) and all-to-all-v with uneven counts.
    small = (np.arange(n) + rank) % 3 + 1.0
    out = np.empty(n)
    comm.Scan(small, out, op=MPI.PROD)
    report(f"{tag} Scan prod", out)
    iout = np.zeros(n, dtype=np.int64)
    comm.Exscan(small.astype(np.int64), iout, op=MPI.SUM)
    report(f"{tag} Exscan sum", iout if rank else None)
    counts = [((rank * 7 + p * 3) % 5) * n // 4 for p in range(size)]
    rcounts = [((p * 7 + rank * 3) % 5) * n // 4 for p in range(size)]
    sendv = data(sum(counts), 18)
    recvv = np.full(sum(rcounts), -1.0)
    comm.Alltoallv([sendv, counts], [recvv, rcounts])
    report(f"{tag} Alltoallv", recvv)
    rv2 = np.full(sum(rcounts), -1.0)
    sv2 = data(sum(counts), 19)
    s20 = small.copy()
    sc_out = np.empty(n)
    ex_out = np.zeros(n)
    reqs = [comm.Ialltoallv([sv2, counts], [rv2, rcounts]), comm.Iscan(s20, sc_out, op=MPI.MAX),
            comm.Iexscan(s20, ex_out, op=MPI.MIN)]
    MPI.Request.Waitall(reqs)
    report(f"{tag} Ialltoallv", rv2)
    report(f"{tag} Iscan max", sc_out)
    report(f"{tag} Iexscan min", ex_out if rank else None)

    # A user op and a derived datatype: both must reach MPI untouched.
    def elementwise_max_plus_one(a, b, t):
        x = np.frombuffer(a, dtype=np.float64)
        y = np.frombuffer(b, dtype=np.float64)
        y[:] = np.maximum(x, y) + 1

    user_op = MPI.Op.Create(elementwise_max_plus_one, commute=True)
    out = np.empty(n)
    comm.Allreduce(data(n, 16), out, op=user_op)
    user_op.Free()
    report(f"{tag} Allreduce user op", out)
    strided = MPI.DOUBLE.Create_vector(n, 1, 2).Commit()
    buf = data(2 * n, 17) if rank == 0 else np.zeros(2 * n)
    comm.Bcast([buf, 1, strided], root=0)
    strided.Free()
    report(f"{tag} Bcast vector type", buf)

    # Pickle-based collectives on Python objects.
    obj = {"rank": rank, "values": list(range(rank, rank + n)), "text": "x" * n}
    total = comm.allreduce(sum(obj["values"]), op=MPI.SUM)
    everything = comm.allgather(obj)
    got = comm.bcast(obj if rank == root else None, root=root)
    pieces = comm.scatter([[r] * n for r in range(size)] if rank == 0 else None, root=0)
    swapped = comm.alltoall([(rank, r) for r in range(size)])
    prefix = comm.scan(sum(obj["values"]), op=MPI.SUM)
    before = comm.exscan(sum(obj["values"]), op=MPI.MAX)
    comm.barrier()
    if rank == 0:
        print(f"{tag} allreduce obj {total}")
    report(f"{tag} allgather obj", np.array([len(e["values"]) + e["rank"] for e in everything]))
    report(f"{tag} bcast obj", np.array(got["values"]))
    report(f"{tag} scatter obj", np.array(pieces))
    report(f"{tag} alltoall obj", np.array(swapped))
    report(f"{tag} scan obj", np.array([prefix]))
    report(f"{tag} exscan obj", np.array([before]) if rank else None)
