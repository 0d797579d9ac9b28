/*===- allreduce_timer.c - where a tp rank's all-reduce time goes ---------===*
 *
 * Preloaded into each rank of a CPU program (LD_PRELOAD, through MPI's
 * profiling interface): every MPI_Allreduce first waits at a barrier, then
 * runs. The barrier's time is the wait for the slower rank (skew: no
 * overlap can hide it, the data is not there yet); the all-reduce's own
 * time is the transfer and the sum, what overlapping a collective with
 * independent work could hide at most. Printed per rank at MPI_Finalize.
 *
 *===----------------------------------------------------------------------===*/

#include <mpi.h>
#include <stdio.h>

static double waitSeconds, reduceSeconds;
static long calls, bytes;

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type,
                  MPI_Op op, MPI_Comm comm) {
  double start = PMPI_Wtime();
  PMPI_Barrier(comm);
  double arrived = PMPI_Wtime();
  int rc = PMPI_Allreduce(send, recv, count, type, op, comm);
  waitSeconds += arrived - start;
  reduceSeconds += PMPI_Wtime() - arrived;
  int size = 0;
  PMPI_Type_size(type, &size);
  ++calls;
  bytes += (long)count * size;
  return rc;
}

int MPI_Finalize(void) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("allreduce-timer: rank %d: %ld all-reduces, %.1f MiB, waiting for "
         "the other rank %.1f ms, all-reduce itself %.1f ms\n",
         rank, calls, bytes / 1048576.0, 1e3 * waitSeconds,
         1e3 * reduceSeconds);
  fflush(stdout);
  return PMPI_Finalize();
}
