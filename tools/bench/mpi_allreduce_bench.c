/* MPI_Allreduce baseline with the same timing rules as conduit-perf: float sum,
 * per size a warmup that also probes speed, a timed loop capped by a time budget
 * (iteration count agreed with MPI_MAX so every rank runs the same loop), and the
 * average time of the slowest rank.
 *
 * usage: mpi_allreduce_bench [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-T SECONDS]
 * Rank 0 prints one line per size: "size_bytes count time_us algbw_GBs busbw_GBs wrong". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static double agree_max(double v) {
  double out;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

int main(int argc, char **argv) {
  size_t min_bytes = 1024, max_bytes = 1024;
  double factor = 4, budget = 2.0;
  int iters = 20, warmup = 5, opt;
  MPI_Init(&argc, &argv);
  while ((opt = getopt(argc, argv, "b:e:f:n:w:T:")) != -1) {
    switch (opt) {
      case 'b': min_bytes = parse_bytes(optarg); break;
      case 'e': max_bytes = parse_bytes(optarg); break;
      case 'f': factor = atof(optarg); break;
      case 'n': iters = atoi(optarg); break;
      case 'w': warmup = atoi(optarg); break;
      case 'T': budget = atof(optarg); break;
      default: MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  float *send = malloc(max_bytes + 64), *recv = malloc(max_bytes + 64);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 3);
  if (rank == 0) printf("# size_bytes count time_us algbw_GBs busbw_GBs wrong (MPI_Allreduce float sum, %d ranks)\n", nranks);

  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    int count = (int)(bytes / sizeof(float));
    if (count > 0) {
      /* Small integers: the sum is exact whatever order MPI reduces in. */
      for (int i = 0; i < count; ++i) send[i] = (float)(1 + (rank * 3 + i) % 5);
      int n = iters;
      if (warmup > 0) {
        double t0 = MPI_Wtime(), el = 0;
        int done = 0;
        while (done < warmup) {
          MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          ++done;
          el = MPI_Wtime() - t0;
          if (budget > 0 && agree_max(el) > budget / 3) break;
        }
        if (budget > 0) {
          double per = agree_max(el / done);
          double fit = budget / (per > 1e-9 ? per : 1e-9);
          n = fit < 1 ? 1 : (fit < iters ? (int)fit : iters);
        }
      }
      double t0 = MPI_Wtime();
      for (int i = 0; i < n; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = agree_max((MPI_Wtime() - t0) / n);
      long wrong = 0, total = 0;
      for (int i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < nranks; ++r) want += (float)(1 + (r * 3 + i) % 5);
        if (recv[i] != want) ++wrong;
      }
      MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        double sz = (double)count * sizeof(float), algbw = sz / t / 1e9;
        printf("%zu %d %.1f %.4f %.4f %ld\n", (size_t)count * sizeof(float), count, t * 1e6, algbw,
               algbw * 2.0 * (nranks - 1) / nranks, total);
        fflush(stdout);
      }
    }
    size_t next = (size_t)((double)bytes * factor);
    bytes = next > bytes ? next : bytes + 1;
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
