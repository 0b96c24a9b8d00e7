/* OpenMPI baseline for the object-store benchmark (objects_bench.sh): MPI_Bcast,
 * MPI_Gather, MPI_Reduce and MPI_Allreduce of float32 data, root 0, with the same timing
 * rules as hoplite-bench: per size a warmup (sizes <= 64 MiB), then 50 / 10 / 3 / 1 timed runs
 * (<= 64 KiB / <= 1 MiB / <= 64 MiB / larger), each started after GAP_MS idle (15 GAP_MS from
 * 64 MiB, as hoplite-bench --gap-ms) and a barrier, and lasting until the slowest rank finished;
 * the median is printed.
 *
 * usage: mpi_objects_bench OP SIZES [GAP_MS]   (OP: bcast|gather|reduce|allreduce, SIZES: 1K,1M,...,
 *                                              GAP_MS default 20)
 * Rank 0 prints "op hosts size_bytes iters median_ms min_ms". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t parse_bytes(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return (size_t)v;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 3 && argc != 4) {
    if (rank == 0) fprintf(stderr, "usage: mpi_objects_bench bcast|gather|reduce|allreduce 1K,1M,... [GAP_MS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *op = argv[1];
  int gap_ms = 20;
  if (argc == 4) gap_ms = atoi(argv[3]) > 0 ? atoi(argv[3]) : 0;
  char *sizes = strdup(argv[2]);
  for (char *tok = strtok(sizes, ","); tok != NULL; tok = strtok(NULL, ",")) {
    size_t bytes = parse_bytes(tok);
    int count = (int)((bytes + 3) / 4);
    float *send = malloc((size_t)count * 4 + 64);
    size_t recv_bytes = strcmp(op, "gather") == 0 && rank == 0 ? (size_t)count * 4 * n : (size_t)count * 4;
    float *recv = malloc(recv_bytes + 64);
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 3);
    for (int i = 0; i < count; ++i) send[i] = 1.0f;
    memset(recv, 0, recv_bytes);
    int iters = bytes <= (64u << 10) ? 50 : bytes <= (1u << 20) ? 10 : bytes <= (64u << 20) ? 3 : 1;
    int warm = bytes <= (64u << 20) ? 1 : 0;
    double *t = malloc((size_t)iters * sizeof(double));
    if (!t) MPI_Abort(MPI_COMM_WORLD, 3);
    const long gap_us = 1000L * gap_ms * (bytes >= (64u << 20) ? 15 : 1);
    for (int it = 0; it < warm + iters; ++it) {
      struct timespec idle = {gap_us / 1000000, (gap_us % 1000000) * 1000};
      nanosleep(&idle, NULL);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (strcmp(op, "bcast") == 0) {
        MPI_Bcast(rank == 0 ? send : recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      } else if (strcmp(op, "gather") == 0) {
        MPI_Gather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      } else if (strcmp(op, "reduce") == 0) {
        MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      } else if (strcmp(op, "allreduce") == 0) {
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else {
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      double mine = MPI_Wtime() - t0, slowest;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (it >= warm) t[it - warm] = slowest * 1e3;
    }
    if (rank == 0) {
      if ((strcmp(op, "reduce") == 0 || strcmp(op, "allreduce") == 0) && count > 0 && recv[count - 1] != (float)n) {
        fprintf(stderr, "mpi_objects_bench: wrong %s result %f\n", op, recv[count - 1]);
      }
      qsort(t, iters, sizeof(double), cmp);
      printf("%s %d %zu %d %.3f %.3f\n", op, n, bytes, iters, t[iters / 2], t[0]);
      fflush(stdout);
    }
    free(t);
    free(send);
    free(recv);
  }
  free(sizes);
  MPI_Finalize();
  return 0;
}
