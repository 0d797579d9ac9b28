//===- MpiCollectivesTest.cpp - the MPI backend on 2+ ranks ---------------===//
//
// Run under mpirun: every rank checks the collectives' results against the
// values each rank contributed. Prints "N passed, N failed" on rank 0.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <cstdio>
#include <mpi.h>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  std::unique_ptr<tprt::Communicator> comm = tprt::createMpiCommunicator(0);
  int r = comm->rank(), n = comm->size();
  int failures = 0, checks = 0;
  auto check = [&](bool ok, const char *what) {
    ++checks;
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "rank %d: %s failed\n", r, what);
    }
  };

  std::vector<float> data(5);
  for (int i = 0; i < 5; ++i)
    data[i] = float(r + 1) * (i + 1);
  comm->allReduceSum(data.data(), 5);
  bool ok = true;
  for (int i = 0; i < 5; ++i)
    ok &= data[i] == float(n * (n + 1) / 2) * (i + 1);
  check(ok, "allReduceSum");

  std::vector<float> mine = {float(r), float(10 * r)}, all(2 * n);
  comm->allGather(mine.data(), all.data(), 2);
  ok = true;
  for (int q = 0; q < n; ++q)
    ok &= all[2 * q] == q && all[2 * q + 1] == 10 * q;
  check(ok, "allGather");

  std::vector<float> blocks(3 * n), part(3);
  for (int i = 0; i < 3 * n; ++i)
    blocks[i] = float(i + r);
  comm->reduceScatterSum(blocks.data(), part.data(), 3);
  ok = true;
  for (int i = 0; i < 3; ++i)
    ok &= part[i] == float(n * (3 * r + i) + n * (n - 1) / 2);
  check(ok, "reduceScatterSum");

  double value = r == 1 ? 42.5 : 0.0;
  comm->broadcast(&value, sizeof(value), 1 % n);
  check(value == (n > 1 ? 42.5 : 0.0), "broadcast");

  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  comm.reset();
  if (r == 0)
    std::printf("mpi collectives on %d ranks: %d passed, %d failed\n", n,
                checks * n - total, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
