// SPDX-License-Identifier: Apache-2.0
// minimpi's self-test, run by ctest as `cfxrun -n 4 cfx_minimpi_test` (and at 1 rank without a launcher): every call
// nccl-tests makes, with payloads larger than one slot so that the stepping and the two banks are exercised, against
// closed-form results. Exit status 0 only when every check held on this rank. With --vanish R, rank R leaves
// early and the others must time out naming it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <numeric>
#include <vector>

#include "mpi.h"

namespace {

int gFailures = 0;
int gRank = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "minimpi_test: rank %d: FAILED: %s\n", gRank, what);
    ++gFailures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int r = gRank;
  // --vanish R: rank R leaves without another call, as a hung or lost rank would; the others must stop at their
  // deadline with a line naming it (ctest matches that line).
  if (argc == 3 && std::string(argv[1]) == "--vanish") {
    if (r == std::atoi(argv[2])) return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "minimpi_test: rank %d: the barrier returned without rank %s\n", r, argv[2]);
    return 0;
  }

  // Allreduce: sums over more than one slot (16 KiB), in place and not; min/max; 64-bit and double.
  const int count = 10007;
  std::vector<int> in(count), out(count, -1);
  for (int i = 0; i < count; ++i) in[i] = i * (r + 1);
  MPI_Allreduce(in.data(), out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  bool ok = true;
  for (int i = 0; i < count; ++i) ok = ok && out[i] == i * n * (n + 1) / 2;
  check(ok, "MPI_Allreduce sum of ints");
  MPI_Allreduce(MPI_IN_PLACE, in.data(), count, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ok = true;
  for (int i = 0; i < count; ++i) ok = ok && in[i] == i * n;
  check(ok, "MPI_Allreduce in-place max");
  int64_t big = (int64_t{1} << 40) + r;
  MPI_Allreduce(MPI_IN_PLACE, &big, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  check(big == (int64_t{1} << 40), "MPI_Allreduce int64 min");
  double d = 0.5 * (r + 1);
  MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check(d == 0.25 * n * (n + 1), "MPI_Allreduce double sum");
  long l = r;
  MPI_Allreduce(MPI_IN_PLACE, &l, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  check(l == n - 1, "MPI_Allreduce long max");

  // Bcast of 100 KB from the last rank.
  std::vector<unsigned char> bytes(100000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = r == n - 1 ? static_cast<unsigned char>(i * 7) : 0;
  MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, n - 1, MPI_COMM_WORLD);
  ok = true;
  for (std::size_t i = 0; i < bytes.size(); ++i) ok = ok && bytes[i] == static_cast<unsigned char>(i * 7);
  check(ok, "MPI_Bcast of 100000 bytes");

  // Gather of 2048-byte lines to rank 0 (as nccl-tests prints), and of doubles in place at the root.
  std::vector<char> line(2048, static_cast<char>('a' + r)), lines(2048 * n, 0);
  MPI_Gather(line.data(), 2048, MPI_BYTE, lines.data(), 2048, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (r == 0) {
    ok = true;
    for (int j = 0; j < n; ++j) ok = ok && lines[2048 * j + 2047] == static_cast<char>('a' + j);
    check(ok, "MPI_Gather of lines");
  }
  std::vector<double> times(3 * n, -1.0);
  for (int k = 0; k < 3; ++k) times[3 * r + k] = r + 0.1 * k;
  int root = n / 2;
  MPI_Gather(r == root ? MPI_IN_PLACE : &times[3 * r], 3, MPI_DOUBLE, times.data(), 3, MPI_DOUBLE, root,
             MPI_COMM_WORLD);
  if (r == root) {
    ok = true;
    for (int j = 0; j < n; ++j) ok = ok && times[3 * j + 2] == j + 0.2;
    check(ok, "MPI_Gather in place at a middle root");
  }

  // Allgather in place of one uint64 per rank (nccl-tests' host hashes).
  std::vector<uint64_t> hashes(n, 0);
  hashes[r] = 0x1000u + static_cast<uint64_t>(r);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes.data(), sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD);
  ok = true;
  for (int j = 0; j < n; ++j) ok = ok && hashes[j] == 0x1000u + static_cast<uint64_t>(j);
  check(ok, "MPI_Allgather in place");

  // Split by parity, keys reversed: sub-ranks count down; a broadcast inside each half from its sub-rank 0.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, r % 2, n - r, &half);
  int hr = -1, hn = -1;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hn);
  int expectN = (n + 1 - r % 2) / 2;
  check(hn == expectN, "MPI_Comm_split size");
  check(hr == expectN - 1 - r / 2, "MPI_Comm_split rank order by key");
  int token = hr == 0 ? 100 + r : -1;
  MPI_Bcast(&token, 1, MPI_INT, 0, half);
  int highest = r % 2 == 0 ? 2 * (expectN - 1) : 2 * (expectN - 1) + 1;
  check(token == 100 + highest, "MPI_Bcast in a split communicator");
  MPI_Comm_free(&half);
  check(half == MPI_COMM_NULL, "MPI_Comm_free");

  // Many back-to-back barriers and small reductions: ranks run ahead by a step and reuse the banks.
  int sum = 0;
  for (int k = 0; k < 2000; ++k) {
    int v = k + r;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    sum += v == k * n + n * (n - 1) / 2 ? 0 : 1;
    if (k % 100 == 0) MPI_Barrier(MPI_COMM_WORLD);
  }
  check(sum == 0, "2000 back-to-back reductions");

  int failures = gFailures;
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("minimpi_test: %d ranks, %s\n", n, failures == 0 ? "all checks passed" : "FAILED");
  MPI_Finalize();
  return gFailures == 0 && failures == 0 ? 0 : 1;
}
