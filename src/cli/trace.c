/* The in-kernel trace as a Perfetto timeline, and SM busy figures. */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[LOOM_MOE_TRACE_NUM_KINDS] = {
    "gate",         "place",       "dispatch",    "GEMM0",         "GEMM1",      "combine",
    "wait barrier", "wait credit", "wait header", "wait dispatch", "wait GEMM0", "wait return",
    "wait stage"};

const char *cli_trace_kind_name(int kind) {
  return kind >= 0 && kind < LOOM_MOE_TRACE_NUM_KINDS ? kind_names[kind] : "unknown";
}

/* ns as microseconds with three decimals, exactly (no floating point). */
static void put_us(FILE *f, int64_t ns) {
  const char *sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? (uint64_t)(-(ns + 1)) + 1 : (uint64_t)ns;
  fprintf(f, "%s%llu.%03llu", sign, (unsigned long long)(a / 1000), (unsigned long long)(a % 1000));
}

/* Before each element of the traceEvents array: nothing before the first,
 * a comma and a newline before the others. */
static void put_sep(FILE *f, int *first) {
  if (!*first) fputs(",\n", f);
  *first = 0;
}

/* The slice's name and args (indices named per kind, loom.h). */
static int put_slice(FILE *f, int *first, int pid, const loom_moe_trace_info_t *info,
                     const loom_moe_trace_event_t *e) {
  const int a = e->a, b = e->b, c = e->c, peer = e->peer;
  char name[96];
  char args[192];
  switch (e->kind) {
  case LOOM_MOE_TRACE_GATE:
  case LOOM_MOE_TRACE_COMBINE:
  case LOOM_MOE_TRACE_WAIT_RETURN:
    snprintf(name, sizeof name, "%s tile %d", kind_names[e->kind], a);
    snprintf(args, sizeof args, "\"tile\": %d, \"first_token\": %d, \"tokens\": %d", a, b, c);
    break;
  case LOOM_MOE_TRACE_PLACE:
    snprintf(name, sizeof name, "place");
    snprintf(args, sizeof args, "\"token_tiles\": %d, \"headers\": %d", a, b);
    break;
  case LOOM_MOE_TRACE_DISPATCH:
    snprintf(name, sizeof name, "dispatch to r%d e%d rows %d+%d", peer, a, b, c);
    snprintf(args, sizeof args, "\"dest\": %d, \"expert\": %d, \"first_row\": %d, \"rows\": %d",
             peer, a, b, c);
    break;
  case LOOM_MOE_TRACE_GEMM0:
  case LOOM_MOE_TRACE_GEMM1:
    snprintf(name, sizeof name, "%s src%d e%d t%d c%d", kind_names[e->kind], peer, a, b, c);
    snprintf(args, sizeof args,
             "\"source\": %d, \"expert\": %d, \"row_tile\": %d, \"col_block\": %d", peer, a, b, c);
    break;
  case LOOM_MOE_TRACE_WAIT_BARRIER:
    snprintf(name, sizeof name, "wait barrier %d", a);
    snprintf(args, sizeof args, "\"barrier\": %d", a);
    break;
  case LOOM_MOE_TRACE_WAIT_CREDIT:
  case LOOM_MOE_TRACE_WAIT_HEADER:
    snprintf(name, sizeof name, "%s r%d", kind_names[e->kind], peer);
    snprintf(args, sizeof args, "\"peer\": %d", peer);
    break;
  case LOOM_MOE_TRACE_WAIT_DISPATCH:
  case LOOM_MOE_TRACE_WAIT_GEMM0:
    snprintf(name, sizeof name, "%s src%d e%d t%d", kind_names[e->kind], peer, a, b);
    snprintf(args, sizeof args, "\"source\": %d, \"expert\": %d, \"row_tile\": %d%s", peer, a, b,
             e->kind == LOOM_MOE_TRACE_WAIT_GEMM0 ? ", \"gemm0_tasks\": " : "");
    if (e->kind == LOOM_MOE_TRACE_WAIT_GEMM0) {
      const size_t at = strlen(args);
      snprintf(args + at, sizeof args - at, "%d", c);
    }
    break;
  case LOOM_MOE_TRACE_WAIT_STAGE:
    snprintf(name, sizeof name, "wait stage task %d", a);
    snprintf(args, sizeof args, "\"task\": %d", a);
    break;
  default:
    return -1;
  }
  const int64_t ts = (int64_t)(e->start_ns - info->start_ns);
  const int64_t dur = e->end_ns >= e->start_ns ? (int64_t)(e->end_ns - e->start_ns) : 0;
  put_sep(f, first);
  fprintf(f, "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
             "\"ts\": ",
          name, e->kind >= LOOM_MOE_TRACE_FIRST_WAIT ? "wait" : "work", pid, (int)e->sm);
  put_us(f, ts);
  fprintf(f, ", \"dur\": ");
  put_us(f, dur);
  fprintf(f, ", \"args\": {%s}}", args);
  return 0;
}

static void put_meta(FILE *f, int *first, const char *what, int pid, int tid, const char *key,
                     const char *text, long long number) {
  put_sep(f, first);
  fprintf(f, "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %d", what, pid);
  if (tid >= 0) fprintf(f, ", \"tid\": %d", tid);
  if (text != NULL)
    fprintf(f, ", \"args\": {\"%s\": \"%s\"}}", key, text);
  else
    fprintf(f, ", \"args\": {\"%s\": %lld}}", key, number);
}

int cli_write_trace_json(FILE *f, const cli_trace_gpu *gpus, int n) {
  int rc = 0, first = 1;
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
  for (int g = 0; g < n; g++) {
    const cli_trace_gpu *t = &gpus[g];
    const loom_moe_trace_info_t *info = &t->info;
    char text[160];
    snprintf(text, sizeof text, "GPU %d (rank %d): %lld events, %lld dropped", t->gpu, info->rank,
             (long long)info->recorded, (long long)info->dropped);
    put_meta(f, &first, "process_name", t->gpu, -1, "name", text, 0);
    put_meta(f, &first, "process_sort_index", t->gpu, -1, "sort_index", NULL, t->gpu);
    /* name every SM that recorded something, sorted by id */
    int max_sm = -1;
    for (int64_t i = 0; i < info->recorded; i++)
      if ((int)t->events[i].sm > max_sm) max_sm = t->events[i].sm;
    unsigned char *seen = calloc((size_t)max_sm + 2, 1);
    if (seen == NULL) return -1;
    for (int64_t i = 0; i < info->recorded; i++) seen[t->events[i].sm] = 1;
    for (int sm = 0; sm <= max_sm; sm++) {
      if (!seen[sm]) continue;
      snprintf(text, sizeof text, "SM %d", sm);
      put_meta(f, &first, "thread_name", t->gpu, sm, "name", text, 0);
      put_meta(f, &first, "thread_sort_index", t->gpu, sm, "sort_index", NULL, sm);
    }
    free(seen);
    put_meta(f, &first, "thread_name", t->gpu, CLI_TRACE_KERNEL_TID, "name", "kernel", 0);
    put_meta(f, &first, "thread_sort_index", t->gpu, CLI_TRACE_KERNEL_TID, "sort_index", NULL, -1);
    put_sep(f, &first);
    fprintf(f, "{\"name\": \"moe_kernel\", \"cat\": \"kernel\", \"ph\": \"X\", \"pid\": %d, "
               "\"tid\": %d, \"ts\": 0.000, \"dur\": ",
            t->gpu, CLI_TRACE_KERNEL_TID);
    put_us(f, info->end_ns >= info->start_ns ? (int64_t)(info->end_ns - info->start_ns) : 0);
    fprintf(f, ", \"args\": {\"blocks\": %d, \"events\": %lld, \"dropped\": %lld, "
               "\"start_ns\": %llu}}",
            info->blocks, (long long)info->recorded, (long long)info->dropped,
            (unsigned long long)info->start_ns);
    for (int64_t i = 0; i < info->recorded && rc == 0; i++)
      rc = put_slice(f, &first, t->gpu, info, &t->events[i]);
  }
  fprintf(f, "\n]}\n");
  return rc != 0 || ferror(f) ? -1 : 0;
}

/* ---- SM busy ------------------------------------------------------------------------ */

typedef struct {
  uint64_t s, e;
} span;

static int cmp_span(const void *x, const void *y) {
  const span *a = (const span *)x, *b = (const span *)y;
  return a->s < b->s ? -1 : a->s > b->s;
}

/* Sort and merge overlapping spans in place; returns how many are left. */
static size_t merge_spans(span *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_span);
  size_t m = 0;
  for (size_t i = 1; i < n; i++) {
    if (v[i].s <= v[m].e) {
      if (v[i].e > v[m].e) v[m].e = v[i].e;
    } else {
      v[++m] = v[i];
    }
  }
  return m + 1;
}

/* Length of the union of merged spans a, minus its overlap with merged b. */
static uint64_t busy_ns(const span *a, size_t na, const span *b, size_t nb) {
  uint64_t total = 0, both = 0;
  for (size_t i = 0; i < na; i++) total += a[i].e - a[i].s;
  for (size_t i = 0, j = 0; i < na && j < nb;) {
    const uint64_t s = a[i].s > b[j].s ? a[i].s : b[j].s;
    const uint64_t e = a[i].e < b[j].e ? a[i].e : b[j].e;
    if (e > s) both += e - s;
    if (a[i].e < b[j].e)
      i++;
    else
      j++;
  }
  return total - both;
}

int cli_trace_sm_busy(const loom_moe_trace_info_t *info, const loom_moe_trace_event_t *events,
                      double *per_sm, int max_sms, cli_trace_busy *out) {
  const uint64_t t0 = info->start_ns, t1 = info->end_ns;
  const size_t n = info->recorded > 0 ? (size_t)info->recorded : 0;
  memset(out, 0, sizeof *out);
  if (t1 <= t0) return -1;
  int sms = info->blocks > 0 ? info->blocks : 0;
  for (size_t i = 0; i < n; i++)
    if ((int)events[i].sm + 1 > sms) sms = events[i].sm + 1;
  if (sms == 0 || (per_sm != NULL && sms > max_sms)) return -1;
  /* spans bucketed by SM: SM s's work spans at work[first[s] ..
   * first[s] + nw[s]), its waits at wait[first[s] .. first[s] + nq[s]) */
  size_t *first = calloc((size_t)sms + 1, sizeof *first);
  size_t *nw = calloc((size_t)sms, sizeof *nw), *nq = calloc((size_t)sms, sizeof *nq);
  span *work = malloc((n > 0 ? n : 1) * sizeof *work);
  span *wait = malloc((n > 0 ? n : 1) * sizeof *wait);
  int rc = -1;
  double sum = 0;
  if (first == NULL || nw == NULL || nq == NULL || work == NULL || wait == NULL) goto out;
  for (size_t i = 0; i < n; i++) first[events[i].sm + 1]++;
  for (int s = 0; s < sms; s++) first[s + 1] += first[s];
  for (size_t i = 0; i < n; i++) {
    const loom_moe_trace_event_t *e = &events[i];
    span sp = {e->start_ns > t0 ? e->start_ns : t0, e->end_ns < t1 ? e->end_ns : t1};
    if (sp.e <= sp.s) continue;
    const int s = e->sm;
    if (e->kind >= LOOM_MOE_TRACE_FIRST_WAIT)
      wait[first[s] + nq[s]++] = sp;
    else
      work[first[s] + nw[s]++] = sp;
  }
  out->min = 1.0;
  for (int s = 0; s < sms; s++) {
    const size_t a = merge_spans(work + first[s], nw[s]);
    const size_t b = merge_spans(wait + first[s], nq[s]);
    const double f = (double)busy_ns(work + first[s], a, wait + first[s], b) / (double)(t1 - t0);
    if (per_sm != NULL) per_sm[s] = f;
    sum += f;
    if (f < out->min) out->min = f;
    if (f > out->max) out->max = f;
  }
  out->sms = sms;
  out->mean = sum / sms;
  rc = 0;
out:
  free(first);
  free(nw);
  free(nq);
  free(work);
  free(wait);
  return rc;
}

int cli_trace_path(const char *base, int tokens, int several, char *out, size_t n) {
  int w;
  if (!several) {
    w = snprintf(out, n, "%s", base);
  } else {
    const char *slash = strrchr(base, '/');
    const char *dot = strrchr(base, '.');
    if (dot == NULL || (slash != NULL && dot < slash) || dot == base ||
        (slash != NULL && dot == slash + 1))
      dot = base + strlen(base); /* no extension (or a dot file): append */
    w = snprintf(out, n, "%.*s.T%d%s", (int)(dot - base), base, tokens, dot);
  }
  return w < 0 || (size_t)w >= n ? -1 : 0;
}
