/* OpenMPI collective baseline with the same timing rules as conduit-perf: float (sum where
 * it reduces), -c allreduce (default), allgather, reducescatter (MPI_Reduce_scatter_block),
 * broadcast (root 0), reduce (root 0) or alltoall; sizes as nccl-tests counts them, the whole buffer (each
 * rank's share of an all-gather or reduce-scatter is size / ranks; an all-to-all sends
 * size / ranks to each rank). Per size a warmup that also
 * probes speed, a timed loop capped by a time budget (iteration count agreed with MPI_MAX so
 * every rank runs the same loop), and the average time of the slowest rank.
 *
 * usage: mpi_allreduce_bench [-c COLL] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-T SECONDS]
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

enum Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kReduce };

/* Rank r's contribution at element i: small integers, so sums are exact in any order. */
static float contribution(int r, long i) { return (float)(1 + (r * 3 + i) % 5); }

/* One run of the collective on `count` elements (the whole buffer). */
static void run(enum Coll c, float *send, float *recv, int count, int nranks) {
  int share = count / nranks;
  switch (c) {
    case kAllReduce: MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case kAllGather: MPI_Allgather(send, share, MPI_FLOAT, recv, share, MPI_FLOAT, MPI_COMM_WORLD); break;
    case kReduceScatter: MPI_Reduce_scatter_block(send, recv, share, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case kBroadcast: MPI_Bcast(recv, count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case kAllToAll: MPI_Alltoall(send, share, MPI_FLOAT, recv, share, MPI_FLOAT, MPI_COMM_WORLD); break;
    case kReduce: MPI_Reduce(send, recv, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
  }
}

/* Fresh inputs for a run: send holds this rank's contribution (its share for an
 * all-gather), a broadcast's root holds the data in recv, other ranks zeros. */
static void fill(enum Coll c, float *send, float *recv, int count, int rank, int nranks) {
  int share = count / nranks;
  if (c == kAllGather) {
    for (int i = 0; i < share; ++i) send[i] = contribution(rank, (long)rank * share + i);
  } else {
    for (int i = 0; i < count; ++i) send[i] = contribution(rank, i);
  }
  for (int i = 0; i < count; ++i) recv[i] = (c == kBroadcast && rank == 0) ? contribution(0, i) : 0.0f;
}

/* Wrong elements of the last run (a reduce's root only holds a result). */
static long check(enum Coll c, const float *recv, int count, int rank, int nranks) {
  int share = count / nranks, n = c == kReduceScatter ? share : c == kReduce && rank != 0 ? 0 : count;
  long wrong = 0;
  for (int j = 0; j < n; ++j) {
    long i = c == kReduceScatter ? (long)rank * share + j : j;
    float want = 0;
    if (c == kAllToAll) {
      /* Block r came from rank r: the block of its send buffer meant for this rank. */
      want = contribution(j / share, (long)rank * share + j % share);
    } else if (c == kAllReduce || c == kReduceScatter || c == kReduce) {
      for (int r = 0; r < nranks; ++r) want += contribution(r, i);
    } else if (c == kAllGather) {
      want = contribution((int)(i / share), i);
    } else {
      want = contribution(0, i);
    }
    if (recv[j] != want) ++wrong;
  }
  return wrong;
}

int main(int argc, char **argv) {
  size_t min_bytes = 1024, max_bytes = 1024;
  double factor = 4, budget = 2.0;
  int iters = 20, warmup = 5, opt;
  enum Coll coll = kAllReduce;
  const char *names[] = {"MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Bcast", "MPI_Alltoall",
                         "MPI_Reduce"};
  MPI_Init(&argc, &argv);
  while ((opt = getopt(argc, argv, "c:b:e:f:n:w:T:")) != -1) {
    switch (opt) {
      case 'c':
        if (strcmp(optarg, "allreduce") == 0) coll = kAllReduce;
        else if (strcmp(optarg, "allgather") == 0) coll = kAllGather;
        else if (strcmp(optarg, "reducescatter") == 0) coll = kReduceScatter;
        else if (strcmp(optarg, "broadcast") == 0) coll = kBroadcast;
        else if (strcmp(optarg, "alltoall") == 0) coll = kAllToAll;
        else if (strcmp(optarg, "reduce") == 0) coll = kReduce;
        else MPI_Abort(MPI_COMM_WORLD, 2);
        break;
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
  if (rank == 0) printf("# size_bytes count time_us algbw_GBs busbw_GBs wrong (%s float, %d ranks)\n", names[coll], nranks);
  /* nccl-tests' bus bandwidth factors. */
  const double busbw = coll == kAllReduce ? 2.0 * (nranks - 1) / nranks
                       : coll == kBroadcast || coll == kReduce ? 1.0 : (double)(nranks - 1) / nranks;

  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    int count = (int)(bytes / sizeof(float) / nranks * nranks);
    if (count > 0) {
      fill(coll, send, recv, count, rank, nranks);
      int n = iters;
      if (warmup > 0) {
        double t0 = MPI_Wtime(), el = 0;
        int done = 0;
        while (done < warmup) {
          run(coll, send, recv, count, nranks);
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
      for (int i = 0; i < n; ++i) run(coll, send, recv, count, nranks);
      double t = agree_max((MPI_Wtime() - t0) / n);
      fill(coll, send, recv, count, rank, nranks);
      run(coll, send, recv, count, nranks);
      long wrong = check(coll, recv, count, rank, nranks), total = 0;
      MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        double sz = (double)count * sizeof(float), algbw = sz / t / 1e9;
        printf("%zu %d %.1f %.4f %.4f %ld\n", (size_t)count * sizeof(float), count, t * 1e6, algbw, algbw * busbw,
               total);
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
