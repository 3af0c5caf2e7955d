/*
 * One process per GPU for the multi-process GPU tests (test_exchange,
 * test_moe, test_faults, test_sequence): count GPUs without touching CUDA in
 * this process, fork one child per rank, hand rank 0's NCCL unique id to the
 * others through pipes, and wait for every child; once one fails the others
 * get a grace period (they are likely blocked on it) and are then killed. A
 * watchdog may kill the children listed in ranks_children. A bounded barrier
 * between the rank processes (ranks_barrier_wait). The launch mode those
 * tests take as their first argument (single, multi, loopback) and what
 * follows from it: the GPU count, which world sizes fit, one process's world
 * of communicators and each rank's device.
 */
#ifndef LOOM_TEST_GPU_RANKS_H
#define LOOM_TEST_GPU_RANKS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../check.h"
#include "gpu_check.h"

#define RANKS_MAX 8
#define RANKS_GRACE_S 15 /* time the others get after a rank fails */

/* A barrier between the rank processes, in memory they share (a
 * MAP_SHARED mapping made before the fork); zero-initialised = ready. */
typedef struct {
  atomic_int arrived, generation;
} ranks_barrier_t;

/* Every one of `nranks` callers meets here; bounded: after deadline_s a
 * caller records a failure naming `what` and returns -1. */
static inline int ranks_barrier_wait(ranks_barrier_t *b, int nranks, int rank, const char *what,
                                     double deadline_s) {
  const int gen = atomic_load(&b->generation);
  if (atomic_fetch_add(&b->arrived, 1) == nranks - 1) {
    atomic_store(&b->arrived, 0);
    atomic_fetch_add(&b->generation, 1);
    return 0;
  }
  const double end = now_s() + deadline_s;
  const struct timespec pause = {0, 20000};
  while (atomic_load(&b->generation) == gen) {
    if (now_s() > end) {
      CHECK(0, "rank %d: barrier \"%s\" not reached by every rank within %.0f s", rank, what,
            deadline_s);
      return -1;
    }
    nanosleep(&pause, NULL);
  }
  return 0;
}

/* Live children (0 once reaped), for a watchdog to kill. */
static volatile pid_t ranks_children[RANKS_MAX];

/* GPU count without initialising CUDA in this process (children fork
 * later and must not inherit a CUDA context). */
static int ranks_gpu_count(void) {
  int fd[2], count = 0;
  if (pipe(fd) != 0) return 0;
  pid_t p = fork();
  if (p == 0) {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) c = 0;
    _exit(write(fd[1], &c, sizeof c) == (ssize_t)sizeof c ? 0 : 1);
  }
  if (p < 0 || read(fd[0], &count, sizeof count) != (ssize_t)sizeof count) count = 0;
  if (p > 0) waitpid(p, NULL, 0);
  close(fd[0]);
  close(fd[1]);
  return count;
}

/* ---- launch modes ---------------------------------------------------------------------------- */

/* How a test lays out its ranks, named by its first argument. */
typedef enum {
  RANKS_SINGLE,   /* "single": one process drives every GPU (loom_comm_create_all) */
  RANKS_MULTI,    /* "multi": one process per GPU (ranks_run), each with its own
                     NCCL communicator and loom_comm_create */
  RANKS_LOOPBACK, /* "loopback": one process, every rank on device 0
                     (loom_comm_create_loopback) */
  RANKS_NUM_MODES
} ranks_mode;

static const char *const RANKS_MODE_NAMES[RANKS_NUM_MODES] = {"single", "multi", "loopback"};

#define RANKS_USAGE_EXIT 2 /* exit status after a usage message */

/* Print "usage: PROG single|multi|loopback" and then `options` as given
 * (e.g. " [--seed S]"; "" for none) to stderr. Returns RANKS_USAGE_EXIT. */
static int ranks_usage(const char *prog, const char *options) {
  fprintf(stderr, "usage: %s ", prog);
  for (int m = 0; m < RANKS_NUM_MODES; m++)
    fprintf(stderr, "%s%s", m ? "|" : "", RANKS_MODE_NAMES[m]);
  fprintf(stderr, "%s\n", options);
  return RANKS_USAGE_EXIT;
}

/* The mode argv[1] names, into *mode: 0. When argv[1] is missing or names
 * no mode, prints the usage (ranks_usage) and returns -1. */
static int ranks_mode_parse(int argc, char **argv, const char *prog, const char *options,
                            ranks_mode *mode) {
  for (int m = 0; argc > 1 && m < RANKS_NUM_MODES; m++)
    if (strcmp(argv[1], RANKS_MODE_NAMES[m]) == 0) {
      *mode = (ranks_mode)m;
      return 0;
    }
  ranks_usage(prog, options);
  return -1;
}

/* GPUs visible in `mode` (0 when none or on error): multi mode counts them
 * without initialising CUDA here (ranks_gpu_count; the rank processes fork
 * later), the others through the CUDA runtime in this process. */
static int ranks_mode_gpu_count(ranks_mode mode) {
  if (mode == RANKS_MULTI) return ranks_gpu_count();
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* Whether a world of R ranks runs in `mode` with ngpu GPUs visible: a
 * loopback world needs one GPU, the other modes one GPU per rank. */
static int ranks_world_fits(ranks_mode mode, int R, int ngpu) {
  return mode == RANKS_LOOPBACK ? ngpu >= 1 : R <= ngpu;
}

/* The device of rank `rank` in `mode`: 0 for every loopback rank, else the
 * rank's own GPU. */
static int ranks_device(ranks_mode mode, int rank) { return mode == RANKS_LOOPBACK ? 0 : rank; }

/* One process's world of R ranks, single or loopback mode (in multi mode
 * each rank process makes its own communicator): comms[r] is rank r's
 * communicator, on device ranks_device(mode, r). 0 on success; a failure is
 * a CHECK and returns -1. */
static int ranks_world_create(ranks_mode mode, int R, const loom_comm_config_t *cfg,
                              loom_comm_t *comms) {
  if (mode == RANKS_MULTI) {
    CHECK(0, "ranks_world_create: multi mode makes one communicator per rank process");
    return -1;
  }
  if (mode == RANKS_LOOPBACK)
    LOOM_T(loom_comm_create_loopback(R, cfg, comms));
  else
    LOOM_T(loom_comm_create_all(R, NULL, cfg, comms));
  return 0;
}

/* In a child: rank 0 makes the NCCL unique id and writes it to the other
 * ranks' pipes, the others read it from theirs. 0 on success. */
typedef struct {
  int rank, n;
  int id_in;         /* this rank's read end */
  const int *id_out; /* every rank's write end */
} ranks_child;

static int ranks_unique_id(const ranks_child *c, ncclUniqueId *id) {
  if (c->rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return -1;
    for (int r = 1; r < c->n; r++)
      if (write(c->id_out[r], id, sizeof *id) != (ssize_t)sizeof *id) return -1;
    return 0;
  }
  return read(c->id_in, id, sizeof *id) == (ssize_t)sizeof *id ? 0 : -1;
}

/* Wait for the n children; once one fails, give the rest RANKS_GRACE_S
 * and then kill them. A CHECK per rank, named by `what`. */
static int ranks_wait(const pid_t *pid, int n, const char *what) {
  int st[RANKS_MAX] = {0}, done[RANKS_MAX] = {0}, killed[RANKS_MAX] = {0}, left = n;
  double failed_at = 0;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      if (done[r] || waitpid(pid[r], &st[r], WNOHANG) != pid[r]) continue;
      done[r] = 1;
      ranks_children[r] = 0;
      left--;
      if (!(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0) && failed_at == 0) failed_at = now_s();
    }
    if (failed_at > 0 && now_s() - failed_at > RANKS_GRACE_S)
      for (int r = 0; r < n; r++)
        if (!done[r] && !killed[r]) killed[r] = kill(pid[r], SIGKILL) == 0;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  int ok = 1;
  for (int r = 0; r < n; r++) {
    const int good = WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0;
    CHECK(good, "multi-process %s: rank %d %s %d%s", what, r,
          WIFEXITED(st[r]) ? "exited with" : "killed by signal",
          WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : WTERMSIG(st[r]),
          killed[r] ? " (killed after another rank failed)" : "");
    ok &= good;
  }
  return ok ? 0 : -1;
}

/* Fork n <= RANKS_MAX children; child r exits with body(&c, arg) (0 =
 * passed), its check counters starting from zero. Returns 0 when every
 * child exits 0. */
static int ranks_run(int n, int (*body)(const ranks_child *c, void *arg), void *arg,
                     const char *what) {
  int pipes[RANKS_MAX][2], wr[RANKS_MAX];
  pid_t pid[RANKS_MAX];
  if (n < 1 || n > RANKS_MAX) return -1;
  for (int r = 0; r < n; r++) {
    if (pipe(pipes[r]) != 0) return -1;
    wr[r] = pipes[r][1];
  }
  fflush(stdout);
  fflush(stderr);
  int forked = 0;
  for (; forked < n; forked++) {
    const int r = forked;
    pid[r] = fork();
    if (pid[r] < 0) break;
    if (pid[r] == 0) {
      memset((void *)ranks_children, 0, sizeof ranks_children);
      check_passed_ = check_failed_ = check_skipped_ = 0; /* not the parent's */
      const ranks_child c = {r, n, pipes[r][0], wr};
      _exit(body(&c, arg));
    }
    ranks_children[r] = pid[r];
  }
  for (int r = 0; r < n; r++) {
    close(pipes[r][0]);
    close(pipes[r][1]);
  }
  if (forked < n) { /* the others would wait for the missing rank */
    CHECK(0, "multi-process %s: fork failed for rank %d of %d", what, forked, n);
    for (int r = 0; r < forked; r++) {
      kill(pid[r], SIGKILL);
      waitpid(pid[r], NULL, 0);
      ranks_children[r] = 0;
    }
    return -1;
  }
  return ranks_wait(pid, n, what);
}

#endif
