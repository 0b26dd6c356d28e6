/*
 * exact.c — the exact job of the `lik` command (see exact.h): queries and
 * documents loaded, documents scored in blocks with lik_retrieve (or the
 * low-bit / reranking paths), the per-block top-k lists merged with
 * lik_topk_merge, then results, throughput and quality reported.  On a CUDA
 * device (device.h) the queries are copied there once, each block of
 * documents before it is scored, and each block's top-k back to the host,
 * where the merge runs: one code path, the views' device the only change.
 */
#define _POSIX_C_SOURCE 200809L
#include "exact.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candidates.h"
#include "checked.h" /* src/core: overflow-checked sizes */
#include "cli.h"
#include "eval.h"
#include "lik_experimental.h"
#include "precision.h"
#include "report.h"

static const int64_t *g_sort_ids;
static int cmp_by_id(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  int64_t ix = g_sort_ids[x], iy = g_sort_ids[y];
  if (ix != iy) return ix < iy ? -1 : 1;
  return x < y ? -1 : x > y;
}
static void sort_by_id(int64_t *perm, int64_t n, const int64_t *ids) {
  g_sort_ids = ids;
  qsort(perm, (size_t)n, sizeof *perm, cmp_by_id);
}
/* Index of the first document with this id, -1 if none. */
static int64_t find_id(const int64_t *perm, int64_t n, const int64_t *ids, int64_t id) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (ids[perm[mid]] < id) lo = mid + 1; else hi = mid;
  }
  return lo < n && ids[perm[lo]] == id ? perm[lo] : -1;
}
static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static void sort_i64(int64_t *v, int64_t n) { qsort(v, (size_t)n, sizeof *v, cmp_i64); }

/* Merges every query's block top kb (list 1 of cand_s / cand_i, ids relative
 * to j0) into its best `have` (list 0): the library's lik_topk_merge, so one
 * order (lik_retrieve's: score descending, NaN last, ties to the lower index,
 * i.e. the earlier block) ranks every candidate of the exact job.  The lists
 * are [2, nq, K1]; the merged min(K1, have + kb) replace list 0. */
static int merge_block(float *cand_s, int64_t *cand_i, int64_t nq, int64_t K1, int64_t have,
                       int64_t kb, int64_t j0, const lik_options *opts, float *mrg_s,
                       int64_t *mrg_i, char *err) {
  for (int64_t i = 0; i < nq; i++)
    for (int64_t r = 0; r < kb; r++) cand_i[(nq + i) * K1 + r] += j0;
  const int64_t m = have + kb < K1 ? have + kb : K1, lens[2] = {have, kb};
  const int64_t cs[3] = {2, nq, K1}, cst[3] = {nq * K1, K1, 1}, os[2] = {nq, m}, ost[2] = {K1, 1};
  lik_tensor S = cpu_view(cand_s, LIK_F32, 3, cs, cst), I = cpu_view(cand_i, LIK_I64, 3, cs, cst);
  lik_tensor L = cpu_view((void *)lens, LIK_I64, 2, (const int64_t[2]){2, nq}, (const int64_t[2]){1, 0});
  lik_tensor OS = cpu_view(mrg_s, LIK_F32, 2, os, ost), OI = cpu_view(mrg_i, LIK_I64, 2, os, ost);
  const lik_status st = lik_topk_merge(&S, &I, &L, m, opts, &OS, &OI);
  if (st) {
    snprintf(err, ERR_LEN, "lik_topk_merge failed (%s): %s", lik_status_string(st), lik_last_error());
    return 1;
  }
  memcpy(cand_s, mrg_s, (size_t)(nq * K1) * sizeof *cand_s);
  memcpy(cand_i, mrg_i, (size_t)(nq * K1) * sizeof *cand_i);
  return 0;
}

int exact_run(const exact_job *job) {
  emb_sources qs = job->qs, ds = job->ds;
  const char *qrels_path = job->qrels_path, *rerank_path = job->rerank_path;
  const long long top_k = job->top_k, threads = job->threads, limit = job->limit;
  const long long nprint = job->nprint, block_tokens = job->block_tokens, rescore = job->rescore;
  const int normalize = job->normalize, json = job->json, prec = job->precision;
  const int using_default = job->using_default;
  const int lowbit_prec = prec == PRECISION_INT8 || prec == PRECISION_BINARY;
  char err[ERR_LEN];
  emb_set Q, D;
  qrels rel = {0}, cand = {0};
  device g;
  if (device_open(&g, job->device, job->device_id, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    device_close(&g);
    return 1;
  }
  if (emb_load(&Q, "queries", &qs, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    emb_free(&Q);
    device_close(&g);
    return 1;
  }
  if (emb_load(&D, "documents", &ds, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    emb_free(&Q);
    emb_free(&D);
    device_close(&g);
    return 1;
  }
  int rc = 1;
  float *cand_s = NULL, *best_s = NULL, *blk_s = NULL, *mrg_s = NULL;
  int64_t *cand_i = NULL, *best_i = NULL, *blk_i = NULL, *mrg_i = NULL, *ranked = NULL;
  int64_t have = 0; /* entries of every query's list 0 during the block loop */
  void *qbuf = NULL, *dbuf = NULL;
  uint8_t *qmbuf = NULL, *dmbuf = NULL;
  size_t qcap = 0, dcap = 0, qmcap = 0, dmcap = 0;
  int64_t *cnt = NULL, *id_sorted = NULL, *cidx = NULL;
  lowbit lb = {0};
  cand_buf cb = {0};
  dev_buf gq = {0}, gqm = {0}, gd = {0}, gdm = {0}; /* the exact search's copies on g */

  if (Q.d != D.d) {
    fprintf(stderr, "%s: error: dimension mismatch: queries (%s) have d=%lld, documents (%s) "
            "have d=%lld\n", prog, Q.path, (long long)Q.d, D.path, (long long)D.d);
    goto out;
  }
  if (D.n == 0) {
    fprintf(stderr, "%s: error: %s: no documents\n", prog, D.path);
    goto out;
  }
  if (qrels_path && qrels_load(&rel, qrels_path, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }
  if (rerank_path && pairs_load(&cand, rerank_path, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }

  int64_t nq = Q.n;
  if (limit >= 0 && limit < nq) nq = limit;
  int64_t kshow = top_k < D.n ? top_k : D.n;
  int64_t K = top_k;
  if (qrels_path && K < RECALL_K) K = RECALL_K;
  if (K > D.n) K = D.n;
  lik_dtype want = Q.dtype == D.dtype ? Q.dtype : LIK_F32;
  if (Q.dtype != D.dtype && (Q.dtype == LIK_F64 || D.dtype == LIK_F64)) want = LIK_F64;
  if (prec == PRECISION_FP16) want = LIK_F16;
  /* K1: kept per query by the first scoring, the low-bit top k*C with --rescore */
  int64_t K1 = K;
  if (rescore) K1 = rescore > D.n / (K > 0 ? K : 1) ? D.n : K * rescore;

  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = normalize;
  opts.num_threads = (int)threads;
  opts.stream = g.stream;

  /* The block merge's candidates: list 0 the best so far (best_s / best_i),
   * list 1 the block's top kb (blk_s / blk_i), each [nq, K1] (K1 <= D.n and
   * nq are bounded by the files; every product is checked by calloc_n). */
  cand_s = calloc_n(nq, 2 * K1, sizeof *cand_s);
  cand_i = calloc_n(nq, 2 * K1, sizeof *cand_i);
  mrg_s = calloc_n(nq, K1, sizeof *mrg_s);
  mrg_i = calloc_n(nq, K1, sizeof *mrg_i);
  cnt = calloc_n(nq, 1, sizeof *cnt);
  ranked = calloc_n(K1, 1, sizeof *ranked);
  cidx = calloc_n((K1 > cand.n ? K1 : cand.n) + 1, 1, sizeof *cidx);
  if (!cand_s || !cand_i || !mrg_s || !mrg_i || !cnt || !ranked || !cidx) {
    fprintf(stderr, "%s: error: out of memory for %lld x %lld results\n", prog, (long long)nq,
            (long long)K1);
    goto out;
  }
  best_s = cand_s;
  best_i = cand_i;
  blk_s = cand_s + nq * K1;
  blk_i = cand_i + nq * K1;

  lik_tensor qx, qm, dx, dm, gqx, gqmx, gdx, gdmx; /* g...: the views where g scores */
  if (emb_block(&Q, 0, nq, want, &qx, &qm, &qbuf, &qcap, &qmbuf, &qmcap, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }
  if (lowbit_prec &&
      lowbit_load(&lb, (precision)prec, &D, &qx, &qm, &opts, err)) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }
  int show_progress = isatty(2) && !json;
  double pairs = (double)nq * (double)D.n, dtok_scored = 0;
  double t0 = now_s(); /* the timed part includes every copy to and from the device */
  int64_t j0 = 0;
  if (lb.kind ? lowbit_to_device(&lb, &g, err)
              : !rerank_path && (device_put_tensor(&g, &qx, &gq, &gqx, err) ||
                                 device_put_tensor(&g, &qm, &gqm, &gqmx, err))) {
    fprintf(stderr, "%s: error: %s\n", prog, err);
    goto out;
  }
  if (rerank_path) {
    /* doc id -> index, through indices sorted by id (ties: lower index) */
    id_sorted = calloc((size_t)D.n, sizeof(int64_t));
    if (!id_sorted) {
      fprintf(stderr, "%s: error: out of memory for %lld documents (%s)\n", prog,
              (long long)D.n, rerank_path);
      goto out;
    }
    for (int64_t j = 0; j < D.n; j++) id_sorted[j] = j;
    sort_by_id(id_sorted, D.n, D.ids);
    pairs = 0;
    for (int64_t i = 0; i < nq; i++) {
      int64_t b, nc = qrels_range(&cand, Q.ids[i], &b);
      for (int64_t c2 = 0; c2 < nc; c2++) {
        int64_t j = find_id(id_sorted, D.n, D.ids, cand.v[b + c2].d);
        if (j < 0) {
          fprintf(stderr, "%s: error: %s: document id %lld (query %lld) is not in %s\n", prog,
                  rerank_path, (long long)cand.v[b + c2].d, (long long)Q.ids[i], D.path);
          goto out;
        }
        cidx[c2] = j;
      }
      sort_i64(cidx, nc);
      int64_t m = 0;
      for (int64_t c2 = 0; c2 < nc; c2++)
        if (m == 0 || cidx[c2] != cidx[m - 1]) cidx[m++] = cidx[c2];
      nc = m;
      cnt[i] = 0;
      if (nc == 0) continue;
      int64_t kb = K1 < nc ? K1 : nc;
      if (cand_topk(&Q, &D, i, cidx, nc, kb, want, &opts, lb.kind ? &lb : NULL, &g, &cb,
                    best_s + i * K1, best_i + i * K1, err)) {
        fprintf(stderr, "%s: error: %s\n", prog, err);
        goto out;
      }
      cnt[i] = kb;
      pairs += (double)nc;
      for (int64_t c2 = 0; c2 < nc; c2++) dtok_scored += (double)Q.len[i] * (double)D.len[cidx[c2]];
      if (show_progress) progress((double)(i + 1) / (double)nq, 0);
    }
    j0 = D.n; /* skip the full search */
  }
  while (nq > 0 && j0 < D.n) {
    /* Grow the block while its padded size stays within block_tokens. */
    int64_t j1 = j0 + 1, lmax = D.ragged ? D.len[j0] : D.L;
    while (j1 < D.n) {
      int64_t l = D.ragged ? D.len[j1] : D.L;
      int64_t nl = l > lmax ? l : lmax;
      int64_t padded;
      if (lik_mul_i64(j1 + 1 - j0, nl > 0 ? nl : 1, &padded) || padded > block_tokens) break;
      lmax = nl;
      j1++;
    }
    int64_t nb = j1 - j0, kb = K1 < nb ? K1 : nb;
    if ((lb.kind ? lowbit_topk(&lb, j0, j1, kb, &opts, blk_s, blk_i, K1, err)
                 : emb_block(&D, j0, j1, want, &dx, &dm, &dbuf, &dcap, &dmbuf, &dmcap, err) ||
                       device_put_tensor(&g, &dx, &gd, &gdx, err) ||
                       device_put_tensor(&g, &dm, &gdm, &gdmx, err) ||
                       retrieve_topk(&g, &gqx, &gqmx, &gdx, &gdmx, kb, &opts, blk_s, blk_i, K1,
                                     err)) ||
        merge_block(cand_s, cand_i, nq, K1, have, kb, j0, &opts, mrg_s, mrg_i, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    have = have + kb < K1 ? have + kb : K1;
    for (int64_t i = 0; i < nq; i++) cnt[i] = have;
    j0 = j1;
    if (show_progress) progress((double)j0 / (double)D.n, 0);
  }
  /* --rescore: each query's low-bit top K1, scored exactly, the top K kept */
  for (int64_t i = 0; rescore && i < nq; i++) {
    const int64_t nc = cnt[i], kb = K < nc ? K : nc;
    if (nc == 0) continue;
    memcpy(cidx, best_i + i * K1, (size_t)nc * sizeof *cidx);
    sort_i64(cidx, nc);
    if (cand_topk(&Q, &D, i, cidx, nc, kb, want, &opts, NULL, &g, &cb, best_s + i * K1,
                  best_i + i * K1, err)) {
      fprintf(stderr, "%s: error: %s\n", prog, err);
      goto out;
    }
    cnt[i] = kb;
    pairs += (double)nc;
    for (int64_t c2 = 0; c2 < nc; c2++) dtok_scored += (double)Q.len[i] * (double)D.len[cidx[c2]];
  }
  double secs = now_s() - t0;
  const char *scored_as = lb.kind == PRECISION_INT8     ? "int8"
                          : lb.kind == PRECISION_BINARY ? "binary"
                                                        : dtype_name(want);
  char how[96]; /* the text report's precision: the low-bit one, then the rescoring */
  if (rescore)
    snprintf(how, sizeof how, "%s, top %lld rescored as %s", scored_as, (long long)K1,
             dtype_name(want));
  else
    snprintf(how, sizeof how, "%s", scored_as);
  if (show_progress) progress(1.0, 1);

  /* Work: 2 * Lq * Ld * d per (query, document) pair, valid tokens only. */
  double qtok = 0;
  for (int64_t i = 0; i < nq; i++) qtok += (double)Q.len[i];
  if (!rerank_path) dtok_scored += qtok * (double)D.tokens;
  double flop = 2.0 * dtok_scored * (double)D.d;
  double tdiv = secs > 0 ? secs : 1e-9;

  double ndcg_sum = 0, rec_sum = 0;
  int64_t nevals = 0;
  if (qrels_path) {
    for (int64_t i = 0; i < nq; i++) {
      for (int64_t r = 0; r < cnt[i]; r++) ranked[r] = D.ids[best_i[i * K1 + r]];
      double nd, rc2;
      if (eval_query(&rel, Q.ids[i], ranked, cnt[i], NDCG_K, RECALL_K, &nd, &rc2)) {
        ndcg_sum += nd;
        rec_sum += rc2;
        nevals++;
      }
    }
  }

  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", lik_version_string());
    cJSON_AddStringToObject(o, "cpu_isa", lik_cpu_isa());
    cJSON_AddStringToObject(o, "device", g.name);
    if (g.cuda) cJSON_AddStringToObject(o, "device_name", g.model);
    cJSON_AddStringToObject(o, "queries_file", Q.path);
    cJSON_AddStringToObject(o, "docs_file", D.path);
    if (qrels_path) cJSON_AddStringToObject(o, "qrels_file", qrels_path);
    cJSON_AddBoolToObject(o, "default_data", using_default);
    cJSON_AddNumberToObject(o, "num_queries", (double)nq);
    cJSON_AddNumberToObject(o, "num_docs", (double)D.n);
    cJSON_AddNumberToObject(o, "dim", (double)D.d);
    cJSON_AddStringToObject(o, "dtype", scored_as);
    cJSON_AddNumberToObject(o, "rescore", (double)rescore);
    if (rescore) cJSON_AddStringToObject(o, "rescored_as", dtype_name(want));
    cJSON_AddNumberToObject(o, "query_tokens", qtok);
    cJSON_AddNumberToObject(o, "doc_tokens", (double)D.tokens);
    cJSON_AddNumberToObject(o, "top_k", (double)kshow);
    cJSON_AddBoolToObject(o, "normalize", normalize);
    cJSON_AddBoolToObject(o, "rerank", rerank_path != NULL);
    cJSON_AddNumberToObject(o, "pairs_scored", pairs);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "queries_per_s", (double)nq / tdiv);
    cJSON_AddNumberToObject(o, "docs_scored_per_s", pairs / tdiv);
    cJSON_AddNumberToObject(o, "gflop", flop * 1e-9);
    cJSON_AddNumberToObject(o, "gflops_per_s", flop * 1e-9 / tdiv);
    if (qrels_path) report_add_quality(o, nevals, ndcg_sum, rec_sum);
    report_add_results(o, nq, Q.ids, best_i, best_s, K1, cnt, kshow, D.ids);
    if (report_print(o, prog)) goto out;
  } else {
    printf("lik %s on %s%s%s%s, CPU kernels: %s%s\n", lik_version_string(), g.name,
           g.cuda ? " (" : "", g.model, g.cuda ? ")" : "", lik_cpu_isa(),
           using_default ? "  (bundled Cranfield-1400 data)" : "");
    printf("queries:   %s: %lld of %lld, %lld-%lld tokens, d=%lld, %s\n", Q.path,
           (long long)nq, (long long)Q.n, (long long)Q.min_len, (long long)Q.max_len,
           (long long)Q.d, dtype_name(Q.dtype));
    printf("documents: %s: %lld, %lld-%lld tokens (%lld total), %s\n", D.path, (long long)D.n,
           (long long)D.min_len, (long long)D.max_len, (long long)D.tokens, dtype_name(D.dtype));
    int64_t np = nprint < 0 ? nq : (nprint < nq ? nprint : nq);
    for (int64_t i = 0; i < np; i++) {
      int64_t m = cnt[i] < kshow ? cnt[i] : kshow;
      printf("\nquery %lld: top %lld\n", (long long)Q.ids[i], (long long)m);
      for (int64_t j = 0; j < m; j++)
        printf("  %3lld. doc %-10lld %10.4f\n", (long long)j + 1,
               (long long)D.ids[best_i[i * K1 + j]], best_s[i * K1 + j]);
    }
    if (np < nq) printf("\n(results of %lld more queries not shown; --print -1 shows all)\n",
                        (long long)(nq - np));
    if (rerank_path)
      printf("\nreranked %.0f candidates of %lld queries in %.3f s (top %lld, %s%s): %.1f queries/s, "
             "%.4g documents scored/s, %.2f GFLOP/s MaxSim\n",
             pairs, (long long)nq, secs, (long long)K, how,
             normalize ? ", normalize" : "", (double)nq / tdiv, pairs / tdiv, flop * 1e-9 / tdiv);
    else
    printf("\n%lld queries x %lld documents in %.3f s (top %lld, %s%s): %.1f queries/s, "
           "%.4g documents scored/s, %.2f GFLOP/s MaxSim\n",
           (long long)nq, (long long)D.n, secs, (long long)K, how,
           normalize ? ", normalize" : "", (double)nq / tdiv, pairs / tdiv, flop * 1e-9 / tdiv);
    if (qrels_path) {
      if (nevals)
        printf("nDCG@10 %.4f  recall@100 %.4f  (mean over %lld queries with relevant documents, "
               "qrels %s)\n", ndcg_sum / (double)nevals, rec_sum / (double)nevals,
               (long long)nevals, qrels_path);
      else
        printf("nDCG@10 -  recall@100 -  (no query has a relevant document in %s)\n",
               qrels_path);
    }
  }
  rc = 0;
out:
  free(cand_s);
  free(cand_i);
  free(mrg_s);
  free(mrg_i);
  free(cnt);
  free(ranked);
  free(qbuf);
  free(dbuf);
  free(qmbuf);
  free(dmbuf);
  qrels_free(&rel);
  qrels_free(&cand);
  free(id_sorted);
  free(cidx);
  cand_free(&cb);
  lowbit_free(&lb);
  dev_buf_free(&gq);
  dev_buf_free(&gqm);
  dev_buf_free(&gd);
  dev_buf_free(&gdm);
  device_close(&g);
  emb_free(&Q);
  emb_free(&D);
  return rc;
}
