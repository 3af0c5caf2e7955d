/* loom — command-line entry point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: loom <command> [options]\n"
          "\n"
          "commands:\n"
          "  info     GPUs, NVLink peer matrix, NCCL version, and the measured\n"
          "           load/store put bandwidth between every pair of GPUs\n"
          "  help     this text\n"
          "\n"
          "options:\n"
          "  --gpus N      use the first N visible GPUs (default: all)\n"
          "  --bytes SIZE  bytes per put measurement, e.g. 256M (default 256M)\n"
          "  --iters N     timed iterations (default 20)\n"
          "  --warmup N    untimed iterations first (default 3)\n");
}

int main(int argc, char **argv) {
  /* loom never uses NVLink multicast (it can take shared GPUs down). */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  cli_options o;
  char err[256];
  if (cli_parse(argc, argv, &o, err, sizeof err) != 0) {
    fprintf(stderr, "loom: %s\n", err);
    usage(stderr);
    return 2;
  }
  if (strcmp(o.command, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(o.command, "info") == 0) return cli_info(&o);
  fprintf(stderr, "loom: unknown command '%s'\n", o.command);
  usage(stderr);
  return 2;
}
