! SPDX-License-Identifier: Apache-2.0
! An ordinary Fortran MPI program (mpif.h-style bindings through `use mpi`): MPI_ALLREDUCE on DOUBLE PRECISION
! and INTEGER arrays, out of place and with MPI_IN_PLACE, MPI_BCAST, MPI_GATHER, MPI_REDUCE_SCATTER, and the
! non-blocking MPI_IALLREDUCE and MPI_IBCAST completed by MPI_WAIT and an MPI_TEST loop (it asks for
! MPI_THREAD_MULTIPLE, under which the interposer routes them). Rank 0 prints sums that are exact in any
! reduction order. run_compare.sh runs it with and without libconflux_mpi.so and compares the output.
program fortran_checker
  use mpi
  implicit none
  integer, parameter :: n = 100000
  double precision, allocatable :: a(:), b(:)
  integer, allocatable :: ia(:), ib(:)
  double precision, allocatable :: g(:)
  integer, allocatable :: counts(:)
  integer :: ierr, rank, nranks, i, provided, request
  integer :: status(MPI_STATUS_SIZE)
  logical :: done

  call MPI_INIT_THREAD(MPI_THREAD_MULTIPLE, provided, ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  allocate(a(n), b(n), ia(n), ib(n))
  do i = 1, n
    a(i) = dble(mod(i * (rank + 3), 17))
    ia(i) = mod(i * 7 + rank * 13, 1001) - 500
  end do

  call MPI_ALLREDUCE(a, b, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f20.1, f12.1)', 'allreduce dp sum ', sum(b), b(n)
  call MPI_ALLREDUCE(MPI_IN_PLACE, a, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f20.1, f12.1)', 'allreduce dp max inplace ', sum(a), a(1)
  call MPI_ALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i12, i8)', 'allreduce int sum ', sum(int(ib, 8)), ib(7)
  call MPI_ALLREDUCE(ia, ib, 10, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i12)', 'allreduce int min small ', sum(ib(1:10))
  if (rank == nranks - 1) a = 2.5d0
  call MPI_BCAST(a, n, MPI_DOUBLE_PRECISION, nranks - 1, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f20.1)', 'bcast dp ', sum(a)

  allocate(g(n * nranks), counts(nranks))
  call MPI_GATHER(a, n, MPI_DOUBLE_PRECISION, g, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f20.1)', 'gather dp ', sum(g)
  g = dble(rank + 1)
  counts = n
  call MPI_REDUCE_SCATTER(g, b, counts, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, f20.1)', 'reduce_scatter dp ', sum(b)

  call MPI_IALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, request, ierr)
  call MPI_WAIT(request, status, ierr)
  ! MPI leaves a collective's status source and tag undefined; Open MPI's Fortran tag is not reproducible.
  if (rank == 0) print '(a, i12, i6)', 'iallreduce int max ', sum(int(ib, 8)), status(MPI_SOURCE)
  if (rank == 0) b = 0.5d0
  call MPI_IBCAST(b, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, request, ierr)
  done = .false.
  do while (.not. done)
    call MPI_TEST(request, done, status, ierr)
  end do
  if (rank == 0) print '(a, f20.1)', 'ibcast dp ', sum(b)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
end program fortran_checker
