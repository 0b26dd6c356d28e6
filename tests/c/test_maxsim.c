/*
 * test_maxsim.c — lik_maxsim / lik_maxsim_pairs against an independent fp64
 * scalar reference: sizes, dtypes, layouts, masks, strides, argmax, padding
 * and thread-count invariance, normalisation, 64-bit offsets.
 *
 *   test_maxsim [group ...]      (no argument: every group)
 *   LIK_TEST_SEED=<n>            reproduce a run (the seed is printed)
 *   LIK_CPU_ISA=portable|avx2|avx512|neon|sve  kernel path under test
 */
#include "lik_test_util.h"

typedef enum { LAY_CROSS, LAY_Q2, LAY_D2, LAY_22, LAY_KD, LAY_PAIRS, LAY_N } lay_t;
static const char *const lay_names[] = {"cross3x3", "Q2-D3", "Q3-D2", "Q2-D2", "KD", "pairs"};

typedef struct {
  lay_t lay;
  lik_dtype dt;
  int64_t Nq, Nd, Lq, Ld, d; /* Nd is K for KD; pairs use B = Nq */
  int qmask, dmask;          /* 0: no mask tensor */
  lik_dtype qmdt, dmdt;
  double q_pvalid, d_pvalid; /* probability of a valid token */
  double q_allmasked, d_allmasked; /* probability of a fully masked sequence */
  int vals;
  int garbage; /* what masked tokens hold (garbage_value) */
  int dup_tokens;
  int special_tokens; /* zero-vector and tiny-norm tokens */
  layout_t lQ, lD, lqm, ldm, lS, lA;
  int normalize, threads, want_argmax;
  int null_empty; /* pass data = NULL for empty tensors */
} case_t;

static case_t case_default(void) {
  case_t c;
  memset(&c, 0, sizeof c);
  c.lay = LAY_CROSS;
  c.dt = LIK_F32;
  c.Nq = 2;
  c.Nd = 3;
  c.Lq = 5;
  c.Ld = 7;
  c.d = 17;
  c.qmdt = c.dmdt = LIK_BOOL;
  c.q_pvalid = c.d_pvalid = 1;
  c.lQ = c.lD = c.lqm = c.ldm = c.lS = c.lA = LAYOUT_DENSE;
  c.want_argmax = 1;
  return c;
}

static void case_describe(const case_t *c, char *buf, size_t n) {
  char a[6][64];
  layout_str(&c->lQ, a[0], 64);
  layout_str(&c->lD, a[1], 64);
  layout_str(&c->lqm, a[2], 64);
  layout_str(&c->ldm, a[3], 64);
  layout_str(&c->lS, a[4], 64);
  layout_str(&c->lA, a[5], 64);
  snprintf(buf, n,
           "%s %s Nq=%lld N%s=%lld Lq=%lld Ld=%lld d=%lld qmask=%d(%s,p=%.2f,all=%.2f) "
           "dmask=%d(%s,p=%.2f,all=%.2f) vals=%d garbage=%d dup=%d special=%d norm=%d "
           "threads=%d argmax=%d Q%s D%s qm%s dm%s S%s A%s",
           lay_names[c->lay], dtype_str(c->dt), (long long)c->Nq,
           c->lay == LAY_KD ? "K" : "d", (long long)c->Nd, (long long)c->Lq,
           (long long)c->Ld, (long long)c->d, c->qmask, dtype_str(c->qmdt), c->q_pvalid,
           c->q_allmasked, c->dmask, dtype_str(c->dmdt), c->d_pvalid, c->d_allmasked,
           c->vals, c->garbage, c->dup_tokens, c->special_tokens, c->normalize, c->threads,
           c->want_argmax, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* Fills logical sequences (mask, then values; masked tokens get garbage). */
static void gen_seqs(seqs_t *s, const case_t *c, int is_doc) {
  const double pvalid = is_doc ? c->d_pvalid : c->q_pvalid;
  const double pall = is_doc ? c->d_allmasked : c->q_allmasked;
  for (int64_t n = 0; n < s->n; n++) {
    const int all = s->m && rng_chance(pall);
    for (int64_t l = 0; l < s->L; l++) {
      if (s->m) s->m[n * s->L + l] = !all && rng_chance(pvalid);
      double *x = s->x + (n * s->L + l) * s->d;
      if (c->dup_tokens && l > 0 && rng_chance(0.3)) {
        memcpy(x, x - (rng_int(1, l)) * s->d, sizeof(double) * (size_t)s->d);
        continue;
      }
      for (int64_t k = 0; k < s->d; k++) x[k] = gen_value(c->vals, is_doc);
      if (c->special_tokens && rng_chance(0.15)) {
        const int kind = (int)rng_int(0, 2);
        for (int64_t k = 0; k < s->d; k++) {
          if (kind == 0) x[k] = 0; /* zero vector */
          else if (kind == 1 && (c->dt == LIK_F32 || c->dt == LIK_F64))
            x[k] = rng_range(-1, 1) * 1e-14; /* norm below 1e-12 */
          else if (kind == 2) x[k] *= 1e3;
        }
      }
    }
  }
}

/* Writes logical sequences into an embedding view (flat row-major order of the
 * view == (seq, token, feature) order), garbage into masked tokens, then reads
 * the values back so the reference sees exactly what the view presents. */
static void fill_embed_view(view_t *v, seqs_t *s, int garbage) {
  const int64_t n = t_numel(&v->t);
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    const int64_t tok = f / s->d;
    const double val = (s->m && !s->m[tok]) ? garbage_value(garbage + (int)tok) : s->x[f];
    t_put(&v->t, idx, val);
  }
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    s->x[f] = t_get(&v->t, idx);
  }
}

/* Writes the mask, then reads it back (a stride-0 mask aliases entries). */
static void fill_mask_view(view_t *v, seqs_t *s) {
  const int64_t n = t_numel(&v->t);
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    double val = 0;
    if (s->m[f]) val = v->t.dtype == LIK_U8 ? (double)rng_int(1, 255) : 1.0;
    t_put(&v->t, idx, val);
  }
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    s->m[f] = t_get(&v->t, idx) != 0;
  }
}

static void maybe_null(view_t *v, int enable) {
  if (enable && t_numel(&v->t) == 0) v->t.data = NULL;
}

/* Builds, runs and checks one case; returns the number of failures. */
static long run_case(const case_t *c0) {
  case_t cc = *c0;
  case_t *c = &cc;
  if (c->lay == LAY_Q2 || c->lay == LAY_22) c->Nq = 1;
  if (c->lay == LAY_D2 || c->lay == LAY_22) c->Nd = 1;
  if (c->lay == LAY_PAIRS) c->Nd = 1;
  char desc[900];
  case_describe(c, desc, sizeof desc);
  case_begin("%s", desc);
  const long fail0 = g_fail_total;

  const int q3 = !(c->lay == LAY_Q2 || c->lay == LAY_22);
  const int d3 = !(c->lay == LAY_D2 || c->lay == LAY_22);
  const int64_t nqs = c->Nq;
  const int64_t nds = c->lay == LAY_KD ? c->Nq * c->Nd : c->lay == LAY_PAIRS ? c->Nq : c->Nd;

  seqs_t Qs, Ds;
  seqs_alloc(&Qs, nqs, c->Lq, c->d, c->qmask);
  seqs_alloc(&Ds, nds, c->Ld, c->d, c->dmask);
  gen_seqs(&Qs, c, 0);
  gen_seqs(&Ds, c, 1);

  int64_t qshape[4], dshape[4];
  int qnd = 0, dnd = 0;
  if (q3) qshape[qnd++] = c->Nq;
  qshape[qnd++] = c->Lq;
  qshape[qnd++] = c->d;
  if (c->lay == LAY_KD) {
    dshape[dnd++] = c->Nq;
    dshape[dnd++] = c->Nd;
  } else if (c->lay == LAY_PAIRS) {
    dshape[dnd++] = c->Nq;
  } else if (d3) {
    dshape[dnd++] = c->Nd;
  }
  dshape[dnd++] = c->Ld;
  dshape[dnd++] = c->d;

  view_t vQ, vD, vqm, vdm, vS, vA;
  view_make(&vQ, c->dt, qnd, qshape, c->lQ, 0xFF);
  view_make(&vD, c->dt, dnd, dshape, c->lD, 0xFF);
  if (c->qmask) {
    view_make(&vqm, c->qmdt, qnd - 1, qshape, c->lqm, 0x5A);
    fill_mask_view(&vqm, &Qs);
  }
  if (c->dmask) {
    view_make(&vdm, c->dmdt, dnd - 1, dshape, c->ldm, 0x5A);
    fill_mask_view(&vdm, &Ds);
  }
  fill_embed_view(&vQ, &Qs, c->garbage);
  fill_embed_view(&vD, &Ds, c->garbage + 1);

  /* outputs: grid (i, j) -> scores index */
  const int has_i = q3 || c->lay == LAY_PAIRS;
  const int has_j = (c->lay == LAY_KD) || (c->lay != LAY_PAIRS && d3);
  int64_t sshape[3];
  int snd = 0;
  if (has_i) sshape[snd++] = c->Nq;
  if (has_j) sshape[snd++] = c->Nd;
  int64_t ashape[4];
  for (int i = 0; i < snd; i++) ashape[i] = sshape[i];
  ashape[snd] = c->Lq;
  view_make(&vS, LIK_F32, snd, sshape, c->lS, 0xCD);
  if (c->want_argmax) view_make(&vA, LIK_I32, snd + 1, ashape, c->lA, 0xCD);

  maybe_null(&vQ, c->null_empty);
  maybe_null(&vD, c->null_empty);
  maybe_null(&vS, c->null_empty);
  if (c->want_argmax) maybe_null(&vA, c->null_empty);
  view_snapshot(&vQ);
  view_snapshot(&vD);
  if (c->qmask) view_snapshot(&vqm);
  if (c->dmask) view_snapshot(&vdm);

  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = c->normalize;
  opts.num_threads = c->threads;
  lik_status st;
  if (c->lay == LAY_PAIRS)
    st = lik_maxsim_pairs(&vQ.t, &vD.t, c->qmask ? &vqm.t : NULL, c->dmask ? &vdm.t : NULL,
                          &opts, &vS.t, c->want_argmax ? &vA.t : NULL);
  else
    st = lik_maxsim(&vQ.t, &vD.t, c->qmask ? &vqm.t : NULL, c->dmask ? &vdm.t : NULL, &opts,
                    &vS.t, c->want_argmax ? &vA.t : NULL);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  CHECK(st != LIK_OK || lik_last_error()[0] == '\0', "lik_last_error not empty after success: %s",
        lik_last_error());

  if (st == LIK_OK) {
    CHECK(view_unchanged(&vQ), "Q's memory was modified");
    CHECK(view_unchanged(&vD), "D's memory was modified");
    if (c->qmask) CHECK(view_unchanged(&vqm), "q_mask's memory was modified");
    if (c->dmask) CHECK(view_unchanged(&vdm), "d_mask's memory was modified");
    if (vS.t.data) {
      const int64_t w = view_outside_written(&vS);
      CHECK(w == 0, "scores: %lld elements outside the view were written", (long long)w);
    }
    if (c->want_argmax && vA.t.data) {
      const int64_t w = view_outside_written(&vA);
      CHECK(w == 0, "argmax: %lld elements outside the view were written", (long long)w);
    }
    if (c->normalize) {
      Qs.norm = Ds.norm = 1;
    }
    const int exact = c->vals == VAL_INT && !c->normalize;
    const tol_t tol = tol_for(c->dt, c->normalize, exact);
    const int64_t G1 = (c->lay == LAY_PAIRS) ? 1 : c->Nd;
    for (int64_t i = 0; i < c->Nq && g_reports < g_max_reports; i++)
      for (int64_t j = 0; j < G1; j++) {
        int64_t sidx[4], n = 0;
        if (has_i) sidx[n++] = i;
        if (has_j) sidx[n++] = j;
        const double got = t_get(&vS.t, sidx);
        const int64_t dj = c->lay == LAY_KD ? i * c->Nd + j : c->lay == LAY_PAIRS ? i : j;
        char where[64];
        snprintf(where, sizeof where, "(i=%lld, j=%lld)", (long long)i, (long long)j);
        check_pair(&Qs, i, &Ds, dj, got, c->want_argmax ? &vA.t : NULL, sidx, (int)n, tol,
                   where);
      }
  }
  view_free(&vQ);
  view_free(&vD);
  if (c->qmask) view_free(&vqm);
  if (c->dmask) view_free(&vdm);
  view_free(&vS);
  if (c->want_argmax) view_free(&vA);
  seqs_free(&Qs);
  seqs_free(&Ds);
  return g_fail_total - fail0;
}

/* ---- random case construction ------------------------------------------------------ */

static const int64_t D_LIST[] = {1, 3, 17, 48, 96, 128, 1000};
static const int64_t L_LIST[] = {0, 1, 5, 7, 13, 33, 65, 301};
static const int64_t N_LIST[] = {0, 1, 3, 5};
static const lik_dtype F_LIST[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};

/* d from D_LIST; Lq, Ld, Nq, Nd uniform in [1, max]. */
static void random_sizes(case_t *c, int max_lq, int max_ld, int max_nq, int max_nd) {
  c->d = RNG_PICK(D_LIST);
  c->Lq = rng_int(1, max_lq);
  c->Ld = rng_int(1, max_ld);
  c->Nq = rng_int(1, max_nq);
  c->Nd = rng_int(1, max_nd);
}

static int64_t case_work(const case_t *c) {
  const int64_t nq = c->Nq ? c->Nq : 1, nd = c->Nd ? c->Nd : 1;
  return nq * nd * (c->Lq ? c->Lq : 1) * (c->Ld ? c->Ld : 1) * c->d;
}

/* Shrinks batch sizes, then lengths, until the reference work fits. */
static void cap_work(case_t *c, int64_t cap) {
  while (case_work(c) > cap && (c->Nq > 1 || c->Nd > 1)) {
    if (c->Nq >= c->Nd) c->Nq = c->Nq > 1 ? c->Nq / 2 : c->Nq;
    else c->Nd = c->Nd > 1 ? c->Nd / 2 : c->Nd;
  }
  while (case_work(c) > cap && (c->Lq > 13 || c->Ld > 13)) {
    if (c->Lq >= c->Ld) c->Lq = c->Lq / 2 + 1;
    else c->Ld = c->Ld / 2 + 1;
  }
}

static void random_masks(case_t *c) {
  c->qmask = rng_chance(0.5);
  c->dmask = rng_chance(0.6);
  c->qmdt = rng_chance(0.5) ? LIK_BOOL : LIK_U8;
  c->dmdt = rng_chance(0.5) ? LIK_BOOL : LIK_U8;
  c->q_pvalid = rng_chance(0.3) ? 1.0 : rng_range(0.2, 0.9);
  c->d_pvalid = rng_chance(0.3) ? 1.0 : rng_range(0.1, 0.9);
  c->q_allmasked = rng_chance(0.3) ? 0.3 : 0;
  c->d_allmasked = rng_chance(0.3) ? 0.3 : 0;
  c->garbage = (int)rng_int(0, 3);
}

static void random_strides(case_t *c) {
  const int kd = c->lay == LAY_KD;
  c->lQ = random_layout(3);
  c->lD = random_layout(kd ? 4 : 3);
  c->lqm = random_layout(2);
  c->ldm = random_layout(kd ? 3 : 2);
  c->lS = random_layout(2);
  c->lA = random_layout(3);
}

static case_t random_case(void) {
  case_t c = case_default();
  c.lay = (lay_t)rng_int(0, LAY_N - 1);
  c.dt = RNG_PICK(F_LIST);
  c.d = RNG_PICK(D_LIST);
  c.Lq = RNG_PICK(L_LIST);
  c.Ld = RNG_PICK(L_LIST);
  c.Nq = rng_chance(0.5) ? RNG_PICK(N_LIST) : rng_int(1, 7);
  c.Nd = rng_chance(0.5) ? RNG_PICK(N_LIST) : rng_int(1, 9);
  if (rng_chance(0.6)) random_masks(&c);
  if (rng_chance(0.5)) random_strides(&c);
  c.vals = (int)rng_int(0, 2);
  c.dup_tokens = rng_chance(0.3);
  c.normalize = rng_chance(0.25);
  c.special_tokens = c.normalize && rng_chance(0.5);
  c.threads = (int)rng_int(0, 3);
  c.want_argmax = rng_chance(0.7);
  c.null_empty = rng_chance(0.5);
  cap_work(&c, 1500000);
  return c;
}

/* ---- groups -------------------------------------------------------------------------- */

static void group_sizes(void) {
  group_begin("sizes");
  /* every d x every Lq and every Ld; batch sizes from {0, 1, small odd} */
  for (size_t di = 0; di < sizeof D_LIST / sizeof *D_LIST; di++)
    for (size_t li = 0; li < sizeof L_LIST / sizeof *L_LIST; li++)
      for (int side = 0; side < 2; side++) {
        case_t c = case_default();
        c.dt = F_LIST[(di + li + side) % 4];
        c.d = D_LIST[di];
        c.Lq = side ? RNG_PICK(L_LIST) : L_LIST[li];
        c.Ld = side ? L_LIST[li] : RNG_PICK(L_LIST);
        c.Nq = RNG_PICK(N_LIST);
        c.Nd = RNG_PICK(N_LIST);
        c.threads = (int)rng_int(0, 3);
        cap_work(&c, 1200000);
        run_case(&c);
      }
  /* long sequences (beyond any tile / block of tokens) with tiny d */
  for (int r = 0; r < 4; r++) {
    case_t c = case_default();
    c.dt = F_LIST[r];
    c.d = r < 2 ? 3 : 1;
    c.Lq = r & 1 ? 1100 : 7;
    c.Ld = r & 1 ? 9 : 4100;
    c.Nq = 1;
    c.Nd = 2;
    c.dmask = c.qmask = 1;
    c.q_pvalid = c.d_pvalid = 0.9;
    c.vals = r == 2 ? VAL_INT : VAL_RAND;
    run_case(&c);
  }
  /* one full-size case: d=1000, Lq=Ld=301 */
  case_t c = case_default();
  c.d = 1000;
  c.Lq = 301;
  c.Ld = 301;
  c.Nq = 1;
  c.Nd = 1;
  c.dt = RNG_PICK(F_LIST);
  run_case(&c);
  group_end();
}

static void group_dtypes(void) {
  group_begin("dtypes");
  for (int f = 0; f < 4; f++)
    for (int vals = 0; vals < 3; vals++)
      for (int r = 0; r < 4; r++) {
        case_t c = case_default();
        c.dt = F_LIST[f];
        c.vals = vals;
        c.lay = (lay_t)rng_int(0, LAY_N - 1);
        random_sizes(&c, 40, 70, 5, 7);
        cap_work(&c, 800000);
        run_case(&c);
      }
  group_end();
}

/* fp16/bf16 entries ~300: every product exceeds 65504 (must accumulate in fp32). */
static void group_fp16_range(void) {
  group_begin("fp16-range");
  const lik_dtype dts[] = {LIK_F16, LIK_BF16};
  for (int f = 0; f < 2; f++)
    for (int r = 0; r < 10; r++) {
      case_t c = case_default();
      c.dt = dts[f];
      c.vals = VAL_BIG;
      c.lay = (lay_t)(r % LAY_N);
      random_sizes(&c, 20, 40, 4, 5);
      if (r & 1) random_masks(&c);
      cap_work(&c, 500000);
      run_case(&c);
    }
  group_end();
}

/* fp16 subnormal queries (a conversion that flushes them to zero fails) and
 * values spanning 12 decades, every dtype and layout. */
static void group_half_values(void) {
  group_begin("half-values");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int r = 0; r < 8; r++) {
      case_t c = case_default();
      c.lay = (lay_t)lay;
      c.dt = F_LIST[r % 4];
      c.vals = r < 4 ? VAL_TINY : VAL_WIDE;
      random_sizes(&c, 20, 40, 4, 5);
      if (rng_chance(0.5)) random_strides(&c);
      c.normalize = r == 7;
      cap_work(&c, 300000);
      run_case(&c);
    }
  group_end();
}

static void group_layouts(void) {
  group_begin("layouts");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int f = 0; f < 4; f++)
      for (int r = 0; r < 3; r++) {
        case_t c = case_default();
        c.lay = (lay_t)lay;
        c.dt = F_LIST[f];
        c.d = RNG_PICK(D_LIST);
        c.Lq = RNG_PICK(L_LIST);
        c.Ld = RNG_PICK(L_LIST);
        c.Nq = r == 0 ? RNG_PICK(N_LIST) : rng_int(1, 6);
        c.Nd = r == 0 ? RNG_PICK(N_LIST) : rng_int(1, 6);
        c.null_empty = r == 0;
        c.want_argmax = r != 2;
        c.threads = r;
        cap_work(&c, 600000);
        run_case(&c);
      }
  group_end();
}

/* Negative similarities everywhere: a masked token read as 0 would win the max.
 * Masked tokens hold NaN / +Inf / -Inf / 1e30. */
static void group_masks(void) {
  group_begin("masks");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int r = 0; r < 8; r++) {
      case_t c = case_default();
      c.lay = (lay_t)lay;
      c.dt = F_LIST[r % 4];
      c.vals = VAL_NEG;
      c.qmask = r != 1;
      c.dmask = 1;
      c.qmdt = (r & 1) ? LIK_U8 : LIK_BOOL;
      c.dmdt = (r & 2) ? LIK_U8 : LIK_BOOL;
      c.q_pvalid = rng_range(0.3, 0.9);
      c.d_pvalid = rng_range(0.1, 0.8);
      c.q_allmasked = r >= 4 ? 0.3 : 0;
      c.d_allmasked = r >= 4 ? 0.35 : 0;
      c.garbage = r;
      random_sizes(&c, 34, 66, 5, 7);
      c.normalize = r == 7;
      cap_work(&c, 500000);
      run_case(&c);
    }
  /* fully masked query batch and fully masked document batch */
  for (int which = 0; which < 2; which++) {
    case_t c = case_default();
    c.vals = VAL_NEG;
    c.qmask = c.dmask = 1;
    if (which == 0) c.q_pvalid = 0;
    else c.d_pvalid = 0;
    c.garbage = which;
    run_case(&c);
  }
  group_end();
}

static void group_strides(void) {
  group_begin("strides");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int r = 0; r < 8; r++) {
      case_t c = case_default();
      c.lay = (lay_t)lay;
      c.dt = F_LIST[r % 4];
      random_sizes(&c, 34, 66, 5, 6);
      if (r & 1) random_masks(&c);
      random_strides(&c);
      if (r == 0) { /* transposed d/L axes everywhere it applies */
        c.lQ.perm = c.lD.perm = 1;
        c.lQ.step = c.lD.step = 1;
      }
      if (r == 2) { /* every other element, negative strides on every axis */
        c.lQ = (layout_t){0, 2, 0xF, 0};
        c.lD = (layout_t){0, 2, 0xF, 0};
        c.lS = (layout_t){0, 2, 0xF, 0};
        c.lA = (layout_t){1, 2, 0xF, 0};
      }
      cap_work(&c, 400000);
      run_case(&c);
    }
  /* broadcast views (stride 0): one query repeated, one doc repeated, KD
   * candidates broadcast over Nq, every feature of a token aliased (sk = 0),
   * every token of a document aliased (sl = 0) */
  for (int r = 0; r < 5; r++) {
    case_t c = case_default();
    c.lay = r == 2 ? LAY_KD : LAY_CROSS;
    c.Nq = 3;
    c.Nd = 4;
    c.Lq = 7;
    c.Ld = 13;
    c.d = 48;
    c.dt = F_LIST[r % 4];
    if (r == 0) c.lQ.bcast = 1;
    if (r == 1) c.lD.bcast = 1;
    if (r == 2) c.lD.bcast = 1; /* D[Nq, K, Ld, d] with sg = 0 */
    if (r == 3) c.lQ.bcast = 4;   /* Q strides[2] = 0 */
    if (r == 4) c.lD.bcast = 2;   /* D strides[1] = 0 */
    if (r >= 3) c.dt = F_LIST[r - 2];
    run_case(&c);
  }
  /* broadcast masks: one d_mask row for every document (stride 0), one
   * q_mask row for every query; KD d_mask broadcast over Nq */
  for (int r = 0; r < 6; r++) {
    case_t c = case_default();
    c.lay = r >= 4 ? LAY_KD : r == 3 ? LAY_PAIRS : LAY_CROSS;
    c.dt = F_LIST[r % 4];
    c.vals = VAL_NEG;
    c.Nq = 3;
    c.Nd = 5;
    c.Lq = 9;
    c.Ld = 17;
    c.d = 17;
    c.qmask = c.dmask = 1;
    c.qmdt = LIK_U8;
    c.q_pvalid = 0.7;
    c.d_pvalid = 0.5;
    c.garbage = r;
    c.lqm.bcast = r & 1;
    c.ldm.bcast = 1;
    run_case(&c);
  }
  group_end();
}

/* Integer data: exact arithmetic, so the argmax must equal the reference
 * exactly, with many exact ties (duplicated tokens, tiny value range). */
static void group_argmax_ties(void) {
  group_begin("argmax-ties");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int r = 0; r < 6; r++) {
      case_t c = case_default();
      c.lay = (lay_t)lay;
      c.dt = F_LIST[r % 4];
      c.vals = VAL_INT;
      c.dup_tokens = 1;
      c.d = r < 3 ? rng_int(1, 3) : RNG_PICK(D_LIST);
      c.Lq = rng_int(1, 33);
      c.Ld = rng_int(1, 65);
      c.Nq = rng_int(1, 4);
      c.Nd = rng_int(1, 5);
      if (r & 1) random_masks(&c);
      if (r >= 4) random_strides(&c);
      cap_work(&c, 400000);
      run_case(&c);
    }
  group_end();
}

static void group_normalize(void) {
  group_begin("normalize");
  for (int lay = 0; lay < LAY_N; lay++)
    for (int r = 0; r < 4; r++) {
      case_t c = case_default();
      c.lay = (lay_t)lay;
      c.dt = F_LIST[r];
      c.normalize = 1;
      c.special_tokens = 1;
      c.vals = r == 3 ? VAL_INT : VAL_RAND;
      random_sizes(&c, 20, 40, 4, 5);
      if (r & 1) random_masks(&c);
      cap_work(&c, 400000);
      run_case(&c);
    }
  /* a zero query token: every similarity is exactly 0, so the argmax is the
   * first valid doc token and the token contributes 0 */
  for (int f = 0; f < 4; f++) {
    case_t c = case_default();
    c.dt = F_LIST[f];
    c.normalize = 1;
    c.Nq = 1;
    c.Nd = 2;
    c.Lq = 3;
    c.Ld = 5;
    c.d = 17;
    c.dmask = 1;
    c.d_pvalid = 0.6;
    c.special_tokens = 1;
    run_case(&c);
  }
  {
    /* explicit: Q token 0 is zero, doc valid tokens from index 2 */
    case_begin("normalize zero query token (explicit)");
    float q[2 * 4] = {0, 0, 0, 0, 1, -2, 3, 0.5f};
    float dd[4 * 4] = {7, 7, 7, 7, -1, 2, 0.5f, 3, 2, -4, 6, 1, 0, 0, 0, 0};
    uint8_t dm[4] = {0, 1, 1, 1};
    lik_tensor Q = {q, LIK_F32, 2, {2, 4}, {4, 1}, LIK_CPU, 0};
    lik_tensor D = {dd, LIK_F32, 2, {4, 4}, {4, 1}, LIK_CPU, 0};
    lik_tensor M = {dm, LIK_U8, 1, {4}, {1}, LIK_CPU, 0};
    float s = -1;
    int32_t am[2] = {-7, -7};
    lik_tensor S = {&s, LIK_F32, 0, {0}, {0}, LIK_CPU, 0};
    lik_tensor A = {am, LIK_I32, 1, {2}, {1}, LIK_CPU, 0};
    lik_options o = LIK_OPTIONS_INIT;
    o.normalize = 1;
    lik_status st = lik_maxsim(&Q, &D, NULL, &M, &o, &S, &A);
    /* token 1 = (1,-2,3,.5)/|.| ; doc token 2 = (2,-4,6,1)/|.| is parallel: cos = 1 */
    const double qn = sqrt(1 + 4 + 9 + 0.25), dn = sqrt(4 + 16 + 36 + 1);
    const double expect = (2 + 8 + 18 + 0.5) / (qn * dn);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    CHECK(fabs(s - expect) <= 1e-6, "score %.9g, expected %.9g", s, expect);
    CHECK(am[0] == 1, "zero query token argmax %d, expected 1 (first valid, all ties at 0)",
          am[0]);
    CHECK(am[1] == 2, "argmax %d, expected 2", am[1]);
  }
  group_end();
}

/* A document scored alone equals the same document inside a padded batch
 * (padding masked and filled with garbage), bitwise; also with masked garbage
 * interleaved (scores bitwise, argmax remapped). */
static void group_padding(void) {
  group_begin("padding");
  for (int f = 0; f < 4; f++)
    for (int interleave = 0; interleave < 2; interleave++) {
      const lik_dtype dt = F_LIST[f];
      const int64_t Nq = rng_int(1, 3), Nd = rng_int(2, 6), Lq = rng_int(1, 33),
                    d = RNG_PICK(D_LIST) > 200 ? 96 : RNG_PICK(D_LIST);
      int64_t Ls[6], Lmax = 0;
      for (int64_t j = 0; j < Nd; j++) {
        Ls[j] = rng_int(1, 40);
        if (Ls[j] > Lmax) Lmax = Ls[j];
      }
      const int64_t Lpad = interleave ? 2 * Lmax + 3 : Lmax + rng_int(0, 5);
      case_begin("padding %s Nq=%lld Nd=%lld Lq=%lld d=%lld Lpad=%lld interleave=%d",
                 dtype_str(dt), (long long)Nq, (long long)Nd, (long long)Lq, (long long)d,
                 (long long)Lpad, interleave);
      int64_t qs[3] = {Nq, Lq, d}, bs[3] = {Nd, Lpad, d}, ms[2] = {Nd, Lpad};
      view_t vQ, vB, vM, vS, vA;
      view_make(&vQ, dt, 3, qs, LAYOUT_DENSE, 0);
      view_make(&vB, dt, 3, bs, LAYOUT_DENSE, 0);
      view_make(&vM, LIK_BOOL, 2, ms, LAYOUT_DENSE, 0);
      int64_t idx[4];
      for (int64_t f2 = 0; f2 < Nq * Lq * d; f2++) {
        t_unravel(&vQ.t, f2, idx);
        t_put(&vQ.t, idx, rng_range(-1, 1));
      }
      /* position map: pos[j][t] = batch position of doc token t */
      int64_t pos[6][40];
      for (int64_t j = 0; j < Nd; j++) {
        int64_t p = 0;
        for (int64_t t = 0; t < Ls[j]; t++) {
          if (interleave)
            while (rng_chance(0.4) && p < Lpad - (Ls[j] - t)) p++;
          pos[j][t] = p++;
        }
        for (int64_t l = 0; l < Lpad; l++) {
          idx[0] = j;
          idx[1] = l;
          t_put(&vM.t, idx, 0);
          for (int64_t k = 0; k < d; k++) {
            idx[2] = k;
            t_put(&vB.t, idx, garbage_value((int)(l + k)));
          }
        }
        for (int64_t t = 0; t < Ls[j]; t++) {
          idx[0] = j;
          idx[1] = pos[j][t];
          t_put(&vM.t, idx, 1);
          for (int64_t k = 0; k < d; k++) {
            idx[2] = k;
            t_put(&vB.t, idx, rng_range(-1, 1));
          }
        }
      }
      int64_t ss[2] = {Nq, Nd}, as[3] = {Nq, Nd, Lq};
      view_make(&vS, LIK_F32, 2, ss, LAYOUT_DENSE, 0);
      view_make(&vA, LIK_I32, 3, as, LAYOUT_DENSE, 0);
      lik_status st = lik_maxsim(&vQ.t, &vB.t, NULL, &vM.t, NULL, &vS.t, &vA.t);
      CHECK(st == LIK_OK, "batch: status %s: %s", lik_status_string(st), lik_last_error());
      for (int64_t j = 0; j < Nd && st == LIK_OK; j++) {
        /* the same document alone, 2-D [Ls, d], no mask */
        int64_t ds[2] = {Ls[j], d}, s1[1] = {Nq}, a1[2] = {Nq, Lq};
        view_t vD, vS1, vA1;
        view_make(&vD, dt, 2, ds, LAYOUT_DENSE, 0);
        for (int64_t t = 0; t < Ls[j]; t++)
          for (int64_t k = 0; k < d; k++) {
            int64_t bi[3] = {j, pos[j][t], k}, di[2] = {t, k};
            t_put(&vD.t, di, t_get(&vB.t, bi));
          }
        view_make(&vS1, LIK_F32, 1, s1, LAYOUT_DENSE, 0);
        view_make(&vA1, LIK_I32, 2, a1, LAYOUT_DENSE, 0);
        lik_status st1 = lik_maxsim(&vQ.t, &vD.t, NULL, NULL, NULL, &vS1.t, &vA1.t);
        CHECK(st1 == LIK_OK, "alone: status %s: %s", lik_status_string(st1), lik_last_error());
        /* reference for the lone doc as an absolute anchor */
        seqs_t Qs, Ds;
        seqs_alloc(&Qs, Nq, Lq, d, 0);
        seqs_alloc(&Ds, 1, Ls[j], d, 0);
        for (int64_t e = 0; e < Nq * Lq * d; e++) {
          t_unravel(&vQ.t, e, idx);
          Qs.x[e] = t_get(&vQ.t, idx);
        }
        for (int64_t e = 0; e < Ls[j] * d; e++) {
          t_unravel(&vD.t, e, idx);
          Ds.x[e] = t_get(&vD.t, idx);
        }
        for (int64_t i = 0; i < Nq && st1 == LIK_OK; i++) {
          int64_t bi[2] = {i, j}, si[1] = {i};
          const float b = (float)t_get(&vS.t, bi), a = (float)t_get(&vS1.t, si);
          CHECK(memcmp(&a, &b, 4) == 0,
                "(i=%lld, j=%lld): batch score %.9g != alone score %.9g (bitwise)",
                (long long)i, (long long)j, b, a);
          char where[64];
          snprintf(where, sizeof where, "alone (i=%lld, doc %lld)", (long long)i, (long long)j);
          int64_t ai[2] = {i, 0};
          check_pair(&Qs, i, &Ds, 0, a, &vA1.t, ai, 1, tol_for(dt, 0, 0), where);
          for (int64_t s = 0; s < Lq; s++) {
            int64_t bai[3] = {i, j, s}, aai[2] = {i, s};
            const int64_t ab = (int64_t)t_get(&vA.t, bai), aa = (int64_t)t_get(&vA1.t, aai);
            const int64_t expect = aa >= 0 && aa < Ls[j] ? pos[j][aa] : -1;
            CHECK(ab == expect, "(i=%lld, j=%lld, s=%lld): batch argmax %lld, alone %lld -> %lld",
                  (long long)i, (long long)j, (long long)s, (long long)ab, (long long)aa,
                  (long long)expect);
          }
        }
        seqs_free(&Qs);
        seqs_free(&Ds);
        view_free(&vD);
        view_free(&vS1);
        view_free(&vA1);
      }
      view_free(&vQ);
      view_free(&vB);
      view_free(&vM);
      view_free(&vS);
      view_free(&vA);
    }
  group_end();
}

/* num_threads = 1, 2, 3, 7: bitwise identical scores and argmax. */
static void group_threads(void) {
  group_begin("threads");
  for (int r = 0; r < 6; r++) {
    const lik_dtype dt = F_LIST[r % 4];
    const int kd = r >= 4;
    const int64_t Nq = 5, Nd = r == 1 ? 2 : kd ? 5 : 13, Lq = 33, Ld = 65, d = r == 1 ? 1000 : 128;
    case_begin("threads %s %s Nq=%lld Nd=%lld Lq=%lld Ld=%lld d=%lld", dtype_str(dt),
               kd ? "KD" : "cross", (long long)Nq, (long long)Nd, (long long)Lq, (long long)Ld,
               (long long)d);
    int64_t qs[3] = {Nq, Lq, d}, ds[4], dms[3], ss[2] = {Nq, Nd}, as[3] = {Nq, Nd, Lq};
    int dnd;
    if (kd) {
      ds[0] = Nq, ds[1] = Nd, ds[2] = Ld, ds[3] = d, dnd = 4;
    } else {
      ds[0] = Nd, ds[1] = Ld, ds[2] = d, dnd = 3;
    }
    for (int i = 0; i < dnd - 1; i++) dms[i] = ds[i];
    view_t vQ, vD, vM;
    view_make(&vQ, dt, 3, qs, LAYOUT_DENSE, 0);
    view_make(&vD, dt, dnd, ds, LAYOUT_DENSE, 0);
    view_make(&vM, LIK_U8, dnd - 1, dms, LAYOUT_DENSE, 0);
    int64_t idx[4];
    for (int64_t e = 0; e < t_numel(&vQ.t); e++) {
      t_unravel(&vQ.t, e, idx);
      t_put(&vQ.t, idx, rng_range(-1, 1));
    }
    for (int64_t e = 0; e < t_numel(&vD.t); e++) {
      t_unravel(&vD.t, e, idx);
      t_put(&vD.t, idx, rng_range(-1, 1));
    }
    for (int64_t e = 0; e < t_numel(&vM.t); e++) {
      t_unravel(&vM.t, e, idx);
      t_put(&vM.t, idx, rng_chance(0.8));
    }
    const int nts[6] = {1, 2, 3, 7, 16, 64};
    float *s0 = NULL;
    int32_t *a0 = NULL;
    for (int ti = 0; ti < 6; ti++) {
      view_t vS, vA;
      view_make(&vS, LIK_F32, 2, ss, LAYOUT_DENSE, 0);
      view_make(&vA, LIK_I32, 3, as, LAYOUT_DENSE, 0);
      lik_options o = LIK_OPTIONS_INIT;
      o.num_threads = nts[ti];
      o.normalize = r == 3;
      lik_status st = lik_maxsim(&vQ.t, &vD.t, NULL, &vM.t, &o, &vS.t, &vA.t);
      CHECK(st == LIK_OK, "threads=%d: status %s: %s", nts[ti], lik_status_string(st),
            lik_last_error());
      if (ti == 0) {
        s0 = (float *)malloc(sizeof(float) * Nq * Nd);
        a0 = (int32_t *)malloc(sizeof(int32_t) * Nq * Nd * Lq);
        memcpy(s0, vS.t.data, sizeof(float) * Nq * Nd);
        memcpy(a0, vA.t.data, sizeof(int32_t) * Nq * Nd * Lq);
        /* anchor the single-thread result to the reference */
        seqs_t Qs, Ds;
        seqs_alloc(&Qs, Nq, Lq, d, 0);
        seqs_alloc(&Ds, kd ? Nq * Nd : Nd, Ld, d, 1);
        for (int64_t e = 0; e < t_numel(&vQ.t); e++) {
          t_unravel(&vQ.t, e, idx);
          Qs.x[e] = t_get(&vQ.t, idx);
        }
        for (int64_t e = 0; e < t_numel(&vD.t); e++) {
          t_unravel(&vD.t, e, idx);
          Ds.x[e] = t_get(&vD.t, idx);
        }
        for (int64_t e = 0; e < t_numel(&vM.t); e++) {
          t_unravel(&vM.t, e, idx);
          Ds.m[e] = t_get(&vM.t, idx) != 0;
        }
        if (o.normalize) {
          Qs.norm = Ds.norm = 1;
        }
        for (int64_t i = 0; i < Nq; i++)
          for (int64_t j = 0; j < Nd; j++) {
            int64_t ai[3] = {i, j, 0};
            char where[64];
            snprintf(where, sizeof where, "threads=1 (i=%lld, j=%lld)", (long long)i,
                     (long long)j);
            check_pair(&Qs, i, &Ds, kd ? i * Nd + j : j, s0[i * Nd + j], &vA.t, ai, 2,
                       tol_for(dt, o.normalize, 0), where);
          }
        seqs_free(&Qs);
        seqs_free(&Ds);
      } else {
        CHECK(memcmp(s0, vS.t.data, sizeof(float) * Nq * Nd) == 0,
              "threads=%d: scores differ bitwise from threads=1", nts[ti]);
        CHECK(memcmp(a0, vA.t.data, sizeof(int32_t) * Nq * Nd * Lq) == 0,
              "threads=%d: argmax differs from threads=1", nts[ti]);
      }
      view_free(&vS);
      view_free(&vA);
    }
    free(s0);
    free(a0);
    view_free(&vQ);
    view_free(&vD);
    view_free(&vM);
  }
  group_end();
}

/* ---- 64-bit offsets -------------------------------------------------------------------- */

/* A view whose element offsets exceed 2^31, backed by MAP_NORESERVE memory of
 * which only a few pages are touched.  Returns 0 if the mapping failed. */
typedef struct {
  lik_tensor t;
  void *map;
  size_t bytes;
} bigview_t;

static int bigview_make(bigview_t *b, lik_dtype dt, int ndim, const int64_t *shape,
                        const int64_t *strides) {
  memset(b, 0, sizeof *b);
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < ndim; i++) {
    const int64_t ext = (shape[i] - 1) * strides[i];
    if (ext < 0) lo += ext;
    else hi += ext;
  }
  const size_t es = dtype_size(dt);
  b->bytes = (size_t)(hi - lo + 1) * es;
  b->map = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (b->map == MAP_FAILED) {
    b->map = NULL;
    return 0;
  }
  b->t.data = (unsigned char *)b->map + (size_t)(-lo) * es;
  b->t.dtype = dt;
  b->t.ndim = ndim;
  b->t.device = LIK_CPU;
  for (int i = 0; i < ndim; i++) {
    b->t.shape[i] = shape[i];
    b->t.strides[i] = strides[i];
  }
  return 1;
}

static void bigview_free(bigview_t *b) {
  if (b->map) munmap(b->map, b->bytes);
  b->map = NULL;
}

static void group_large_offsets(void) {
  group_begin("large-offsets");
  const int64_t BIG = (int64_t)1 << 31;
  for (int variant = 0; variant < 4; variant++) {
    /* 0: D [2,3,4] with strides[0] = 2^31+7; 1: the same negative;
     * 2: KD D [2,2,3,4] with sg = 2^31+11, d_mask with sg > 2^31;
     * 3: Q token stride 2^31+1, q_mask stride > 2^31, scores stride > 2^31 */
    case_begin("large offsets variant %d", variant);
    const int64_t Nq = 2, Lq = 3, d = 4, Ld = 3, Nd = 2;
    bigview_t bQ, bD, bM, bqm, bS;
    memset(&bqm, 0, sizeof bqm);
    memset(&bS, 0, sizeof bS);
    memset(&bM, 0, sizeof bM);
    int ok = 1;
    int64_t qshape[3] = {Nq, Lq, d}, qstr[3] = {Lq * d, d, 1};
    if (variant == 3) {
      qstr[0] = 4;
      qstr[1] = BIG + 1;
      qstr[2] = 1;
    }
    ok &= bigview_make(&bQ, LIK_F32, 3, qshape, qstr);
    const int kd = variant == 2;
    int64_t dshape[4], dstr[4], mshape[3], mstr[3];
    int dnd;
    if (kd) {
      int64_t s4[4] = {Nq, Nd, Ld, d}, st4[4] = {BIG + 11, Ld * d, d, 1};
      memcpy(dshape, s4, sizeof s4);
      memcpy(dstr, st4, sizeof st4);
      dnd = 4;
      int64_t m3[3] = {Nq, Nd, Ld}, ms3[3] = {BIG + 13, Ld, 1};
      memcpy(mshape, m3, sizeof m3);
      memcpy(mstr, ms3, sizeof ms3);
    } else {
      int64_t s3[3] = {Nd, Ld, d}, st3[3] = {variant == 1 ? -(BIG + 7) : BIG + 7, d, 1};
      memcpy(dshape, s3, sizeof s3);
      memcpy(dstr, st3, sizeof st3);
      dnd = 3;
      int64_t m2[2] = {Nd, Ld}, ms2[2] = {BIG + 5, 1};
      memcpy(mshape, m2, sizeof m2);
      memcpy(mstr, ms2, sizeof ms2);
    }
    ok &= bigview_make(&bD, LIK_F32, dnd, dshape, dstr);
    ok &= bigview_make(&bM, LIK_U8, dnd - 1, mshape, mstr);
    int64_t sshape[2] = {Nq, Nd}, sstr[2] = {1, Nq};
    if (variant == 3) sstr[1] = BIG + 3;
    ok &= bigview_make(&bS, LIK_F32, 2, sshape, sstr);
    if (variant == 3) {
      int64_t qms[2] = {Nq, Lq}, qmst[2] = {1, BIG + 9};
      ok &= bigview_make(&bqm, LIK_BOOL, 2, qms, qmst);
    }
    if (!ok) {
      printf("  note: large-offset variant %d skipped (mmap of NORESERVE memory failed)\n",
             variant);
    } else {
      seqs_t Qs, Ds;
      seqs_alloc(&Qs, Nq, Lq, d, variant == 3);
      seqs_alloc(&Ds, kd ? Nq * Nd : Nd, Ld, d, 1);
      int64_t idx[4];
      for (int64_t e = 0; e < Nq * Lq * d; e++) {
        t_unravel(&bQ.t, e, idx);
        t_put(&bQ.t, idx, (double)rng_int(-9, 9) / 4);
        Qs.x[e] = t_get(&bQ.t, idx);
      }
      for (int64_t e = 0; e < t_numel(&bD.t); e++) {
        t_unravel(&bD.t, e, idx);
        t_put(&bD.t, idx, -(double)rng_int(1, 9) / 4);
        Ds.x[e] = t_get(&bD.t, idx);
      }
      for (int64_t e = 0; e < t_numel(&bM.t); e++) {
        t_unravel(&bM.t, e, idx);
        Ds.m[e] = (e % Ld) != 1; /* token 1 of each doc masked */
        t_put(&bM.t, idx, Ds.m[e]);
        if (!Ds.m[e]) /* garbage into the masked token */
          for (int64_t k = 0; k < d; k++) {
            idx[dnd - 1] = k;
            t_put(&bD.t, idx, NAN);
          }
      }
      if (variant == 3)
        for (int64_t e = 0; e < Nq * Lq; e++) {
          t_unravel(&bqm.t, e, idx);
          Qs.m[e] = e != 2;
          t_put(&bqm.t, idx, Qs.m[e]);
        }
      lik_status st = lik_maxsim(&bQ.t, &bD.t, variant == 3 ? &bqm.t : NULL, &bM.t, NULL,
                                 &bS.t, NULL);
      CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
      for (int64_t i = 0; i < Nq && st == LIK_OK; i++)
        for (int64_t j = 0; j < Nd; j++) {
          int64_t si[2] = {i, j};
          char where[64];
          snprintf(where, sizeof where, "(i=%lld, j=%lld)", (long long)i, (long long)j);
          check_pair(&Qs, i, &Ds, kd ? i * Nd + j : j, t_get(&bS.t, si), NULL, NULL, 0,
                     tol_for(LIK_F32, 0, 1), where);
        }
      seqs_free(&Qs);
      seqs_free(&Ds);
    }
    bigview_free(&bQ);
    bigview_free(&bD);
    bigview_free(&bM);
    bigview_free(&bS);
    bigview_free(&bqm);
  }
  group_end();
}

static void group_random(void) {
  group_begin("random");
  for (int r = 0; r < 150; r++) {
    case_t c = random_case();
    run_case(&c);
  }
  group_end();
}

/* The forced ISA must be honoured when the CPU can run it. */
static void group_isa(void) {
  group_begin("isa");
  case_begin("lik_cpu_isa");
  const char *isa = lik_cpu_isa();
  const char *env = getenv("LIK_CPU_ISA");
  /* this architecture's paths, portable first, each at most the best */
  const char *best = lik_test_best_isa();
  int ibest = 0, ienv = -1, iisa = -1;
  for (int k = 0; k < LIK_TEST_NISAS; k++) {
    if (!strcmp(LIK_TEST_ISAS[k], best)) ibest = k;
    if (env && !strcmp(LIK_TEST_ISAS[k], env)) ienv = k;
    if (isa && !strcmp(LIK_TEST_ISAS[k], isa)) iisa = k;
  }
  CHECK(iisa >= 0, "lik_cpu_isa() = '%s', not a path of this architecture", isa ? isa : "(null)");
  if (iisa < 0) { group_end(); return; }
  if (ienv >= 0 && ienv <= ibest) /* a path the CPU runs is honoured */
    CHECK(!strcmp(isa, env), "LIK_CPU_ISA=%s (the CPU runs %s) but lik_cpu_isa()=%s", env, best,
          isa);
  else /* unset, unknown, another architecture's or beyond the CPU: the best path */
    CHECK(!strcmp(isa, best), "LIK_CPU_ISA=%s but lik_cpu_isa()=%s, not the best path (%s)",
          env ? env : "(unset)", isa, best);
  CHECK(!strcmp(isa, lik_cpu_isa()), "lik_cpu_isa() not stable");
  group_end();
}

typedef struct {
  const char *name;
  void (*fn)(void);
} group_def;

int main(int argc, char **argv) {
  test_init("test_maxsim");
  const group_def groups[] = {
      {"isa", group_isa},         {"sizes", group_sizes},
      {"dtypes", group_dtypes},   {"fp16-range", group_fp16_range},
      {"half-values", group_half_values},
      {"layouts", group_layouts}, {"masks", group_masks},
      {"strides", group_strides}, {"argmax-ties", group_argmax_ties},
      {"normalize", group_normalize}, {"padding", group_padding},
      {"threads", group_threads}, {"large-offsets", group_large_offsets},
      {"random", group_random},
  };
  const int ng = (int)(sizeof groups / sizeof *groups);
  for (int g = 0; g < ng; g++) {
    int run = argc < 2;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], groups[g].name)) run = 1;
    if (run) groups[g].fn();
  }
  return test_finish("test_maxsim");
}
