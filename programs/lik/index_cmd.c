/*
 * index_cmd.c — `lik index` (embedding files -> a PLAID index folder, in
 * fast-plaid's format; built on the CPU) and `lik search` (index + query
 * file [+ qrels] -> results, throughput, nDCG@10 / recall@100 as the exact
 * job prints them; on the CPU, or on a CUDA device holding a copy of the
 * index: --device).
 */
#define _POSIX_C_SOURCE 200809L
#include "index_cmd.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checked.h" /* src/core: overflow-checked sizes */
#include "cli.h"
#include "device.h"
#include "emb_io.h"
#include "eval.h"
#include "lik_experimental.h"
#include "meta_where.h"
#include "report.h"

#define QUERY_BATCH 256
#define CUDA_MAX_PROBE 512 /* the CUDA search's most n_ivf_probe (lik_plaid_index_search) */

/* Bytes of the regular files in a folder. */
static long long folder_bytes(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  long long total = 0;
  struct dirent *e;
  char p[PATH_MAX + 256];
  while ((e = readdir(d))) {
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (!stat(p, &st) && S_ISREG(st.st_mode)) total += (long long)st.st_size;
  }
  closedir(d);
  return total;
}

/* ---- lik index ------------------------------------------------------------------------ */

static void index_usage(FILE *f) {
  fprintf(f,
"Usage: %s index [OPTIONS] [DOCS] OUT_DIR\n"
"       %s index --add [--expand-centroids] [OPTIONS] DOCS INDEX_DIR\n"
"       %s index --delete IDS INDEX_DIR\n"
"Builds a PLAID index (k-means centroids, residual codec, IVF) of the documents in DOCS\n"
"and writes it into OUT_DIR in fast-plaid's format (fast-plaid loads it, and `lik search`\n"
"loads fast-plaid's).  With no DOCS: the bundled Cranfield-1400 documents.  With --add:\n"
"codes DOCS with the codec of the index in INDEX_DIR (lik's or fast-plaid's) and appends\n"
"them there (their ids: --doc-ids / tensor \"ids\", else the next ids after the highest).\n"
"With --delete: deletes the documents IDS (\"3,17,42\" or a .npy of integers) from the\n"
"index in INDEX_DIR (tombstones: never returned by a search, other ids unchanged).\n"
"Builds and adds on the CPU, or with --device cuda with k-means' assignment and the coding on\n"
"a GPU (the same files, byte for byte; `lik search --device cuda` searches on a GPU).\n"
"\n"
"  DOCS                        .safetensors or .npy document embeddings, as the exact job\n"
"      --doc-lengths FILE      .npy [N] valid tokens per padded document\n"
"      --doc-cu-seqlens FILE   .npy [N+1] offsets of ragged 2-D documents\n"
"      --doc-ids FILE          .npy [N] integer ids (else tensor \"ids\", else 0..N-1),\n"
"                              saved as OUT_DIR/doc_ids.npy\n"
"  -b, --nbits N               residual bits per dimension: 1, 2, 4 or 8 (default 2)\n"
"      --centroids K           number of centroids (default 2^floor(log2(16 sqrt(tokens))))\n"
"      --kmeans-iters N        k-means iterations (default 4)\n"
"      --sample-docs N         documents sampled for k-means (default min(N, 1+16 sqrt(120 N)))\n"
"      --seed N                sampling seed (default 42)\n"
"      --chunk-docs N          documents per chunk file (default 25000)\n"
"      --add                   add DOCS to the index in INDEX_DIR instead of building one\n"
"      --delete IDS            delete documents by id instead of building an index\n"
"      --expand-centroids      with --add: new centroids for tokens far from every centroid\n"
"                              (fast-plaid's update; docs/plaid_index.md), else K is kept\n"
"  -t, --threads N             CPU threads (default: $LIK_NUM_THREADS or all cores)\n"
"      --device D              where the build / add finds nearest centroids and codes: cpu\n"
"                              (default), cuda (cuda:N: device N) or auto (the first CUDA\n"
"                              device when this build has the CUDA backend and one is present);\n"
"                              cuda without the backend or a device: exit 1\n"
"      --json                  a JSON report on stdout\n"
"  -h, --help                  this help\n",
          prog, prog, prog);
}

typedef struct {
  double t0;
  int on;
} prog_state;

static void on_progress(void *user, int64_t done, int64_t total) {
  prog_state *p = (prog_state *)user;
  if (p->on && total > 0) progress((double)done / (double)total, 0);
}

enum { O_DLEN = 300, O_DCU, O_DIDS, O_K, O_ITERS, O_SAMPLE, O_SEED, O_CHUNK, O_JSON, O_QLEN, O_QCU,
       O_QIDS, O_PROBE, O_FULL, O_THR, O_VERIFY, O_ADD, O_EXPAND, O_DELETE, O_WHERE, O_PARAM,
       O_DEVICE };

/* The ids of an index after --add with given ids: the index's own (-1 for a
 * deleted document), then the added documents' ids, malloc'ed into *out.
 * Returns 0 on success. */
static int add_ids(const lik_plaid_index *ix, int64_t n_old, const emb_set *D, int64_t **out,
                   char *err) {
  int64_t n_all;
  int64_t *ids = lik_add_i64(n_old, D->n, &n_all) ? NULL : calloc_n(n_all, 1, sizeof(int64_t));
  if (!ids) {
    snprintf(err, ERR_LEN, "out of memory for %lld + %lld document ids", (long long)n_old,
             (long long)D->n);
    return 1;
  }
  lik_tensor old = {ids, LIK_I64, 1, {n_old}, {1}, LIK_CPU, 0};
  if (lik_plaid_index_get_ids(ix, &old) != LIK_OK) {
    snprintf(err, ERR_LEN, "%s", lik_last_error());
    free(ids);
    return 1;
  }
  for (int64_t i = 0; i < D->n; i++) ids[n_old + i] = D->ids[i];
  *out = ids;
  return 0;
}

/* IDS of --delete: a .npy file of integers, or a comma list ("3,17,42"),
 * malloc'ed into *out.  Returns 0, or 1 with a message in err. */
static int parse_id_list(const char *arg, int64_t **out, int64_t *n, char *err) {
  const size_t len = strlen(arg);
  if (len > 4 && !strcmp(arg + len - 4, ".npy")) {
    return npy_read_ints(arg, "ids", -1, out, n, err);
  }
  int64_t cnt = 1;
  for (const char *c = arg; *c; c++) cnt += *c == ',';
  int64_t *ids = calloc_n(cnt, 1, sizeof(int64_t));
  if (!ids) {
    snprintf(err, ERR_LEN, "out of memory for %lld ids", (long long)cnt);
    return 1;
  }
  const char *c = arg;
  for (int64_t i = 0; i < cnt; i++) {
    char *end;
    errno = 0;
    const long long v = strtoll(c, &end, 10);
    if (end == c || errno || (*end != ',' && *end)) {
      snprintf(err, ERR_LEN, "--delete: %s: entry %lld is not an integer (expected ids as "
               "\"3,17,42\" or a .npy file)", arg, (long long)i);
      free(ids);
      return 1;
    }
    ids[i] = v;
    c = end + 1;
  }
  *out = ids;
  *n = cnt;
  return 0;
}

/* `lik index --delete IDS INDEX_DIR`: tombstones, saved as one atomic change. */
static int delete_docs(const char *arg, const char *dir, int json) {
  char err[ERR_LEN];
  int64_t *ids = NULL, n = 0;
  if (parse_id_list(arg, &ids, &n, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    return 1;
  }
  lik_plaid_index *ix = NULL;
  lik_plaid_index_info info;
  const double t0 = now_s();
  lik_tensor T = {ids, LIK_I64, 1, {n}, {1}, LIK_CPU, 0};
  lik_status st = lik_plaid_index_load(dir, 0, &ix);
  const char *what = "loading the index";
  if (!st) {
    what = "deleting";
    st = lik_plaid_index_delete(ix, &T);
  }
  if (!st) {
    what = "writing the index";
    st = lik_plaid_index_save(ix, dir, NULL);
  }
  if (st) {
    fprintf(stderr, "%s: error: %s %s failed (%s): %s\n", prog, what, dir, lik_status_string(st),
            lik_last_error());
    lik_plaid_index_free(ix);
    free(ids);
    return 1;
  }
  lik_plaid_index_get_info(ix, &info);
  const double t = now_s() - t0;
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "index", dir);
    cJSON_AddNumberToObject(j, "deleted", (double)n);
    cJSON_AddNumberToObject(j, "num_docs", (double)(info.num_docs - info.num_deleted));
    cJSON_AddNumberToObject(j, "num_deleted", (double)info.num_deleted);
    cJSON_AddNumberToObject(j, "seconds", t);
    report_print(j, prog);
  } else {
    printf("%s: deleted %lld documents; %lld live, %lld deleted in all (%.3f s)\n", dir, (long long)n,
           (long long)(info.num_docs - info.num_deleted), (long long)info.num_deleted, t);
  }
  lik_plaid_index_free(ix);
  free(ids);
  return 0;
}

int cmd_index(int argc, char **argv) {
  emb_sources ds = {0};
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  long long v, threads = 0;
  int json = 0, add = 0, build_opt = 0; /* build_opt: an option of a build given */
  static const struct option longopts[] = {
      {"doc-lengths", required_argument, 0, O_DLEN}, {"doc-cu-seqlens", required_argument, 0, O_DCU},
      {"doc-ids", required_argument, 0, O_DIDS},     {"nbits", required_argument, 0, 'b'},
      {"centroids", required_argument, 0, O_K},      {"kmeans-iters", required_argument, 0, O_ITERS},
      {"sample-docs", required_argument, 0, O_SAMPLE}, {"seed", required_argument, 0, O_SEED},
      {"chunk-docs", required_argument, 0, O_CHUNK}, {"threads", required_argument, 0, 't'},
      {"json", no_argument, 0, O_JSON},              {"help", no_argument, 0, 'h'},
      {"add", no_argument, 0, O_ADD},                {"expand-centroids", no_argument, 0, O_EXPAND},
      {"delete", required_argument, 0, O_DELETE},    {"device", required_argument, 0, O_DEVICE},
      {0, 0, 0, 0}};
  int c, dev_id = 0, device_given = 0;
  device_kind dev_kind = DEVICE_CPU;
  const char *del = NULL;
  optind = 1;
  while ((c = getopt_long(argc, argv, "b:t:h", longopts, NULL)) != -1) {
    build_opt |= c == 'b' || c == O_K || c == O_SAMPLE || c == O_CHUNK;
    switch (c) {
    case O_DLEN: ds.lengths = optarg; break;
    case O_DCU: ds.cu_seqlens = optarg; break;
    case O_DIDS: ds.ids = optarg; break;
    case 'b': if (parse_int_min("--nbits", optarg, 1, &v)) return 2; o.nbits = (int)(v > 64 ? 64 : v); break;
    case O_K: if (parse_int_min("--centroids", optarg, 1, &v)) return 2; o.num_centroids = v; break;
    case O_ITERS: if (parse_int_min("--kmeans-iters", optarg, 1, &v)) return 2; o.kmeans_niters = (int)(v > 1000 ? 1000 : v); break;
    case O_SAMPLE: if (parse_int_min("--sample-docs", optarg, 1, &v)) return 2; o.sample_docs = v; break;
    case O_SEED: if (parse_int_min("--seed", optarg, 0, &v)) return 2; o.seed = (uint64_t)v; break;
    case O_CHUNK: if (parse_int_min("--chunk-docs", optarg, 1, &v)) return 2; o.chunk_docs = v; break;
    case 't': if (parse_int_min("--threads", optarg, 0, &threads)) return 2; break;
    case O_JSON: json = 1; break;
    case O_ADD: add = 1; break;
    case O_EXPAND: o.expand_centroids = 1; break;
    case O_DELETE: del = optarg; break;
    case O_DEVICE:
      if (parse_device("--device", optarg, &dev_kind, &dev_id)) return 2;
      device_given = 1;
      break;
    case 'h': index_usage(stdout); return 0;
    default: fprintf(stderr, "Try '%s index --help'.\n", prog); return 2;
    }
  }
  o.num_threads = (int)(threads > 4096 ? 4096 : threads);
  const int npos = argc - optind;
  if (del) {
    if (npos != 1 || add || build_opt || o.expand_centroids || ds.lengths || ds.cu_seqlens || ds.ids ||
        device_given) {
      fprintf(stderr, "%s index: expected --delete IDS INDEX_DIR (no other option but --json)\n"
              "Try '%s index --help'.\n", prog, prog);
      return 2;
    }
    return delete_docs(del, argv[optind], json);
  }
  if (npos < 1 || npos > 2 || (add && npos != 2)) {
    fprintf(stderr, "%s index: expected %s\nTry '%s index --help'.\n", prog,
            add ? "--add DOCS INDEX_DIR" : "[DOCS] OUT_DIR", prog);
    return 2;
  }
  if (!add && o.expand_centroids) {
    fprintf(stderr, "%s index: --expand-centroids applies to --add only\nTry '%s index --help'.\n", prog,
            prog);
    return 2;
  }
  if (add && build_opt) { /* the index's own nbits, K and chunking stay */
    fprintf(stderr, "%s index --add: --nbits, --centroids, --sample-docs and --chunk-docs set up a new "
            "index; the index in INDEX_DIR keeps its own\nTry '%s index --help'.\n", prog, prog);
    return 2;
  }
  const char *out_dir = argv[argc - 1];
  struct stat out_st;
  if (!stat(out_dir, &out_st) && !S_ISDIR(out_st.st_mode)) { /* e.g. `lik index docs.npy`: OUT_DIR forgotten */
    fprintf(stderr, "%s index: OUT_DIR %s exists and is not a folder (expected [DOCS] OUT_DIR)\n"
                    "Try '%s index --help'.\n", prog, out_dir, prog);
    return 2;
  }
  char data_dir[PATH_MAX], dpath[PATH_MAX + 32];
  if (npos == 2) {
    ds.path = argv[optind];
  } else {
    if (find_default_data(data_dir, sizeof data_dir)) {
      fprintf(stderr, "%s index: no DOCS given and the bundled data was not found\n", prog);
      return 2;
    }
    snprintf(dpath, sizeof dpath, "%s/docs.safetensors", data_dir);
    ds.path = dpath;
  }
  char err[ERR_LEN];
  device g; /* where the nearest-centroid search and the coding run */
  if (device_open(&g, dev_kind, dev_id, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    device_close(&g);
    return 1;
  }
  if (g.cuda) {
    o.device = LIK_CUDA;
    o.device_id = g.id;
    o.stream = g.stream;
  }
  emb_set D;
  if (emb_load(&D, "documents", &ds, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    emb_free(&D);
    device_close(&g);
    return 1;
  }
  int rc = 1;
  void *packed = NULL, *buf = NULL;
  uint8_t *mbuf = NULL;
  size_t cap = 0, mcap = 0;
  int64_t *cu = D.cu, *cu_owned = NULL;
  const void *tokens = D.data;
  lik_plaid_index *ix = NULL;
  int64_t *ids = NULL, n_old = 0, k_old = 0;
  if (!D.ragged) { /* padded input: the valid tokens, packed */
    const size_t es = dtype_size(D.dtype);
    packed = calloc_n(D.tokens, D.d, es);
    cu_owned = calloc_n(D.n + 1, 1, sizeof(int64_t)); /* D.n <= the file's bytes */
    if (!packed || !cu_owned) {
      fprintf(stderr, "%s: error: out of memory for %lld tokens x d=%lld (%s)\n", prog,
              (long long)D.tokens, (long long)D.d, dtype_name(D.dtype));
      goto out;
    }
    cu_owned[0] = 0;
    int64_t t = 0;
    for (int64_t i = 0; i < D.n; i++) {
      lik_tensor x, m;
      if (emb_block(&D, i, i + 1, D.dtype, &x, &m, &buf, &cap, &mbuf, &mcap, err)) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        goto out;
      }
      for (int64_t l = 0; l < x.shape[1]; l++) {
        if (m.data && !((const uint8_t *)m.data)[l * m.strides[1]]) continue;
        const char *src = (const char *)x.data + (size_t)(l * x.strides[1]) * es;
        for (int64_t k = 0; k < D.d; k++)
          memcpy((char *)packed + ((size_t)(t * D.d + k)) * es, src + (size_t)(k * x.strides[2]) * es, es);
        t++;
      }
      cu_owned[i + 1] = t;
    }
    cu = cu_owned;
    tokens = packed;
  }
  lik_tensor X = {(void *)tokens, D.dtype, 2, {D.tokens, D.d}, {D.d, 1}, LIK_CPU, 0};
  lik_tensor CU = {cu, LIK_I64, 1, {D.n + 1}, {1}, LIK_CPU, 0};
  prog_state ps = {now_s(), isatty(2) && !json};
  o.progress = on_progress;
  o.progress_user = &ps;
  const double t0 = now_s();
  lik_plaid_index_info info;
  lik_status st;
  if (add) {
    if ((st = lik_plaid_index_load(out_dir, 0, &ix)) != LIK_OK) {
      fprintf(stderr, "%s: error: loading the index %s failed (%s): %s\n", prog, out_dir,
              lik_status_string(st), lik_last_error());
      goto out;
    }
    lik_plaid_index_get_info(ix, &info);
    n_old = info.num_docs;
    k_old = info.num_centroids;
    if (D.ids_given && add_ids(ix, n_old, &D, &ids, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    st = lik_plaid_index_add(ix, &X, &CU, &o);
  } else {
    st = lik_plaid_index_build(&X, &CU, &o, &ix);
  }
  if (ps.on) progress(1.0, 1);
  if (st != LIK_OK) {
    fprintf(stderr, "%s: error: %s the index failed (%s): %s\n", prog, add ? "adding to" : "building",
            lik_status_string(st), lik_last_error());
    goto out;
  }
  const double t_build = now_s() - t0;
  /* ids: given (the input's, after the index's own with --add), else the index's */
  lik_tensor IDS = {add ? ids : D.ids, LIK_I64, 1, {n_old + D.n}, {1}, LIK_CPU, 0};
  st = lik_plaid_index_save(ix, out_dir, D.ids_given ? &IDS : NULL);
  if (st != LIK_OK) {
    fprintf(stderr, "%s: error: writing %s failed (%s): %s\n", prog, out_dir, lik_status_string(st),
            lik_last_error());
    goto out;
  }
  const double t_all = now_s() - t0;
  lik_plaid_index_get_info(ix, &info);
  const long long bytes = folder_bytes(out_dir);
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "docs_file", D.path);
    cJSON_AddStringToObject(j, "index", out_dir);
    cJSON_AddNumberToObject(j, "num_docs", (double)info.num_docs);
    cJSON_AddNumberToObject(j, "num_tokens", (double)info.num_tokens);
    cJSON_AddNumberToObject(j, "dim", (double)info.dim);
    cJSON_AddNumberToObject(j, "nbits", info.nbits);
    cJSON_AddNumberToObject(j, "num_centroids", (double)info.num_centroids);
    cJSON_AddNumberToObject(j, "num_chunks", (double)info.num_chunks);
    cJSON_AddStringToObject(j, "device", g.name);
    if (add) {
      cJSON_AddNumberToObject(j, "added_docs", (double)D.n);
      cJSON_AddNumberToObject(j, "added_centroids", (double)(info.num_centroids - k_old));
    }
    cJSON_AddNumberToObject(j, add ? "add_seconds" : "build_seconds", t_build);
    cJSON_AddNumberToObject(j, "seconds", t_all);
    cJSON_AddNumberToObject(j, "index_bytes", (double)bytes);
    if (report_print(j, prog)) goto out;
  } else {
    printf("lik index%s: %s -> %s\n", add ? " --add" : "", D.path, out_dir);
    if (add)
      printf("  +%lld documents, +%lld centroids\n", (long long)D.n, (long long)(info.num_centroids - k_old));
    printf("  %lld documents, %lld tokens, d=%lld, %s\n", (long long)info.num_docs,
           (long long)info.num_tokens, (long long)info.dim, dtype_name(D.dtype));
    printf("  K=%lld centroids, nbits=%d, %lld chunk(s), %.1f MB on disk\n", (long long)info.num_centroids,
           info.nbits, (long long)info.num_chunks, (double)bytes / 1e6);
    printf("  %s on %s in %.2f s (%.0f tokens/s), written in %.2f s\n", add ? "added" : "built", g.name,
           t_build, (double)(add ? D.tokens : info.num_tokens) / (t_build > 0 ? t_build : 1e-9),
           t_all - t_build);
  }
  rc = 0;
out:
  lik_plaid_index_free(ix);
  free(ids);
  free(packed);
  free(cu_owned);
  free(buf);
  free(mbuf);
  emb_free(&D);
  device_close(&g);
  return rc;
}

/* ---- lik search ------------------------------------------------------------------------- */

static void search_usage(FILE *f) {
  fprintf(f,
"Usage: %s search [OPTIONS] INDEX [QUERIES]\n"
"Searches a PLAID index folder (written by `lik index` or fast-plaid) with PLAID's stages:\n"
"centroid scores, IVF probing, approximate scores, exact residual MaxSim on the best.\n"
"With no QUERIES: the bundled Cranfield-1400 queries and qrels.\n"
"\n"
"  QUERIES                     .safetensors or .npy query embeddings, as the exact job\n"
"      --query-lengths FILE    .npy [N] valid tokens per padded query\n"
"      --query-cu-seqlens FILE .npy [N+1] offsets of ragged 2-D queries\n"
"      --query-ids FILE        .npy [N] integer query ids\n"
"  -k, --top-k N               results per query (default 10; 100 are computed with qrels)\n"
"      --n-ivf-probe N         cells probed per query token (default 8)\n"
"      --n-full-scores N       candidates kept by the approximate score (default 4096;\n"
"                              a quarter, at least top-k, are scored exactly)\n"
"      --threshold X           centroid-score pruning threshold (ColBERTv2; default off)\n"
"      --where COND            search only the documents whose metadata satisfies COND, one\n"
"                              SQL expression over the index's metadata.sqlite (columns: the\n"
"                              metadata keys, _id the document id), e.g. \"year > ? AND lang = ?\"\n"
"                              (Python's search(filter=(COND, params)); ';' refused, read-only)\n"
"      --param VALUE           the value of the next ? of COND, bound, never put into the SQL\n"
"                              (repeat, one per ?): an integer (fits int64) binds as INTEGER, a\n"
"                              decimal number (1.5, 2e3) as REAL, anything else as TEXT\n"
"  -r, --qrels FILE            judgments; prints mean nDCG@10 and recall@100\n"
"  -n, --limit-queries N       search only the first N queries\n"
"  -p, --print N               print the results of the first N queries (default 3, -1 all)\n"
"  -t, --threads N             CPU threads\n"
"      --device D              where to search: cpu, cuda (cuda:N: device N) or auto, the\n"
"                              first CUDA device when this build has the CUDA backend and a\n"
"                              device is present, else the CPU (default: $LIK_DEVICE, else\n"
"                              auto).  On CUDA the index is copied to the device after the\n"
"                              load (lik_plaid_index_to_device; its time reported apart),\n"
"                              every batch of queries there and its results back: the\n"
"                              search's seconds and queries/s include these copies.  The\n"
"                              CUDA search takes no --where and at most --n-ivf-probe 512:\n"
"                              with them auto searches on the CPU and cuda is a usage error\n"
"                              (exit 2); cuda without the backend or a device: exit 1\n"
"      --verify                read every code of the index at load\n"
"      --json                  a JSON report (all results) on stdout\n"
"  -h, --help                  this help\n"
"Document ids: the index's (INDEX/doc_ids.npy when present, else 0..N-1); deleted\n"
"documents are never returned.  --where filters before the candidate stages: a query\n"
"gets top-k results whenever that many documents match.\n",
          prog);
}

/* params: room for argc entries (--param values, pointers into argv). */
static int search_main(int argc, char **argv, const char **params) {
  emb_sources qs = {0};
  const char *qrels_path = NULL;
  long long top_k = 10, nprobe = 8, nfull = 4096, threads = 0, limit = -1, nprint = 3;
  float thr = 0;
  int prune = 0, json = 0, verify = 0, nparams = 0, dev_id = 0, device_given = 0;
  device_kind dev_kind = DEVICE_AUTO;
  const char *where = NULL;
  static const struct option longopts[] = {
      {"query-lengths", required_argument, 0, O_QLEN}, {"query-cu-seqlens", required_argument, 0, O_QCU},
      {"query-ids", required_argument, 0, O_QIDS},     {"top-k", required_argument, 0, 'k'},
      {"n-ivf-probe", required_argument, 0, O_PROBE},  {"n-full-scores", required_argument, 0, O_FULL},
      {"threshold", required_argument, 0, O_THR},      {"qrels", required_argument, 0, 'r'},
      {"limit-queries", required_argument, 0, 'n'},    {"print", required_argument, 0, 'p'},
      {"threads", required_argument, 0, 't'},          {"verify", no_argument, 0, O_VERIFY},
      {"json", no_argument, 0, O_JSON},                {"help", no_argument, 0, 'h'},
      {"where", required_argument, 0, O_WHERE},        {"param", required_argument, 0, O_PARAM},
      {"device", required_argument, 0, O_DEVICE},      {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "k:r:n:p:t:h", longopts, NULL)) != -1) {
    switch (c) {
    case O_QLEN: qs.lengths = optarg; break;
    case O_QCU: qs.cu_seqlens = optarg; break;
    case O_QIDS: qs.ids = optarg; break;
    case 'k': if (parse_int_min("--top-k", optarg, 1, &top_k)) return 2; break;
    case O_PROBE: if (parse_int_min("--n-ivf-probe", optarg, 1, &nprobe)) return 2; break;
    case O_FULL: if (parse_int_min("--n-full-scores", optarg, 1, &nfull)) return 2; break;
    case O_THR: if (parse_float("--threshold", optarg, &thr)) return 2; prune = 1; break;
    case 'r': qrels_path = optarg; break;
    case 'n': if (parse_int_min("--limit-queries", optarg, 0, &limit)) return 2; break;
    case 'p': if (parse_int_min("--print", optarg, -1, &nprint)) return 2; break;
    case 't': if (parse_int_min("--threads", optarg, 0, &threads)) return 2; break;
    case O_VERIFY: verify = 1; break;
    case O_JSON: json = 1; break;
    case O_WHERE: where = optarg; break;
    case O_PARAM: params[nparams++] = optarg; break;
    case O_DEVICE:
      if (parse_device("--device", optarg, &dev_kind, &dev_id)) return 2;
      device_given = 1;
      break;
    case 'h': search_usage(stdout); return 0;
    default: fprintf(stderr, "Try '%s search --help'.\n", prog); return 2;
    }
  }
  const int npos = argc - optind;
  if (npos < 1 || npos > 2) {
    fprintf(stderr, "%s search: expected INDEX [QUERIES]\nTry '%s search --help'.\n", prog, prog);
    return 2;
  }
  if (nparams && !where) {
    fprintf(stderr, "%s search: --param gives the values of --where's ?s: no --where given\n"
            "Try '%s search --help'.\n", prog, prog);
    return 2;
  }
  if (!device_given && device_default(&dev_kind, &dev_id)) return 2;
  /* what the CUDA search does not do (lik_plaid_index_search) runs on the CPU */
  char cpu_only[96] = "";
  if (where)
    snprintf(cpu_only, sizeof cpu_only, "the CUDA search takes no --where (no subset)");
  else if (nprobe > CUDA_MAX_PROBE)
    snprintf(cpu_only, sizeof cpu_only, "the CUDA search probes at most %d cells per query token "
             "(--n-ivf-probe %lld)", CUDA_MAX_PROBE, nprobe);
  if (cpu_only[0] && dev_kind == DEVICE_CUDA) {
    fprintf(stderr, "%s search: --device cuda: %s; use --device cpu or auto\n"
            "Try '%s search --help'.\n", prog, cpu_only, prog);
    return 2;
  }
  if (cpu_only[0]) dev_kind = DEVICE_CPU;
  const char *index_dir = argv[optind];
  char data_dir[PATH_MAX], qpath[PATH_MAX + 32], rpath[PATH_MAX + 32];
  int using_default = 0;
  if (npos == 2) {
    qs.path = argv[optind + 1];
  } else {
    if (find_default_data(data_dir, sizeof data_dir)) {
      fprintf(stderr, "%s search: no QUERIES given and the bundled data was not found\n", prog);
      return 2;
    }
    snprintf(qpath, sizeof qpath, "%s/queries.safetensors", data_dir);
    snprintf(rpath, sizeof rpath, "%s/qrels.tsv", data_dir);
    qs.path = qpath;
    if (!qrels_path) qrels_path = rpath;
    using_default = 1;
  }
  char err[ERR_LEN];
  device g;
  if (device_open(&g, dev_kind, dev_id, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    device_close(&g);
    return 1;
  }
  lik_plaid_index *ix = NULL;
  double t0 = now_s();
  lik_status st = lik_plaid_index_load(index_dir, verify ? LIK_PLAID_LOAD_VERIFY : 0, &ix);
  if (st != LIK_OK) {
    fprintf(stderr, "%s: error: %s\n", prog, lik_last_error());
    device_close(&g);
    return 1;
  }
  const double t_load = now_s() - t0;
  double t_copy = 0; /* the index to the device */
  if (g.cuda) {
    t0 = now_s();
    if ((st = lik_plaid_index_to_device(ix, g.id)) != LIK_OK) {
      fprintf(stderr, "%s: error: copying the index %s to %s failed (%s): %s\n", prog, index_dir,
              g.name, lik_status_string(st), lik_last_error());
      lik_plaid_index_free(ix);
      device_close(&g);
      return 1;
    }
    t_copy = now_s() - t0;
  }
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  /* --where: the matching live ids, the search's subset (filters before the candidate stages) */
  int64_t *sub_ids = NULL, n_sub = 0, no_ids = 0;
  double t_where = 0;
  if (where) {
    t0 = now_s();
    if (meta_where(ix, index_dir, where, params, nparams, &sub_ids, &n_sub, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      lik_plaid_index_free(ix);
      device_close(&g);
      return 1;
    }
    t_where = now_s() - t0;
  }
  lik_tensor subset = {sub_ids ? sub_ids : &no_ids, LIK_I64, 1, {n_sub}, {1}, LIK_CPU, 0};
  emb_set Q;
  qrels rel = {0};
  int rc = 1;
  float *qbuf = NULL, *S = NULL;
  int64_t *ql = NULL, *I = NULL, *ranked = NULL;
  void *buf = NULL;
  uint8_t *mbuf = NULL;
  size_t cap = 0, mcap = 0;
  dev_buf gq = {0}, gl = {0}, gs = {0}, gi = {0}; /* a batch's queries, lengths, results on g */
  if (emb_load(&Q, "queries", &qs, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    emb_free(&Q);
    lik_plaid_index_free(ix);
    free(sub_ids);
    device_close(&g);
    return 1;
  }
  if (Q.d != info.dim) {
    fprintf(stderr, "%s: error: dimension mismatch: queries (%s) have d=%lld, the index (%s) has d=%lld\n",
            prog, Q.path, (long long)Q.d, index_dir, (long long)info.dim);
    goto out;
  }
  if (qrels_path && qrels_load(&rel, qrels_path, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }
  int64_t nq = Q.n;
  if (limit >= 0 && limit < nq) nq = limit;
  int64_t K = top_k;
  if (qrels_path && K < RECALL_K) K = RECALL_K;
  const int64_t L = Q.max_len > 0 ? Q.max_len : 1, d = Q.d;
  /* queries: valid tokens first, F32 [nq, L, d], lengths ql */
  int64_t Ld;
  qbuf = lik_mul_i64(L, d, &Ld) ? NULL : calloc_n(nq, Ld, sizeof(float));
  ql = calloc_n(nq, 1, sizeof(int64_t));
  if (!qbuf || !ql) {
    fprintf(stderr, "%s: error: out of memory for %lld queries x %lld tokens x d=%lld\n", prog,
            (long long)nq, (long long)L, (long long)d);
    goto out;
  }
  S = calloc_n(nq, K, sizeof(float));
  I = calloc_n(nq, K, sizeof(int64_t));
  ranked = calloc_n(K, 1, sizeof(int64_t));
  if (!S || !I || !ranked) {
    fprintf(stderr, "%s: error: out of memory for the results of %lld queries x top %lld\n", prog,
            (long long)nq, (long long)K);
    goto out;
  }
  for (int64_t i = 0; i < nq; i++) {
    lik_tensor x, m;
    if (emb_block(&Q, i, i + 1, LIK_F32, &x, &m, &buf, &cap, &mbuf, &mcap, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    int64_t n = 0;
    for (int64_t l = 0; l < x.shape[1] && n < L; l++) {
      if (m.data && !((const uint8_t *)m.data)[l * m.strides[1]]) continue;
      const float *src = (const float *)x.data + l * x.strides[1];
      for (int64_t k = 0; k < d; k++) qbuf[(i * L + n) * d + k] = src[k * x.strides[2]];
      n++;
    }
    ql[i] = n;
  }
  lik_plaid_search_params p = {0};
  p.top_k = K;
  p.n_ivf_probe = nprobe;
  p.n_full_scores = nfull;
  p.prune = prune;
  p.centroid_score_threshold = thr;
  p.num_threads = (int)(threads > 4096 ? 4096 : threads);
  p.stream = g.stream;
  const int show = isatty(2) && !json;
  t0 = now_s(); /* the timed part includes the copies of queries and results */
  for (int64_t i0 = 0; i0 < nq; i0 += QUERY_BATCH) {
    const int64_t nb = nq - i0 < QUERY_BATCH ? nq - i0 : QUERY_BATCH;
    /* where g searches: the host arrays, or their copies on the device */
    void *aq, *al, *as, *ai;
    if (device_put(&g, qbuf + i0 * Ld, (size_t)(nb * Ld) * sizeof *qbuf, &gq, &aq, err) ||
        device_put(&g, ql + i0, (size_t)nb * sizeof *ql, &gl, &al, err) ||
        device_out(&g, S + i0 * K, (size_t)(nb * K) * sizeof *S, &gs, &as, err) ||
        device_out(&g, I + i0 * K, (size_t)(nb * K) * sizeof *I, &gi, &ai, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    const int64_t rk[2] = {nb, K}, rks[2] = {K, 1};
    lik_tensor Qt = device_view(&g, aq, LIK_F32, 3, (const int64_t[3]){nb, L, d},
                                (const int64_t[3]){Ld, d, 1});
    lik_tensor Lt = device_view(&g, al, LIK_I64, 1, (const int64_t[1]){nb}, (const int64_t[1]){1});
    lik_tensor St = device_view(&g, as, LIK_F32, 2, rk, rks);
    lik_tensor It = device_view(&g, ai, LIK_I64, 2, rk, rks);
    st = lik_plaid_index_search(ix, &Qt, &Lt, where ? &subset : NULL, NULL, &p, &St, &It);
    if (st != LIK_OK) {
      fprintf(stderr, "%s: error: search on %s failed (%s): %s\n", prog, g.name,
              lik_status_string(st), lik_last_error());
      goto out;
    }
    if (device_get(&g, S + i0 * K, as, (size_t)(nb * K) * sizeof *S, err) ||
        device_get(&g, I + i0 * K, ai, (size_t)(nb * K) * sizeof *I, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    if (show) progress((double)(i0 + nb) / (double)nq, 0);
  }
  const double secs = now_s() - t0, tdiv = secs > 0 ? secs : 1e-9;
  if (show) progress(1.0, 1);
  double ndcg_sum = 0, rec_sum = 0;
  int64_t nevals = 0;
  if (qrels_path)
    for (int64_t i = 0; i < nq; i++) {
      int64_t m = 0;
      for (int64_t r = 0; r < K && I[i * K + r] >= 0; r++) ranked[m++] = I[i * K + r];
      double nd, rc2;
      if (eval_query(&rel, Q.ids[i], ranked, m, NDCG_K, RECALL_K, &nd, &rc2)) {
        ndcg_sum += nd;
        rec_sum += rc2;
        nevals++;
      }
    }
  const int64_t kshow = top_k;
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", lik_version_string());
    cJSON_AddStringToObject(o, "device", g.name);
    if (g.cuda) {
      cJSON_AddStringToObject(o, "device_name", g.model);
      cJSON_AddNumberToObject(o, "device_bytes", (double)info.device_bytes);
    }
    cJSON_AddStringToObject(o, "index", index_dir);
    cJSON_AddStringToObject(o, "queries_file", Q.path);
    if (qrels_path) cJSON_AddStringToObject(o, "qrels_file", qrels_path);
    cJSON_AddBoolToObject(o, "default_data", using_default);
    cJSON_AddNumberToObject(o, "num_queries", (double)nq);
    cJSON_AddNumberToObject(o, "num_docs", (double)info.num_docs);
    cJSON_AddNumberToObject(o, "num_centroids", (double)info.num_centroids);
    cJSON_AddNumberToObject(o, "nbits", info.nbits);
    cJSON_AddNumberToObject(o, "top_k", (double)kshow);
    cJSON_AddNumberToObject(o, "n_ivf_probe", (double)nprobe);
    cJSON_AddNumberToObject(o, "n_full_scores", (double)nfull);
    if (prune) cJSON_AddNumberToObject(o, "centroid_score_threshold", thr);
    if (where) {
      cJSON_AddStringToObject(o, "where", where);
      cJSON *pa = cJSON_AddArrayToObject(o, "params");
      for (int i = 0; i < nparams; i++) cJSON_AddItemToArray(pa, cJSON_CreateString(params[i]));
      cJSON_AddNumberToObject(o, "where_docs", (double)n_sub);
      cJSON_AddNumberToObject(o, "where_seconds", t_where);
    }
    cJSON_AddNumberToObject(o, "load_seconds", t_load);
    if (g.cuda) cJSON_AddNumberToObject(o, "to_device_seconds", t_copy);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "queries_per_s", (double)nq / tdiv);
    if (qrels_path) report_add_quality(o, nevals, ndcg_sum, rec_sum);
    report_add_results(o, nq, Q.ids, I, S, K, NULL, kshow, NULL);
    if (report_print(o, prog)) goto out;
  } else {
    printf("lik %s, PLAID search on %s%s%s%s%s\n", lik_version_string(), g.name, g.cuda ? " (" : "",
           g.model, g.cuda ? ")" : "", using_default ? "  (bundled Cranfield-1400 queries)" : "");
    printf("index:   %s: %lld documents, %lld tokens, K=%lld, nbits=%d (loaded in %.3f s", index_dir,
           (long long)info.num_docs, (long long)info.num_tokens, (long long)info.num_centroids, info.nbits,
           t_load);
    if (g.cuda)
      printf(", copied to %s in %.3f s: %.1f MB", g.name, t_copy, (double)info.device_bytes / 1e6);
    printf(")\n");
    printf("queries: %s: %lld of %lld, %lld-%lld tokens, d=%lld\n", Q.path, (long long)nq, (long long)Q.n,
           (long long)Q.min_len, (long long)Q.max_len, (long long)Q.d);
    if (where)
      printf("filter:  --where \"%s\"%s: %lld live documents match (%.3f s)\n", where,
             nparams ? " with --param" : "", (long long)n_sub, t_where);
    const int64_t np = nprint < 0 ? nq : (nprint < nq ? nprint : nq);
    for (int64_t i = 0; i < np; i++) {
      int64_t m = 0;
      while (m < kshow && I[i * K + m] >= 0) m++;
      printf("\nquery %lld: top %lld\n", (long long)Q.ids[i], (long long)m);
      for (int64_t j = 0; j < m; j++)
        printf("  %3lld. doc %-10lld %10.4f\n", (long long)j + 1, (long long)I[i * K + j],
               S[i * K + j]);
    }
    if (np < nq) printf("\n(results of %lld more queries not shown; --print -1 shows all)\n", (long long)(nq - np));
    printf("\n%lld queries in %.3f s (top %lld, n_ivf_probe %lld, n_full_scores %lld%s): %.1f queries/s\n",
           (long long)nq, secs, (long long)K, nprobe, nfull, prune ? ", pruning" : "", (double)nq / tdiv);
    if (qrels_path) {
      if (nevals)
        printf("nDCG@10 %.4f  recall@100 %.4f  (mean over %lld queries with relevant documents, qrels %s)\n",
               ndcg_sum / (double)nevals, rec_sum / (double)nevals, (long long)nevals, qrels_path);
      else
        printf("nDCG@10 -  recall@100 -  (no query has a relevant document in %s)\n", qrels_path);
    }
  }
  rc = 0;
out:
  free(qbuf);
  free(ql);
  free(S);
  free(I);
  free(ranked);
  free(buf);
  free(mbuf);
  qrels_free(&rel);
  emb_free(&Q);
  lik_plaid_index_free(ix);
  free(sub_ids);
  dev_buf_free(&gq);
  dev_buf_free(&gl);
  dev_buf_free(&gs);
  dev_buf_free(&gi);
  device_close(&g);
  return rc;
}

int cmd_search(int argc, char **argv) {
  const char **params = calloc_n(argc > 0 ? argc : 1, 1, sizeof(char *)); /* at most one per argument */
  if (!params) {
    fprintf(stderr, "%s: error: out of memory\n", prog);
    return 1;
  }
  const int rc = search_main(argc, argv, params);
  free(params);
  return rc;
}
