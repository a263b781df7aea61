! SPDX-License-Identifier: Apache-2.0
! An ordinary Fortran MPI program (mpif.h-style bindings through `use mpi`): MPI_ALLREDUCE on DOUBLE PRECISION
! and INTEGER arrays, out of place and with MPI_IN_PLACE, plus MPI_BCAST. Rank 0 prints sums that are exact in
! any reduction order. run_compare.sh runs it with and without libconflux_mpi.so and compares the output.
program fortran_checker
  use mpi
  implicit none
  integer, parameter :: n = 100000
  double precision, allocatable :: a(:), b(:)
  integer, allocatable :: ia(:), ib(:)
  integer :: ierr, rank, nranks, i

  call MPI_INIT(ierr)
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
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_FINALIZE(ierr)
end program fortran_checker
