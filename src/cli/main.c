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
          "  moe      the MoE layer forward on the GPUs, fused and the NCCL + cuBLAS\n"
          "           baseline: verify a sample of tokens of each against the CPU\n"
          "           reference, then time both side by side\n"
          "  ag-gemm  all-gather + GEMM (column-parallel linear): every GPU's --tokens\n"
          "           rows x --hidden gathered and multiplied by its --ffn / GPUs weight\n"
          "           columns, fused and NCCL all-gather + cuBLAS, verified, then timed\n"
          "           (moe's options; --act none (default), relu, gelu or silu)\n"
          "  gemm-rs  GEMM + reduce-scatter (row-parallel linear): every GPU's --tokens\n"
          "           rows x (--ffn / GPUs) times its --hidden x (--ffn / GPUs) weights,\n"
          "           summed over the GPUs, each getting --tokens / GPUs rows; the same\n"
          "           way beside cuBLAS + NCCL reduce-scatter\n"
          "  gemm-ar  GEMM + all-reduce: as gemm-rs, but every GPU gets all --tokens\n"
          "           rows of the sum (any --tokens); beside cuBLAS + NCCL all-reduce\n"
          "  help     this text\n"
          "\n"
          "options:\n"
          "  --gpus N      use the first N visible GPUs (default: all)\n"
          "  --iters N     timed iterations (default 20)\n"
          "  --warmup N    untimed iterations first (default 3)\n"
          "\n"
          "info options:\n"
          "  --bytes SIZE  bytes per put measurement, e.g. 256M (default 256M)\n"
          "\n"
          "moe options (defaults: FlashDMoE's setup):\n"
          "  --tokens T[,T2,...]  tokens per GPU, one run each, e.g. 4K,8K (default 8192)\n"
          "  --hidden H           model dimension, multiple of 64 (default 2048)\n"
          "  --ffn F              expert FFN dimension, multiple of 64 (default 2048)\n"
          "  --experts E          experts over all GPUs, divisible by the GPU count\n"
          "                       (default 32)\n"
          "  --topk K             experts per token, 1..16 (default 2)\n"
          "  --dtype D            fp32 (on TF32), bf16 or fp16 (default bf16)\n"
          "  --act A              relu, gelu, silu or swiglu (default silu); ag-gemm,\n"
          "                       gemm-rs and gemm-ar: none (default), relu, gelu or silu\n"
          "  --bias 0|1           ag-gemm, gemm-rs and gemm-ar: add a bias before the\n"
          "                       activation (default 0; the baseline adds it in its\n"
          "                       activation pass)\n"
          "  --weights L          weight layout: out-in ([out x in] row-major, PyTorch's\n"
          "                       nn.Linear.weight) or in-out (default out-in)\n"
          "  --gate G             moe: the fused gate's sums, exact (fp64, default) or\n"
          "                       fast (bf16 / fp16 only: fp32 sums on the 16-bit tensor\n"
          "                       cores, within the bound loom.h states; verified so)\n"
          "  --check-tokens N     tokens per GPU verified before timing (default 64)\n"
          "  --json FILE          also write the results to FILE as JSON\n"
          "  --trace FILE         after timing, run one more fused forward with the\n"
          "                       in-kernel trace on and write it to FILE as a Perfetto /\n"
          "                       chrome://tracing timeline (a track per SM, a slice per\n"
          "                       task and per wait); prints SM busy %% (several --tokens:\n"
          "                       FILE gets .T<tokens> before its extension)\n"
          "  --impl I             fused, baseline (NCCL + cuBLAS) or both (default both)\n"
          "  --launch L           fused forwards while timing: threads (a thread per\n"
          "                       GPU, as one process per GPU and as the baseline always;\n"
          "                       default) or serial (one host thread launches every GPU's)\n"
          "  --flush-l2 0|1       overwrite the L2 cache before each timed iteration\n"
          "                       (default 0)\n"
          "  --rotate N           input buffers cycled through while timing (default 4)\n"
          "  --peak-tflops X      GEMM ceiling per GPU for %% of bound (default: measured\n"
          "                       with cuBLAS at 8192^3 in --dtype)\n"
          "  --nvlink-gbps X      NVLink egress ceiling per GPU (default: measured, every\n"
          "                       GPU sending to every other at once: the faster of the\n"
          "                       copy engines and ncclAlltoAll)\n"
          "  --hbm-gbps X         HBM ceiling per GPU (default: measured device copy)\n");
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
  if (strcmp(o.command, "moe") == 0) return cli_moe(&o);
  if (strcmp(o.command, "ag-gemm") == 0) return cli_ag_gemm(&o);
  if (strcmp(o.command, "gemm-rs") == 0) return cli_gemm_rs(&o);
  if (strcmp(o.command, "gemm-ar") == 0) return cli_gemm_ar(&o);
  fprintf(stderr, "loom: unknown command '%s'\n", o.command);
  usage(stderr);
  return 2;
}
