/*
 * Public API argument validation, without a GPU: every bad argument of every
 * public function returns LOOM_INVALID_ARGUMENT with a message naming it,
 * before any CUDA or NCCL call. Functions that need a live communicator get
 * a hand-made one (validation never touches the GPU).
 */
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "host/internal.h"
#include "../check.h"

/* Expect `call` to fail with `want` and a message containing `needle`. */
#define EXPECT_ERR(call, want, needle)                                         \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    CHECK(r_ == (want), "%s returned %d (%s), expected %d; message: %s", #call, \
          (int)r_, loom_result_string(r_), (int)(want), loom_last_error());    \
    CHECK(strstr(loom_last_error(), (needle)) != NULL,                         \
          "%s: message \"%s\" does not name \"%s\"", #call, loom_last_error(),  \
          (needle));                                                           \
  } while (0)

#define EXPECT_BAD(call, needle) EXPECT_ERR(call, LOOM_INVALID_ARGUMENT, needle)

static void test_results_and_dtypes(void) {
  for (int r = 0; r < LOOM_NUM_RESULTS; r++)
    CHECK(strcmp(loom_result_string((loom_result_t)r), "unknown result") != 0,
          "result %d has no name", r);
  CHECK(strcmp(loom_result_string((loom_result_t)99), "unknown result") == 0, "unknown result");
  CHECK(strcmp(loom_result_string(LOOM_TIMEOUT), "timeout") == 0, "timeout name");
  size_t b = 0;
  CHECK(loom_dtype_size(LOOM_FP32, &b) == LOOM_SUCCESS && b == 4, "fp32 size");
  CHECK(loom_dtype_size(LOOM_BF16, &b) == LOOM_SUCCESS && b == 2, "bf16 size");
  CHECK(loom_dtype_size(LOOM_FP16, &b) == LOOM_SUCCESS && b == 2, "fp16 size");
  CHECK(strcmp(loom_last_error(), "") == 0, "success clears the message");
  EXPECT_BAD(loom_dtype_size((loom_dtype_t)7, &b), "dtype");
  EXPECT_BAD(loom_dtype_size(LOOM_FP32, NULL), "bytes");
  CHECK(strcmp(loom_dtype_string(LOOM_BF16), "bf16") == 0, "bf16 name");
  CHECK(strcmp(loom_dtype_string((loom_dtype_t)9), "unknown") == 0, "unknown dtype name");
}

static void test_config(void) {
  loom_resolved_config rc;
  unsetenv("LOOM_TIMEOUT_MS");
  CHECK(loom_resolve_comm_config("f", NULL, &rc) == LOOM_SUCCESS, "NULL config is defaults");
  CHECK(rc.workspace_bytes == (size_t)LOOM_DEFAULT_WORKSPACE_BYTES &&
            rc.signal_slots == LOOM_DEFAULT_SIGNAL_SLOTS &&
            rc.timeout_ms == LOOM_DEFAULT_TIMEOUT_MS,
        "defaults");
  setenv("LOOM_TIMEOUT_MS", "1500", 1);
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  CHECK(loom_resolve_comm_config("f", &c, &rc) == LOOM_SUCCESS && rc.timeout_ms == 1500,
        "env sets an unset timeout");
  c.timeout_ms = 250;
  CHECK(loom_resolve_comm_config("f", &c, &rc) == LOOM_SUCCESS && rc.timeout_ms == 250,
        "explicit timeout beats env");
  setenv("LOOM_TIMEOUT_MS", "12abc", 1);
  c.timeout_ms = LOOM_UNSET;
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  setenv("LOOM_TIMEOUT_MS", "0", 1);
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  unsetenv("LOOM_TIMEOUT_MS");

  loom_comm_config_t bad = LOOM_COMM_CONFIG_INIT;
  bad.struct_size = 8;
  EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "struct_size");
  bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
  bad.version = 99;
  EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "version");
  const int64_t bad_ws[] = {0, -2, ((int64_t)1 << 40) + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.workspace_bytes = bad_ws[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "workspace_bytes");
  }
  const int bad_slots[] = {1, -5, LOOM_MAX_SIGNAL_SLOTS + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.signal_slots = bad_slots[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "signal_slots");
  }
  const int bad_to[] = {0, -7, LOOM_MAX_TIMEOUT_MS + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.timeout_ms = bad_to[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "timeout_ms");
  }
}

static void test_comm_create_args(void) {
  loom_comm_t comm = (loom_comm_t)0x1;
  loom_comm_t comms[4];
  ncclComm_t fake_nccl = (ncclComm_t)0x1; /* never dereferenced: validation first */
  EXPECT_BAD(loom_comm_create(fake_nccl, NULL, NULL), "comm");
  EXPECT_BAD(loom_comm_create(NULL, NULL, &comm), "nccl");
  CHECK(comm == NULL, "failed create sets *comm = NULL");
  loom_comm_config_t bad = LOOM_COMM_CONFIG_INIT;
  bad.signal_slots = 0;
  EXPECT_BAD(loom_comm_create(fake_nccl, &bad, &comm), "signal_slots");
  CHECK(strstr(loom_last_error(), "loom_comm_create") != NULL, "message names the function");

  EXPECT_BAD(loom_comm_create_all(2, NULL, NULL, NULL), "comms");
  EXPECT_BAD(loom_comm_create_all(0, NULL, NULL, comms), "ndev");
  EXPECT_BAD(loom_comm_create_all(-3, NULL, NULL, comms), "ndev");
  int neg[2] = {0, -1}, dup[3] = {0, 1, 0};
  EXPECT_BAD(loom_comm_create_all(2, neg, NULL, comms), "devlist[1]");
  EXPECT_BAD(loom_comm_create_all(3, dup, NULL, comms), "devlist[0] and devlist[2]");
  bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
  bad.timeout_ms = 0;
  EXPECT_BAD(loom_comm_create_all(1, NULL, &bad, comms), "timeout_ms");
  CHECK(comms[0] == NULL, "failed create_all clears comms");

  CHECK(loom_comm_destroy(NULL) == LOOM_SUCCESS, "destroy(NULL) is a no-op");
  EXPECT_BAD(loom_comm_destroy_all(-1, comms), "n ");
  EXPECT_BAD(loom_comm_destroy_all(2, NULL), "comms");
  CHECK(loom_comm_destroy_all(0, NULL) == LOOM_SUCCESS, "destroy_all of nothing");
  struct loom_comm dead;
  memset(&dead, 0, sizeof dead);
  loom_comm_t deadp = &dead;
  EXPECT_BAD(loom_comm_destroy(deadp), "not a live");
  EXPECT_BAD(loom_comm_destroy_all(1, &deadp), "comms[0]");
}

/* A communicator that exists only on the host, for validation paths. */
static struct loom_comm fake_comm(loom_fault_record *rec, int nranks) {
  struct loom_comm c;
  memset(&c, 0, sizeof c);
  memset(rec, 0, sizeof *rec);
  c.magic = LOOM_COMM_MAGIC;
  c.rank = 0;
  c.nranks = nranks;
  c.device = 0;
  c.config.workspace_bytes = 1 << 20;
  c.config.signal_slots = 64;
  c.config.timeout_ms = 1000;
  c.fault_host = rec;
  return c;
}

static void test_comm_queries_and_async(void) {
  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 4);
  int v = -1;
  size_t ws = 0;
  CHECK(loom_comm_rank(&c, &v) == LOOM_SUCCESS && v == 0, "rank");
  CHECK(loom_comm_size(&c, &v) == LOOM_SUCCESS && v == 4, "size");
  CHECK(loom_comm_device(&c, &v) == LOOM_SUCCESS && v == 0, "device");
  CHECK(loom_comm_workspace_bytes(&c, &ws) == LOOM_SUCCESS && ws == (1u << 20), "workspace");
  EXPECT_BAD(loom_comm_rank(NULL, &v), "comm");
  EXPECT_BAD(loom_comm_size(&c, NULL), "loom_comm_size");
  EXPECT_BAD(loom_comm_device(&c, NULL), "loom_comm_device");
  EXPECT_BAD(loom_comm_workspace_bytes(NULL, &ws), "comm");
  EXPECT_BAD(loom_comm_rank(&c, NULL), "NULL");

  loom_result_t async = LOOM_INTERNAL_ERROR;
  EXPECT_BAD(loom_comm_get_async_error(NULL, &async), "comm");
  EXPECT_BAD(loom_comm_get_async_error(&c, NULL), "async_error");
  CHECK(loom_comm_get_async_error(&c, &async) == LOOM_SUCCESS && async == LOOM_SUCCESS,
        "no fault yet");

  /* A kernel's fault record, as the device would leave it. */
  rec.rank = 0;
  rec.peer = 3;
  rec.what = LOOM_WAIT_SIGNAL;
  rec.slot = 5;
  rec.block = 17;
  rec.op = LOOM_OP_EXCHANGE;
  rec.epoch = 9;
  rec.observed = 8;
  rec.waited_ns = 1000000000ull;
  rec.status = LOOM_TIMEOUT;
  CHECK(loom_comm_get_async_error(&c, &async) == LOOM_SUCCESS && async == LOOM_TIMEOUT,
        "fault reported as LOOM_TIMEOUT");
  const char *m = loom_last_error();
  CHECK(strstr(m, "rank 0") && strstr(m, "peer 3") && strstr(m, "slot 5") &&
            strstr(m, "exchange") && strstr(m, "epoch 9"),
        "fault message names rank, peer and what: %s", m);
  char buf[64] = {0};
  EXPECT_ERR(loom_exchange(&c, LOOM_EXCHANGE_RING, buf, buf + 32, 16, 0), LOOM_INVALID_USAGE,
             "must be destroyed");
}

static void test_exchange_args(void) {
  size_t b = 0;
  CHECK(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 1000, &b) == LOOM_SUCCESS &&
            b == 2 * 1024,
        "ring workspace: 2 parities x 1 source x 1000 rounded to 256 (got %zu)", b);
  CHECK(loom_exchange_workspace_bytes(LOOM_EXCHANGE_ALLTOALL, 4, 4096, &b) == LOOM_SUCCESS &&
            b == 2 * 4 * 4096,
        "all-to-all workspace: 2 x 4 sources x 4096 (got %zu)", b);
  EXPECT_BAD(loom_exchange_workspace_bytes((loom_exchange_t)5, 4, 16, &b), "pattern");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 0, 16, &b), "nranks");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 0, &b), "bytes_per_peer");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, (size_t)1 << 62, &b),
             "bytes_per_peer");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 16, NULL), "bytes");

  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 4);
  static char buf[1 << 16];
  char *s = buf, *r = buf + (1 << 15);
  EXPECT_BAD(loom_exchange(NULL, LOOM_EXCHANGE_RING, s, r, 16, 0), "comm");
  EXPECT_BAD(loom_exchange(&c, (loom_exchange_t)-1, s, r, 16, 0), "pattern");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, NULL, r, 16, 0), "sendbuf");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, s, NULL, 16, 0), "recvbuf");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, s, r, 0, 0), "bytes_per_peer");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_ALLTOALL, s, s + 1024, 512, 0), "overlap");
  /* far-apart fake addresses: validation never dereferences them */
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_ALLTOALL, (void *)0x10000000, (void *)0x20000000,
                           (size_t)1 << 20, 0),
             "workspace");
  struct loom_comm dead = c;
  dead.magic = 0;
  EXPECT_BAD(loom_exchange(&dead, LOOM_EXCHANGE_RING, s, r, 16, 0), "not a live");
}

int main(void) {
  test_results_and_dtypes();
  test_config();
  test_comm_create_args();
  test_comm_queries_and_async();
  test_exchange_args();
  return check_summary("test_api");
}
