/*
 * test_retrieve.c — lik_retrieve (exact top-k by MaxSim) against a sort of
 * fp64 reference scores: dtypes, masks, strides, exact ties from duplicated
 * documents (lower index first), top_k > Nd, empty batches, thread counts.
 *
 *   test_retrieve [group ...]    LIK_TEST_SEED=<n> reproduces a run.
 */
#include "lik_test_util.h"

typedef struct {
  lik_dtype dt;
  int64_t Nq, Nd, Lq, Ld, d, top_k;
  int q2, d2; /* 2-D Q ([Lq, d], outputs [k]) / 2-D D (one document) */
  int qmask, dmask;
  lik_dtype qmdt, dmdt;
  double q_pvalid, d_pvalid, d_allmasked;
  int vals, garbage;
  double dup_docs; /* probability that a document copies an earlier one */
  layout_t lQ, lD, lqm, ldm, lS, lI;
  int normalize, threads;
} rcase_t;

static const lik_dtype F_LIST[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
static const int64_t D_LIST[] = {1, 3, 17, 48, 96, 128, 1000};

static rcase_t rcase_default(void) {
  rcase_t c;
  memset(&c, 0, sizeof c);
  c.dt = LIK_F32;
  c.Nq = 3;
  c.Nd = 20;
  c.Lq = 5;
  c.Ld = 7;
  c.d = 17;
  c.top_k = 5;
  c.qmdt = c.dmdt = LIK_BOOL;
  c.q_pvalid = c.d_pvalid = 1;
  c.lQ = c.lD = c.lqm = c.ldm = c.lS = c.lI = LAYOUT_DENSE;
  return c;
}

/* root[n]: the document whose raw content document n copies (itself if none). */
static void gen(seqs_t *s, const rcase_t *c, int is_doc, int64_t *root) {
  const double pv = is_doc ? c->d_pvalid : c->q_pvalid;
  for (int64_t n = 0; n < s->n; n++) {
    if (root) root[n] = n;
    if (is_doc && n > 0 && rng_chance(c->dup_docs)) { /* exact duplicate document */
      const int64_t src = rng_int(0, n - 1);
      if (root) root[n] = root[src];
      memcpy(s->x + n * s->L * s->d, s->x + src * s->L * s->d,
             sizeof(double) * (size_t)(s->L * s->d));
      if (s->m) memcpy(s->m + n * s->L, s->m + src * s->L, (size_t)s->L);
      continue;
    }
    const int all = is_doc && s->m && rng_chance(c->d_allmasked);
    for (int64_t l = 0; l < s->L; l++) {
      if (s->m) s->m[n * s->L + l] = !all && rng_chance(pv);
      for (int64_t k = 0; k < s->d; k++) s->x[(n * s->L + l) * s->d + k] = gen_value(c->vals, is_doc);
    }
  }
}

static void fill_embed(view_t *v, seqs_t *s, int garbage) {
  const int64_t n = t_numel(&v->t);
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    const int64_t tok = f / s->d;
    t_put(&v->t, idx, (s->m && !s->m[tok]) ? garbage_value(garbage + (int)tok) : s->x[f]);
  }
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    s->x[f] = t_get(&v->t, idx);
  }
}

static void fill_mask(view_t *v, const seqs_t *s) {
  const int64_t n = t_numel(&v->t);
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    t_put(&v->t, idx, s->m[f] ? (v->t.dtype == LIK_U8 ? (double)rng_int(1, 255) : 1.0) : 0.0);
  }
}

typedef struct {
  double s;
  int64_t j;
} ranked_t;

static int cmp_ranked(const void *a, const void *b) {
  const ranked_t *x = (const ranked_t *)a, *y = (const ranked_t *)b;
  if (x->s != y->s) return x->s > y->s ? -1 : 1;
  return x->j < y->j ? -1 : x->j > y->j;
}

/* Runs one case; if out_s / out_i are given, the raw results are copied there
 * (dense [Nq][k]) for cross-run comparisons.  Returns k. */
static int64_t run_rcase(const rcase_t *c0, float *out_s, int64_t *out_i) {
  rcase_t cc = *c0;
  rcase_t *c = &cc;
  if (c->q2) c->Nq = 1;
  if (c->d2) c->Nd = 1;
  char l[6][64];
  layout_str(&c->lQ, l[0], 64);
  layout_str(&c->lD, l[1], 64);
  layout_str(&c->lqm, l[2], 64);
  layout_str(&c->ldm, l[3], 64);
  layout_str(&c->lS, l[4], 64);
  layout_str(&c->lI, l[5], 64);
  case_begin("retrieve %s Nq=%lld Nd=%lld Lq=%lld Ld=%lld d=%lld top_k=%lld q2=%d d2=%d "
             "qmask=%d(%s,%.2f) dmask=%d(%s,%.2f,all=%.2f) vals=%d garbage=%d dup=%.2f norm=%d "
             "threads=%d Q%s D%s qm%s dm%s S%s I%s",
             dtype_str(c->dt), (long long)c->Nq, (long long)c->Nd, (long long)c->Lq,
             (long long)c->Ld, (long long)c->d, (long long)c->top_k, c->q2, c->d2, c->qmask,
             dtype_str(c->qmdt), c->q_pvalid, c->dmask, dtype_str(c->dmdt), c->d_pvalid,
             c->d_allmasked, c->vals, c->garbage, c->dup_docs, c->normalize, c->threads, l[0],
             l[1], l[2], l[3], l[4], l[5]);
  const int64_t k = c->top_k < c->Nd ? c->top_k : c->Nd;
  seqs_t Qs, Ds;
  seqs_alloc(&Qs, c->Nq, c->Lq, c->d, c->qmask);
  seqs_alloc(&Ds, c->Nd, c->Ld, c->d, c->dmask);
  int64_t *root = (int64_t *)malloc(sizeof(int64_t) * (size_t)(c->Nd ? c->Nd : 1));
  gen(&Qs, c, 0, NULL);
  gen(&Ds, c, 1, root);
  int64_t qs[3], ds[3];
  int qn = 0, dn = 0;
  if (!c->q2) qs[qn++] = c->Nq;
  qs[qn++] = c->Lq;
  qs[qn++] = c->d;
  if (!c->d2) ds[dn++] = c->Nd;
  ds[dn++] = c->Ld;
  ds[dn++] = c->d;
  view_t vQ, vD, vqm, vdm, vS, vI;
  view_make(&vQ, c->dt, qn, qs, c->lQ, 0xFF);
  view_make(&vD, c->dt, dn, ds, c->lD, 0xFF);
  fill_embed(&vQ, &Qs, c->garbage);
  fill_embed(&vD, &Ds, c->garbage + 1);
  if (c->qmask) {
    view_make(&vqm, c->qmdt, qn - 1, qs, c->lqm, 0x5A);
    fill_mask(&vqm, &Qs);
  }
  if (c->dmask) {
    view_make(&vdm, c->dmdt, dn - 1, ds, c->ldm, 0x5A);
    fill_mask(&vdm, &Ds);
  }
  int64_t os[2];
  int on = 0;
  if (!c->q2) os[on++] = c->Nq;
  os[on++] = k;
  view_make(&vS, LIK_F32, on, os, c->lS, 0xCD);
  view_make(&vI, LIK_I64, on, os, c->lI, 0xCD);
  view_snapshot(&vQ);
  view_snapshot(&vD);
  lik_options o = LIK_OPTIONS_INIT;
  o.normalize = c->normalize;
  o.num_threads = c->threads;
  const lik_status st = lik_retrieve(&vQ.t, &vD.t, c->qmask ? &vqm.t : NULL,
                                     c->dmask ? &vdm.t : NULL, c->top_k, &o, &vS.t, &vI.t);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  if (st == LIK_OK) {
    CHECK(lik_last_error()[0] == '\0', "lik_last_error not empty after success");
    CHECK(view_unchanged(&vQ) && view_unchanged(&vD), "Q or D memory modified");
    int64_t w = view_outside_written(&vS);
    CHECK(w == 0, "scores: %lld elements outside the view written", (long long)w);
    w = view_outside_written(&vI);
    CHECK(w == 0, "indices: %lld elements outside the view written", (long long)w);
    if (c->normalize) {
      Qs.norm = Ds.norm = 1;
    }
    const int exact = c->vals == VAL_INT && !c->normalize;
    const tol_t tol = tol_for(c->dt, c->normalize, exact);
    double *ref = (double *)malloc(sizeof(double) * (size_t)(c->Nd ? c->Nd : 1));
    double *lim = (double *)malloc(sizeof(double) * (size_t)(c->Nd ? c->Nd : 1));
    ranked_t *rk = (ranked_t *)malloc(sizeof(ranked_t) * (size_t)(c->Nd ? c->Nd : 1));
    char *seen = (char *)malloc((size_t)(c->Nd ? c->Nd : 1));
    double *gots = (double *)malloc(sizeof(double) * (size_t)(c->Nd ? c->Nd : 1));
    for (int64_t i = 0; i < c->Nq && g_reports < g_max_reports; i++) {
      for (int64_t j = 0; j < c->Nd; j++) {
        double scale;
        ref[j] = ref_score(&Qs, i, &Ds, j, NULL, &scale);
        lim[j] = tol.rel * scale + tol.out_rel * fabs(ref[j]);
        rk[j].s = ref[j];
        rk[j].j = j;
      }
      qsort(rk, (size_t)c->Nd, sizeof *rk, cmp_ranked);
      memset(seen, 0, (size_t)(c->Nd ? c->Nd : 1));
      double prev_s = INFINITY;
      int64_t prev_j = -1;
      double min_ref = INFINITY, max_lim = 0;
      for (int64_t r = 0; r < k; r++) {
        int64_t ix[2] = {i, r};
        int64_t *pix = c->q2 ? ix + 1 : ix;
        const double s = t_get(&vS.t, pix);
        const int64_t j = ((int64_t *)vI.t.data)[t_offset(&vI.t, pix)];
        if (out_s) {
          out_s[i * k + r] = (float)s;
          out_i[i * k + r] = j;
        }
        g_checks_group++;
        if (j < 0 || j >= c->Nd) {
          failf("query %lld rank %lld: index %lld out of [0, %lld)", (long long)i, (long long)r,
                (long long)j, (long long)c->Nd);
          continue;
        }
        CHECK(!seen[j], "query %lld rank %lld: duplicate index %lld", (long long)i,
              (long long)r, (long long)j);
        seen[j] = 1;
        gots[j] = s;
        CHECK(fabs(s - ref[j]) <= lim[j] || (lim[j] == 0 && s == ref[j]),
              "query %lld rank %lld doc %lld: score %.9g, reference %.9g", (long long)i,
              (long long)r, (long long)j, s, ref[j]);
        CHECK(s < prev_s || (s == prev_s && j > prev_j),
              "query %lld rank %lld: (score %.9g, doc %lld) after (%.9g, %lld): not descending "
              "with lower index first on ties",
              (long long)i, (long long)r, s, (long long)j, prev_s, (long long)prev_j);
        if (exact)
          CHECK(j == rk[r].j && s == rk[r].s,
                "query %lld rank %lld: got (doc %lld, %.9g), exact reference (doc %lld, %.9g)",
                (long long)i, (long long)r, (long long)j, s, (long long)rk[r].j, rk[r].s);
        if (ref[j] < min_ref) min_ref = ref[j];
        if (lim[j] > max_lim) max_lim = lim[j];
        prev_s = s;
        prev_j = j;
      }
      /* completeness: nothing left out scores clearly above what was returned */
      for (int64_t j = 0; j < c->Nd && k > 0; j++)
        if (!seen[j])
          CHECK(ref[j] <= min_ref + max_lim + lim[j],
                "query %lld: doc %lld (reference %.9g) missing from top-%lld (lowest returned "
                "reference %.9g)",
                (long long)i, (long long)j, ref[j], (long long)k, min_ref);
      /* exact duplicates: equal scores, so the lower index must come first */
      for (int64_t a = 0; a < c->Nd && c->dup_docs > 0; a++)
        for (int64_t b = a + 1; b < c->Nd; b++)
          if (seen[b] && root[a] == root[b])
            CHECK(seen[a], "query %lld: duplicate doc %lld returned (score %.9g, reference %.9g) "
                           "but its lower-index copy %lld (same content, reference %.9g) was "
                           "not; lowest returned score %.9g",
                  (long long)i, (long long)b, gots[b], ref[b], (long long)a, ref[a], prev_s);
    }
    free(ref);
    free(lim);
    free(rk);
    free(seen);
    free(gots);
  }
  view_free(&vQ);
  view_free(&vD);
  if (c->qmask) view_free(&vqm);
  if (c->dmask) view_free(&vdm);
  view_free(&vS);
  view_free(&vI);
  seqs_free(&Qs);
  seqs_free(&Ds);
  free(root);
  return k;
}

static void random_masks(rcase_t *c) {
  c->qmask = rng_chance(0.5);
  c->dmask = 1;
  c->qmdt = rng_chance(0.5) ? LIK_BOOL : LIK_U8;
  c->dmdt = rng_chance(0.5) ? LIK_BOOL : LIK_U8;
  c->q_pvalid = rng_range(0.3, 1);
  c->d_pvalid = rng_range(0.1, 1);
  c->d_allmasked = rng_chance(0.5) ? 0.2 : 0;
  c->garbage = (int)rng_int(0, 3);
}

static void random_strides(rcase_t *c) {
  c->lQ = random_layout(3);
  c->lD = random_layout(3);
  c->lqm = random_layout(2);
  c->ldm = random_layout(2);
  c->lS = random_layout(2);
  c->lI = random_layout(2);
}

static void cap(rcase_t *c, int64_t lim) {
  while (c->Nq * c->Nd * (c->Lq + 1) * (c->Ld + 1) * c->d > lim && c->Ld > 3) c->Ld /= 2;
  while (c->Nq * c->Nd * (c->Lq + 1) * (c->Ld + 1) * c->d > lim && c->Lq > 3) c->Lq /= 2;
  while (c->Nq * c->Nd * (c->Lq + 1) * (c->Ld + 1) * c->d > lim && c->Nd > 8) c->Nd /= 2;
}

static void group_basic(void) {
  group_begin("basic");
  for (int f = 0; f < 4; f++)
    for (int r = 0; r < 8; r++) {
      rcase_t c = rcase_default();
      c.dt = F_LIST[f];
      c.Nq = rng_int(1, 5);
      c.Nd = rng_int(1, 60);
      c.Lq = rng_int(1, 33);
      c.Ld = rng_int(1, 40);
      c.d = RNG_PICK(D_LIST);
      const int64_t ks[] = {1, 2, 3, 10, 1000};
      c.top_k = r == 7 ? c.Nd : RNG_PICK(ks);
      c.q2 = r == 5;
      c.d2 = r == 6;
      c.vals = (int)(r % 3);
      c.normalize = r == 4;
      c.threads = (int)rng_int(0, 3);
      if (r & 1) random_masks(&c);
      cap(&c, 2000000);
      run_rcase(&c, NULL, NULL);
    }
  group_end();
}

/* Exact ties: integer data and duplicated documents; float data with
 * duplicated documents (identical content scores identically). */
static void group_ties(void) {
  group_begin("ties");
  for (int f = 0; f < 4; f++)
    for (int r = 0; r < 6; r++) {
      rcase_t c = rcase_default();
      c.dt = F_LIST[f];
      c.vals = r < 3 ? VAL_INT : VAL_RAND;
      c.dup_docs = 0.5;
      c.Nq = rng_int(1, 4);
      c.Nd = rng_int(2, 80);
      c.Lq = rng_int(1, 13);
      c.Ld = rng_int(1, 13);
      c.d = r == 0 ? 1 : RNG_PICK(D_LIST);
      c.top_k = rng_int(1, c.Nd + 3);
      if (r & 1) random_masks(&c);
      if (r >= 4) random_strides(&c);
      cap(&c, 1000000);
      run_rcase(&c, NULL, NULL);
    }
  group_end();
}

static void group_masks(void) {
  group_begin("masks");
  for (int r = 0; r < 12; r++) {
    rcase_t c = rcase_default();
    c.dt = F_LIST[r % 4];
    c.vals = VAL_NEG;
    random_masks(&c);
    c.qmask = r & 1;
    c.d_allmasked = r >= 6 ? 0.4 : 0.1;
    c.garbage = r;
    c.Nq = rng_int(1, 4);
    c.Nd = rng_int(1, 50);
    c.Lq = rng_int(1, 20);
    c.Ld = rng_int(1, 30);
    c.d = RNG_PICK(D_LIST);
    c.top_k = rng_int(1, 60);
    c.normalize = r == 11;
    cap(&c, 1000000);
    run_rcase(&c, NULL, NULL);
  }
  group_end();
}

static void group_strides(void) {
  group_begin("strides");
  for (int r = 0; r < 12; r++) {
    rcase_t c = rcase_default();
    c.dt = F_LIST[r % 4];
    random_strides(&c);
    if (r & 1) random_masks(&c);
    c.Nq = rng_int(1, 4);
    c.Nd = rng_int(1, 50);
    c.Lq = rng_int(1, 20);
    c.Ld = rng_int(1, 30);
    c.d = RNG_PICK(D_LIST);
    c.top_k = rng_int(1, 60);
    c.q2 = r == 4;
    c.d2 = r == 5;
    c.vals = (int)(r % 3);
    cap(&c, 1000000);
    run_rcase(&c, NULL, NULL);
  }
  group_end();
}

/* Edge sizes: Nq = 0, Nd = 0, top_k > Nd, Lq / Ld = 0, many documents
 * (crossing any internal document block size). */
static void group_edges(void) {
  group_begin("edges");
  const int64_t nqs[] = {0, 1, 3}, nds[] = {0, 1, 2, 7};
  for (size_t a = 0; a < 3; a++)
    for (size_t b = 0; b < 4; b++)
      for (int t = 0; t < 2; t++) {
        rcase_t c = rcase_default();
        c.Nq = nqs[a];
        c.Nd = nds[b];
        c.top_k = t ? c.Nd + 3 : 1;
        c.dt = F_LIST[(a + b + t) % 4];
        run_rcase(&c, NULL, NULL);
      }
  for (int t = 0; t < 4; t++) {
    rcase_t c = rcase_default();
    c.Lq = t & 1 ? 0 : 3;
    c.Ld = t & 2 ? 0 : 4;
    c.top_k = 4;
    c.Nd = 6;
    run_rcase(&c, NULL, NULL); /* all scores 0: ties ordered by index */
  }
  for (int r = 0; r < 3; r++) {
    rcase_t c = rcase_default();
    c.dt = F_LIST[r];
    c.Nq = 3;
    c.Nd = r == 0 ? 1500 : r == 1 ? 700 : 2100;
    c.Lq = 5;
    c.Ld = 4;
    c.d = r == 2 ? 3 : 17;
    c.top_k = r == 0 ? 1000 : r == 1 ? 31 : 2100;
    c.dup_docs = 0.2;
    c.vals = r == 1 ? VAL_INT : VAL_RAND;
    if (r == 2) random_masks(&c);
    run_rcase(&c, NULL, NULL);
  }
  group_end();
}

static void group_threads(void) {
  group_begin("threads");
  for (int f = 0; f < 4; f++) {
    rcase_t c = rcase_default();
    c.dt = F_LIST[f];
    c.Nq = 4;
    c.Nd = 300;
    c.Lq = 13;
    c.Ld = 9;
    c.d = 48;
    c.top_k = 40;
    c.dup_docs = 0.1;
    c.dmask = 1;
    c.d_pvalid = 0.8;
    const int nts[4] = {1, 2, 3, 7};
    float s0[4 * 40], s1[4 * 40];
    int64_t i0[4 * 40], i1[4 * 40];
    const uint64_t state = g_rng_state;
    for (int t = 0; t < 4; t++) {
      g_rng_state = state; /* same data every run */
      c.threads = nts[t];
      run_rcase(&c, t ? s1 : s0, t ? i1 : i0);
      if (t)
        CHECK(!memcmp(s0, s1, sizeof s0) && !memcmp(i0, i1, sizeof i0),
              "threads=%d: results differ bitwise from threads=1", nts[t]);
    }
  }
  group_end();
}

static void group_random(void) {
  group_begin("random");
  for (int r = 0; r < 60; r++) {
    rcase_t c = rcase_default();
    c.dt = RNG_PICK(F_LIST);
    c.Nq = rng_int(0, 6);
    c.Nd = rng_int(0, 120);
    c.Lq = rng_int(0, 40);
    c.Ld = rng_int(0, 40);
    c.d = RNG_PICK(D_LIST);
    c.top_k = rng_int(1, 130);
    c.q2 = rng_chance(0.15);
    c.d2 = rng_chance(0.1);
    c.vals = (int)rng_int(0, 2);
    c.dup_docs = rng_chance(0.4) ? 0.3 : 0;
    c.normalize = rng_chance(0.25);
    c.threads = (int)rng_int(0, 4);
    if (rng_chance(0.5)) random_masks(&c);
    if (rng_chance(0.5)) random_strides(&c);
    cap(&c, 1000000);
    run_rcase(&c, NULL, NULL);
  }
  group_end();
}

int main(int argc, char **argv) {
  test_init("test_retrieve");
  struct {
    const char *name;
    void (*fn)(void);
  } groups[] = {{"basic", group_basic},     {"ties", group_ties},   {"masks", group_masks},
                {"strides", group_strides}, {"edges", group_edges}, {"threads", group_threads},
                {"random", group_random}};
  const int ng = (int)(sizeof groups / sizeof *groups);
  for (int g = 0; g < ng; g++) {
    int run = argc < 2;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], groups[g].name)) run = 1;
    if (run) groups[g].fn();
  }
  return test_finish("test_retrieve");
}
