/*
 * lik — exact MaxSim (ColBERT late interaction) retrieval from embedding files.
 *
 *   lik                                  run on the bundled Cranfield data
 *   lik [OPTIONS] QUERIES DOCS           retrieve top-k DOCS for every query
 *
 *   lik index ... / lik search ...       the PLAID index (index_cmd.c)
 *
 * This file parses the command line and dispatches: the exact job's options
 * into an exact_job run by exact.c (blocks of documents scored with
 * lik_retrieve on the CPU or a CUDA device (--device, device.c), the
 * per-block top-k lists merged, results, throughput and, given qrels,
 * nDCG@10 and recall@100), the subcommands to index_cmd.c.
 * What they share (option parsers, the clock, the progress bar, the bundled
 * data) is cli.c.  See `lik --help`.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "device.h"
#include "exact.h"
#include "index_cmd.h"
#include "lik_experimental.h"
#include "precision.h"

static void usage(FILE *f) {
  fprintf(f,
"Usage: %s [OPTIONS] [QUERIES DOCS]\n"
"       %s index [OPTIONS] [DOCS] OUT_DIR     build a PLAID index (%s index --help)\n"
"       %s search [OPTIONS] INDEX [QUERIES]   search it (%s search --help; --where COND\n"
"                                              --param V: only documents whose metadata match)\n"
"Exact MaxSim (ColBERT late-interaction) retrieval over token-embedding files.\n"
"With no QUERIES/DOCS it runs on the bundled Cranfield-1400 embeddings and qrels.\n"
"\n"
"Inputs (.safetensors or .npy; F16, BF16, F32, F64):\n"
"  safetensors: \"embeddings\" [T, d] + \"cu_seqlens\" [N+1], or padded \"embeddings\"\n"
"               [N, L, d] + optional \"lengths\" [N] or \"mask\" [N, L]; optional \"ids\" [N]\n"
"  .npy:        padded [N, L, d] (+ --*-lengths), or ragged [T, d] + --*-cu-seqlens\n"
"  -q, --queries FILE          query embeddings (or first positional argument)\n"
"  -d, --docs FILE             document embeddings (or second positional argument)\n"
"      --query-lengths FILE    .npy [N] valid tokens per padded query\n"
"      --doc-lengths FILE      .npy [N] valid tokens per padded document\n"
"      --query-cu-seqlens FILE .npy [N+1] offsets of ragged 2-D queries\n"
"      --doc-cu-seqlens FILE   .npy [N+1] offsets of ragged 2-D documents\n"
"      --query-ids FILE        .npy [N] integer query ids (default: tensor \"ids\", else 0..N-1)\n"
"      --doc-ids FILE          .npy [N] integer document ids\n"
"\n"
"Scoring and output:\n"
"  -k, --top-k N               results per query (default 10; 100 are computed\n"
"                              when qrels are given, for recall@100)\n"
"  -t, --threads N             CPU threads (default: $LIK_NUM_THREADS or all cores)\n"
"      --device D              where to score: cpu, cuda (cuda:N: device N) or auto, the\n"
"                              first CUDA device when this build has the CUDA backend and\n"
"                              a device is present, else the CPU (default: $LIK_DEVICE,\n"
"                              else auto).  On CUDA the queries are copied to the device\n"
"                              once, each document block (and --rerank / --rescore's\n"
"                              candidates) when scored, the top-k back; the quantised\n"
"                              corpus of --precision int8 / binary once; the reported\n"
"                              seconds and rates include these copies.  cuda without the\n"
"                              backend or a device is an error (exit 1)\n"
"      --normalize             L2-normalise every token before scoring\n"
"      --precision P           score the corpus as fp16, int8 (symmetric per token) or\n"
"                              binary (sign bits, int8 queries), quantised once on load\n"
"                              (default: as stored); with --rerank, the candidates are\n"
"                              scored at this precision\n"
"      --rescore C             with --precision int8 / binary: rescore the low-bit top\n"
"                              k*C of each query exactly (as stored) and keep the top k\n"
"                              (binary with --rerank needs it: sign bits pre-filter)\n"
"  -r, --qrels FILE            judgments 'query doc gain' (or TREC 'query iter doc gain');\n"
"                              prints mean nDCG@10 and recall@100\n"
"  -n, --limit-queries N       score only the first N queries\n"
"  -p, --print N               print the results of the first N queries (default 3, -1 all)\n"
"      --rerank FILE           rerank candidates instead of searching all DOCS: lines\n"
"                              'query_id doc_id' or a TREC run 'qid Q0 doc rank score tag'\n"
"      --json                  write a JSON report (all results) on stdout instead of text\n"
"      --block-tokens N        padded document tokens per scoring block (default 262144)\n"
"  -h, --help                  this help;   -V, --version   versions\n"
"\n"
"Default data: <bin>/../share/lik/cranfield, then %s\n",
          prog, prog, prog, prog, prog,
          default_data_dir()[0] ? default_data_dir() : "(none compiled in)");
}

enum {
  OPT_QLEN = 256, OPT_DLEN, OPT_QCU, OPT_DCU, OPT_QIDS, OPT_DIDS, OPT_NORM, OPT_JSON, OPT_BLOCK,
  OPT_PRECISION, OPT_RERANK, OPT_RESCORE, OPT_DEVICE
};

int main(int argc, char **argv) {
  if (argc > 0 && argv[0] && argv[0][0]) {
    const char *b = strrchr(argv[0], '/');
    prog = b ? b + 1 : argv[0];
  }
  if (argc > 1 && !strcmp(argv[1], "index")) return cmd_index(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "search")) return cmd_search(argc - 1, argv + 1);
  emb_sources qs = {0}, ds = {0};
  const char *qrels_path = NULL, *rerank_path = NULL;
  long long top_k = 10, threads = 0, limit = -1, nprint = 3, block_tokens = 262144, rescore = 0;
  int normalize = 0, json = 0, prec = PRECISION_AS_LOADED, dev_id = 0, device_given = 0;
  device_kind dev_kind = DEVICE_AUTO;

  static const struct option longopts[] = {
      {"queries", required_argument, 0, 'q'},
      {"docs", required_argument, 0, 'd'},
      {"query-lengths", required_argument, 0, OPT_QLEN},
      {"doc-lengths", required_argument, 0, OPT_DLEN},
      {"query-cu-seqlens", required_argument, 0, OPT_QCU},
      {"doc-cu-seqlens", required_argument, 0, OPT_DCU},
      {"query-ids", required_argument, 0, OPT_QIDS},
      {"doc-ids", required_argument, 0, OPT_DIDS},
      {"top-k", required_argument, 0, 'k'},
      {"threads", required_argument, 0, 't'},
      {"normalize", no_argument, 0, OPT_NORM},
      {"qrels", required_argument, 0, 'r'},
      {"limit-queries", required_argument, 0, 'n'},
      {"print", required_argument, 0, 'p'},
      {"json", no_argument, 0, OPT_JSON},
      {"rerank", required_argument, 0, OPT_RERANK},
      {"block-tokens", required_argument, 0, OPT_BLOCK},
      {"precision", required_argument, 0, OPT_PRECISION},
      {"rescore", required_argument, 0, OPT_RESCORE},
      {"device", required_argument, 0, OPT_DEVICE},
      {"help", no_argument, 0, 'h'},
      {"version", no_argument, 0, 'V'},
      {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "q:d:k:t:r:n:p:hV", longopts, NULL)) != -1) {
    switch (c) {
    case 'q': qs.path = optarg; break;
    case 'd': ds.path = optarg; break;
    case OPT_QLEN: qs.lengths = optarg; break;
    case OPT_DLEN: ds.lengths = optarg; break;
    case OPT_QCU: qs.cu_seqlens = optarg; break;
    case OPT_DCU: ds.cu_seqlens = optarg; break;
    case OPT_QIDS: qs.ids = optarg; break;
    case OPT_DIDS: ds.ids = optarg; break;
    case 'k': if (parse_int("--top-k", optarg, 1, LLONG_MAX, &top_k)) return 2; break;
    case 't': if (parse_int("--threads", optarg, 0, INT_MAX, &threads)) return 2; break;
    case OPT_NORM: normalize = 1; break;
    case 'r': qrels_path = optarg; break;
    case 'n': if (parse_int("--limit-queries", optarg, 0, LLONG_MAX, &limit)) return 2; break;
    case 'p': if (parse_int("--print", optarg, -1, LLONG_MAX, &nprint)) return 2; break;
    case OPT_JSON: json = 1; break;
    case OPT_RERANK: rerank_path = optarg; break;
    case OPT_PRECISION:
      if ((prec = precision_parse(optarg)) < 0) {
        fprintf(stderr, "%s: --precision: expected fp16, int8 or binary, got '%s'\n", prog, optarg);
        return 2;
      }
      break;
    case OPT_RESCORE:
      if (parse_int("--rescore", optarg, 1, INT_MAX, &rescore)) return 2;
      break;
    case OPT_BLOCK:
      if (parse_int("--block-tokens", optarg, 1, LLONG_MAX, &block_tokens)) return 2;
      break;
    case OPT_DEVICE:
      if (parse_device("--device", optarg, &dev_kind, &dev_id)) return 2;
      device_given = 1;
      break;
    case 'h': usage(stdout); return 0;
    case 'V': {
      char cuda[160];
      device_describe(cuda, sizeof cuda);
      printf("lik %s (library %s, CPU kernels: %s, CUDA: %s)\n", LIK_VERSION_STRING,
             lik_version_string(), lik_cpu_isa(), cuda);
      return 0;
    }
    default:
      fprintf(stderr, "Try '%s --help'.\n", prog);
      return 2;
    }
  }
  if (!device_given && device_default(&dev_kind, &dev_id)) return 2;
  const int lowbit_prec = prec == PRECISION_INT8 || prec == PRECISION_BINARY;
  if (rescore && !lowbit_prec) {
    fprintf(stderr, "%s: --rescore rescores low-bit candidates exactly: it needs --precision "
            "int8 or binary (%s scores are already final)\nTry '%s --help'.\n", prog,
            prec == PRECISION_FP16 ? "fp16" : "as-stored", prog);
    return 2;
  }
  if (prec == PRECISION_BINARY && rerank_path && !rescore) {
    fprintf(stderr, "%s: --precision binary --rerank: sign bits are a pre-filter, not a "
            "reranker; add --rescore C (binary top k*C, then exact) or use --precision int8\n"
            "Try '%s --help'.\n", prog, prog);
    return 2;
  }
  int npos = argc - optind;
  if (npos > 2 || (npos >= 1 && qs.path) || (npos == 2 && ds.path)) {
    fprintf(stderr, "%s: expected at most QUERIES and DOCS as arguments\nTry '%s --help'.\n",
            prog, prog);
    return 2;
  }
  if (npos >= 1) qs.path = argv[optind];
  if (npos == 2) ds.path = argv[optind + 1];

  char data_dir[PATH_MAX], qpath[PATH_MAX + 32], dpath[PATH_MAX + 32], rpath[PATH_MAX + 32];
  int using_default = 0;
  if (!qs.path && !ds.path) {
    if (find_default_data(data_dir, sizeof data_dir)) {
      fprintf(stderr, "%s: no QUERIES/DOCS given and the bundled data was not found "
              "(looked in <bin>/../share/lik/cranfield and '%s')\nTry '%s --help'.\n",
              prog, default_data_dir(), prog);
      return 2;
    }
    snprintf(qpath, sizeof qpath, "%s/queries.safetensors", data_dir);
    snprintf(dpath, sizeof dpath, "%s/docs.safetensors", data_dir);
    snprintf(rpath, sizeof rpath, "%s/qrels.tsv", data_dir);
    qs.path = qpath;
    ds.path = dpath;
    if (!qrels_path) qrels_path = rpath;
    using_default = 1;
  } else if (!qs.path || !ds.path) {
    fprintf(stderr, "%s: give both QUERIES and DOCS\nTry '%s --help'.\n", prog, prog);
    return 2;
  }

  const exact_job job = {.qs = qs, .ds = ds, .qrels_path = qrels_path, .rerank_path = rerank_path,
                         .top_k = top_k, .threads = threads, .limit = limit, .nprint = nprint,
                         .block_tokens = block_tokens, .rescore = rescore, .normalize = normalize,
                         .json = json, .precision = prec, .using_default = using_default,
                         .device = dev_kind, .device_id = dev_id};
  return exact_run(&job);
}
