/*
 * test_harness.c — one harness over every backend: each MaxSim op (cross,
 * KD, pairs, varlen, packed pairs), forward and backward, on every backend
 * the build has (the CPU paths portable / avx2 / avx512, or portable / neon /
 * sve on aarch64, through a lik_context each; CUDA when the build has it and a device is present, else skipped at
 * run time), against the float64 reference (src/ref/maxsim_ref.h).
 *
 * Cases are random with a fresh seed (printed; LIK_TEST_SEED=<n> repeats
 * it): d in {1, 3, 17, 48, 96, 1000}, lengths 1 and tails of no tile size,
 * empty batches, masks with NaN / Inf garbage in the masked tokens (the
 * reference holds the garbage too and must not read it), strided views
 * (transposed, stepped, negative strides), F32 / F16 / BF16 / F64 inputs,
 * F64 scores for F64 inputs, F32 / F64 grad_scores.  Scores and argmax are
 * checked against the reference (near ties within rounding accepted); the
 * gradients against the reference backward over the kernel's own argmax,
 * masked tokens exactly 0.
 *
 *   test_harness [cases]      (default 300 per backend)
 */
#include "lik_test_util.h"
#include "lik_experimental.h"

#ifdef LIK_TEST_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

enum { OP_CROSS, OP_KD, OP_PAIRS, OP_VARLEN, OP_PACKED_PAIRS, OP_COUNT };
static const char *const OP_NAMES[] = {"cross", "kd", "pairs", "varlen", "packed_pairs"};
static const int64_t DIMS[] = {1, 3, 17, 48, 96, 1000};
static const int64_t LENS[] = {1, 1, 2, 5, 13, 17, 33, 65, 77};
static const lik_dtype DTYPES[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};

/* One backend: a CPU context (its ISA) or the CUDA device. */
typedef struct {
  const char *name;
  lik_context *ctx;
  int cuda;
} backend_t;

/* The logical problem: sequences as runs of rows of x [rows, d]. */
typedef struct {
  int op, normalize, threads, f64_scores, gs_f64;
  lik_dtype dt;
  int64_t d, nq, nd, K, lq, ld, npairs; /* padded: lq / ld; packed: maxima */
  double *qx, *dx;                     /* [rows, d], rounded to dt; garbage where masked */
  uint8_t *qm, *dm;                    /* [rows] */
  int64_t *qoff, *doff;                /* [nq + 1], [nseq_d + 1] */
  int64_t nseq_d, qrows, drows;
  int64_t *pq, *pd;                    /* packed pairs */
  int64_t grid[2];
  int ngrid;
} problem_t;

/* Output cell g's (query sequence, document sequence). */
static void cell_pair(const problem_t *p, int64_t g, int64_t *qi, int64_t *dj) {
  switch (p->op) {
    case OP_CROSS: case OP_VARLEN: *qi = g / p->nd; *dj = g % p->nd; break;
    case OP_KD: *qi = g / p->K; *dj = g; break;
    case OP_PAIRS: *qi = g; *dj = g; break;
    default: *qi = p->pq[g]; *dj = p->pd[g]; break;
  }
}

static int64_t ncells(const problem_t *p) {
  return p->ngrid == 1 ? p->grid[0] : p->grid[0] * p->grid[1];
}

static void cell_index(const problem_t *p, int64_t g, int64_t *idx) {
  if (p->ngrid == 1)
    idx[0] = g;
  else {
    idx[0] = g / p->grid[1];
    idx[1] = g % p->grid[1];
  }
}

static void make_seqs(int64_t n, int packed, int64_t L, int64_t **off, int64_t *rows,
                      int64_t *maxlen) {
  *off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
  (*off)[0] = 0;
  *maxlen = packed ? 0 : L;
  for (int64_t i = 0; i < n; i++) {
    const int64_t len = packed ? (rng_chance(0.1) ? 0 : RNG_PICK(LENS) + rng_int(0, 3)) : L;
    (*off)[i + 1] = (*off)[i] + len;
    if (len > *maxlen) *maxlen = len;
  }
  *rows = (*off)[n];
}

static void fill_rows(const problem_t *p, int64_t rows, int is_doc, double **x, uint8_t **m) {
  *x = (double *)malloc(sizeof(double) * (size_t)(rows * p->d + 1));
  *m = (uint8_t *)malloc((size_t)rows + 1);
  for (int64_t r = 0; r < rows; r++) {
    (*m)[r] = !rng_chance(is_doc ? 0.25 : 0.15);
    for (int64_t k = 0; k < p->d; k++)
      (*x)[r * p->d + k] = (*m)[r] ? round_to(p->dt, rng_range(-1, 1))
                                   : garbage_value((int)rng_int(0, 3));
  }
}

static void problem_make(problem_t *p) {
  memset(p, 0, sizeof *p);
  p->op = (int)rng_int(0, OP_COUNT - 1);
  p->dt = RNG_PICK(DTYPES);
  p->d = RNG_PICK(DIMS);
  p->normalize = rng_chance(0.5);
  p->threads = (int)rng_int(1, 3);
  p->f64_scores = p->dt == LIK_F64 && rng_chance(0.6);
  p->gs_f64 = rng_chance(0.5);
  const int packed = p->op >= OP_VARLEN;
  p->nq = rng_int(0, p->d == 1000 ? 2 : 3); /* bound the reference's work */
  p->nd = p->op == OP_KD ? rng_int(0, 3) : p->op == OP_PAIRS ? p->nq : rng_int(0, 4);
  p->K = p->op == OP_KD ? p->nd : 0;
  p->nseq_d = p->op == OP_KD ? p->nq * p->K : p->nd;
  const int64_t lq = RNG_PICK(LENS), ld = RNG_PICK(LENS) + rng_int(0, 3);
  make_seqs(p->nq, packed, lq, &p->qoff, &p->qrows, &p->lq);
  make_seqs(p->nseq_d, packed, ld, &p->doff, &p->drows, &p->ld);
  fill_rows(p, p->qrows, 0, &p->qx, &p->qm);
  fill_rows(p, p->drows, 1, &p->dx, &p->dm);
  if (p->op == OP_PACKED_PAIRS) {
    p->npairs = p->nq && p->nd ? rng_int(0, 6) : 0;
    p->pq = (int64_t *)malloc(sizeof(int64_t) * (size_t)(p->npairs + 1));
    p->pd = (int64_t *)malloc(sizeof(int64_t) * (size_t)(p->npairs + 1));
    for (int64_t i = 0; i < p->npairs; i++) {
      p->pq[i] = rng_int(0, p->nq - 1);
      p->pd[i] = rng_int(0, p->nd - 1);
    }
  }
  if (p->op == OP_PAIRS || p->op == OP_PACKED_PAIRS) {
    p->ngrid = 1;
    p->grid[0] = p->op == OP_PAIRS ? p->nq : p->npairs;
  } else {
    p->ngrid = 2;
    p->grid[0] = p->nq;
    p->grid[1] = p->op == OP_KD ? p->K : p->nd;
  }
}

static void problem_free(problem_t *p) {
  free(p->qx), free(p->dx), free(p->qm), free(p->dm);
  free(p->qoff), free(p->doff), free(p->pq), free(p->pd);
}

/* ---- views of the problem (CPU; the CUDA backend mirrors them) ------------------- */

/* The tensors of a call: inputs, then the outputs (from T_S on). */
enum { T_Q, T_D, T_QM, T_DM, T_CUQ, T_CUD, T_PQ, T_PD, T_G, T_S, T_A, T_GQ, T_GD, T_N };

typedef struct {
  view_t w[T_N];
} views_t;

/* Writes the flat row-major values v into view w (its logical order is v's). */
static void put_flat(view_t *w, const double *v, const uint8_t *m) {
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < t_numel(&w->t); f++) {
    t_unravel(&w->t, f, idx);
    t_put(&w->t, idx, v ? v[f] : (double)m[f]);
  }
}

static void put_index(view_t *w, const int64_t *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) t_put(&w->t, &i, (double)v[i]);
}

static void views_make(const problem_t *p, views_t *v) {
  memset(v, 0, sizeof *v);
  int64_t qs[4], ds[5];
  int qn = 0, dn = 0;
  if (p->op >= OP_VARLEN) {
    qs[qn++] = p->qrows;
    ds[dn++] = p->drows;
  } else {
    qs[qn++] = p->nq;
    qs[qn++] = p->lq;
    if (p->op == OP_KD) ds[dn++] = p->nq;
    ds[dn++] = p->op == OP_KD ? p->K : p->nd;
    ds[dn++] = p->ld;
  }
  qs[qn++] = p->d;
  ds[dn++] = p->d;
  view_make(&v->w[T_Q], p->dt, qn, qs, random_layout(qn), 0xFF);
  view_make(&v->w[T_D], p->dt, dn, ds, random_layout(dn), 0xFF);
  view_make(&v->w[T_QM], rng_chance(0.5) ? LIK_BOOL : LIK_U8, qn - 1, qs, random_layout(qn - 1), 0x5A);
  view_make(&v->w[T_DM], rng_chance(0.5) ? LIK_BOOL : LIK_U8, dn - 1, ds, random_layout(dn - 1), 0x5A);
  put_flat(&v->w[T_Q], p->qx, NULL);
  put_flat(&v->w[T_D], p->dx, NULL);
  put_flat(&v->w[T_QM], NULL, p->qm);
  put_flat(&v->w[T_DM], NULL, p->dm);
  if (p->op >= OP_VARLEN) {
    const int64_t nq1 = p->nq + 1, nd1 = p->nd + 1;
    view_make(&v->w[T_CUQ], rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &nq1, random_layout(1), 0);
    view_make(&v->w[T_CUD], rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &nd1, random_layout(1), 0);
    put_index(&v->w[T_CUQ], p->qoff, nq1);
    put_index(&v->w[T_CUD], p->doff, nd1);
  }
  if (p->op == OP_PACKED_PAIRS) {
    view_make(&v->w[T_PQ], LIK_I64, 1, &p->npairs, random_layout(1), 0);
    view_make(&v->w[T_PD], LIK_I32, 1, &p->npairs, random_layout(1), 0);
    put_index(&v->w[T_PQ], p->pq, p->npairs);
    put_index(&v->w[T_PD], p->pd, p->npairs);
  }
  int64_t as[3] = {p->grid[0], p->grid[1], 0};
  as[p->ngrid] = p->lq;
  view_make(&v->w[T_S], p->f64_scores ? LIK_F64 : LIK_F32, p->ngrid, p->grid, random_layout(p->ngrid),
            0xFF);
  view_make(&v->w[T_A], LIK_I32, p->ngrid + 1, as, random_layout(p->ngrid + 1), 0xCD);
  view_make(&v->w[T_G], p->gs_f64 ? LIK_F64 : LIK_F32, p->ngrid, p->grid, random_layout(p->ngrid), 0);
  for (int64_t g = 0; g < ncells(p); g++) {
    int64_t idx[2];
    cell_index(p, g, idx);
    t_put(&v->w[T_G].t, idx, rng_range(-1, 1));
  }
  view_make(&v->w[T_GQ], p->dt, qn, qs, random_layout(qn), 0xFF);
  view_make(&v->w[T_GD], p->dt, dn, ds, random_layout(dn), 0xFF);
}

static void views_free(views_t *v) {
  for (int i = 0; i < T_N; i++) view_free(&v->w[i]);
}

/* ---- running an op on a backend ------------------------------------------------------ */

static lik_status run_forward(const problem_t *p, lik_tensor *c, const lik_options *o) {
  switch (p->op) {
    case OP_CROSS: case OP_KD: return lik_maxsim(&c[T_Q], &c[T_D], &c[T_QM], &c[T_DM], o, &c[T_S], &c[T_A]);
    case OP_PAIRS: return lik_maxsim_pairs(&c[T_Q], &c[T_D], &c[T_QM], &c[T_DM], o, &c[T_S], &c[T_A]);
    case OP_VARLEN:
      return lik_maxsim_varlen(&c[T_Q], &c[T_D], &c[T_CUQ], &c[T_CUD], &c[T_QM], &c[T_DM], o, &c[T_S], &c[T_A]);
    default:
      return lik_score_pairs_packed(&c[T_Q], &c[T_D], &c[T_CUQ], &c[T_CUD], &c[T_PQ], &c[T_PD], &c[T_QM],
                                    &c[T_DM], o, &c[T_S], &c[T_A]);
  }
}

static lik_status run_backward(const problem_t *p, lik_tensor *c, const lik_options *o) {
  switch (p->op) {
    case OP_CROSS: case OP_KD:
      return lik_maxsim_backward(&c[T_Q], &c[T_D], &c[T_QM], &c[T_DM], &c[T_A], &c[T_G], o, &c[T_GQ], &c[T_GD]);
    case OP_PAIRS:
      return lik_maxsim_pairs_backward(&c[T_Q], &c[T_D], &c[T_QM], &c[T_DM], &c[T_A], &c[T_G], o, &c[T_GQ],
                                       &c[T_GD]);
    case OP_VARLEN:
      return lik_maxsim_varlen_backward(&c[T_Q], &c[T_D], &c[T_CUQ], &c[T_CUD], &c[T_QM], &c[T_DM], &c[T_A],
                                        &c[T_G], o, &c[T_GQ], &c[T_GD]);
    default:
      return lik_score_pairs_packed_backward(&c[T_Q], &c[T_D], &c[T_CUQ], &c[T_CUD], &c[T_PQ], &c[T_PD],
                                             &c[T_QM], &c[T_DM], &c[T_A], &c[T_G], o, &c[T_GQ], &c[T_GD]);
  }
}

#ifdef LIK_TEST_HAS_CUDA
/* The view's whole allocation copied to the device: same strides, same offset. */
static lik_tensor to_device(const view_t *w, void **dev) {
  lik_tensor t = w->t;
  *dev = NULL;
  if (!w->base) return t;
  if (cudaMalloc(dev, w->bytes) != cudaSuccess ||
      cudaMemcpy(*dev, w->base, w->bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    failf("cudaMalloc / cudaMemcpy of %zu bytes failed", w->bytes);
    return t;
  }
  t.data = (unsigned char *)*dev + ((unsigned char *)w->t.data - w->base);
  t.device = LIK_CUDA;
  t.device_id = 0;
  return t;
}

static void from_device(view_t *w, void *dev) {
  if (dev && cudaMemcpy(w->base, dev, w->bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    failf("cudaMemcpy back of %zu bytes failed", w->bytes);
}
#endif

/* Forward then backward on backend b, results back in v's host views. */
static lik_status run_on(const backend_t *b, const problem_t *p, views_t *v, lik_status *bst) {
  lik_tensor c[T_N];
  for (int i = 0; i < T_N; i++) c[i] = v->w[i].t;
  lik_options o = LIK_OPTIONS_INIT;
  o.normalize = p->normalize;
  o.num_threads = p->threads;
  o.context = b->ctx;
  if (!b->cuda) {
    const lik_status st = run_forward(p, c, &o);
    *bst = st ? st : run_backward(p, c, &o);
    return st;
  }
#ifdef LIK_TEST_HAS_CUDA
  void *dev[T_N];
  for (int i = 0; i < T_N; i++) c[i] = to_device(&v->w[i], &dev[i]);
  const lik_status st = run_forward(p, c, &o);
  *bst = st ? st : run_backward(p, c, &o);
  if (cudaDeviceSynchronize() != cudaSuccess) failf("CUDA error after the calls");
  for (int i = T_S; i < T_N; i++) from_device(&v->w[i], dev[i]);
  for (int i = 0; i < T_N; i++) cudaFree(dev[i]);
  return st;
#else
  return LIK_ERR_UNSUPPORTED;
#endif
}

/* ---- checks against the reference ------------------------------------------------- */

static tol_t tolerance(const problem_t *p, int cuda) {
  tol_t t = tol_for(p->dt, p->normalize, 0);
  if (p->f64_scores) t.out_rel = 1e-15; /* F64 scores: the double sum itself */
  if (cuda && p->dt != LIK_F64) t.rel = t.tok_rel = 2e-5; /* fp32: 3xTF32 */
  return t;
}

static void check_forward(const problem_t *p, const views_t *v, tol_t tol) {
  const lik_ref_seqs Q = {p->qx, p->qoff, p->d, p->qm}, D = {p->dx, p->doff, p->d, p->dm};
  int32_t *ram = (int32_t *)malloc(sizeof(int32_t) * (size_t)(p->lq + 1));
  for (int64_t g = 0; g < ncells(p) && g_reports < g_max_reports; g++) {
    int64_t qi, dj, idx[3];
    cell_pair(p, g, &qi, &dj);
    cell_index(p, g, idx);
    double scale;
    const double ref = lik_ref_maxsim_pair(&Q, qi, &D, dj, p->normalize, ram, &scale);
    const double got = t_get(&v->w[T_S].t, idx);
    const double lim = tol.rel * scale + tol.out_rel * fabs(ref);
    CHECK(fabs(got - ref) <= lim, "cell %lld (q %lld, d %lld): score %.17g, reference %.17g "
          "(|diff| %.3g > tol %.3g)", (long long)g, (long long)qi, (long long)dj, got, ref,
          fabs(got - ref), lim);
    const int64_t len = p->qoff[qi + 1] - p->qoff[qi];
    for (int64_t s = 0; s < p->lq; s++) {
      idx[p->ngrid] = s;
      const int64_t a = (int64_t)t_get(&v->w[T_A].t, idx), r = s < len ? ram[s] : -1;
      g_checks_group++;
      if (a == r) continue;
      int ok = 0; /* a near tie under rounding may pick another valid token */
      if (r >= 0 && a >= 0 && a < p->doff[dj + 1] - p->doff[dj] &&
          p->dm[p->doff[dj] + a]) {
        double ra, aa;
        const double rv = lik_ref_sim(&Q, qi, s, &D, dj, r, p->normalize, &ra);
        const double av = lik_ref_sim(&Q, qi, s, &D, dj, a, p->normalize, &aa);
        ok = fabs(rv - av) <= tol.tok_rel * (ra > aa ? ra : aa);
      }
      CHECK(ok, "cell %lld: argmax[%lld] = %lld, reference %lld", (long long)g, (long long)s,
            (long long)a, (long long)r);
    }
  }
  free(ram);
}

static double grad_tol(lik_dtype dt) {
  return dt == LIK_BF16 ? 1.6e-2 : dt == LIK_F16 ? 2e-3 : dt == LIK_F32 ? 2e-5 : 1e-11;
}

/* The spacing of the dtype's subnormals: the absolute floor of rounding. */
static double min_step(lik_dtype dt) {
  return dt == LIK_F16 ? 0x1p-24 : dt == LIK_BF16 ? 0x1p-133 : dt == LIK_F32 ? 0x1p-149 : 0.0;
}

/* One side's gradient view against ref [rows, d] with per-element error
 * scales; masked rows exactly 0. */
static void check_grad(const char *name, const view_t *w, const double *ref,
                       const double *scale, const uint8_t *m, int64_t d, lik_dtype dt) {
  int64_t zero_bad = 0, bad = 0, worst = -1, idx[LIK_MAX_DIMS];
  double worst_ratio = 0.0;
  for (int64_t f = 0; f < t_numel(&w->t); f++) {
    t_unravel(&w->t, f, idx);
    const double got = t_get(&w->t, idx), err = fabs(got - ref[f]);
    if (!m[f / d] && got != 0.0) zero_bad++;
    if (err <= grad_tol(dt) * scale[f] + min_step(dt)) continue;
    bad++;
    const double r = err / (scale[f] > 0 ? scale[f] : 1e-300);
    if (!(r <= worst_ratio)) worst_ratio = r, worst = f; /* NaN sticks */
  }
  CHECK(zero_bad == 0, "%s: %lld elements of masked tokens are not 0", name, (long long)zero_bad);
  CHECK(bad == 0, "%s: %lld elements off; worst element %lld: got %.9g, reference %.9g, "
        "scale %.3g (tol %.3g)", name, (long long)bad, (long long)worst,
        worst >= 0 ? t_get(&w->t, (t_unravel(&w->t, worst, idx), idx)) : 0.0,
        worst >= 0 ? ref[worst] : 0.0, worst >= 0 ? scale[worst] : 0.0, grad_tol(dt));
}

static void check_backward(const problem_t *p, const views_t *v) {
  const lik_ref_seqs Q = {p->qx, p->qoff, p->d, p->qm}, D = {p->dx, p->doff, p->d, p->dm};
  const size_t nq = (size_t)(p->qrows * p->d + 1), nd = (size_t)(p->drows * p->d + 1);
  const lik_ref_grads out = {(double *)calloc(nq, sizeof(double)),
                             (double *)calloc(nd, sizeof(double)),
                             (double *)calloc(nq, sizeof(double)),
                             (double *)calloc(nd, sizeof(double))};
  int32_t *am = (int32_t *)malloc(sizeof(int32_t) * (size_t)(p->lq + 1));
  for (int64_t g = 0; g < ncells(p); g++) {
    int64_t qi, dj, idx[3];
    cell_pair(p, g, &qi, &dj);
    cell_index(p, g, idx);
    const double gs = t_get(&v->w[T_G].t, idx);
    for (int64_t s = 0; s < p->qoff[qi + 1] - p->qoff[qi]; s++) {
      idx[p->ngrid] = s;
      am[s] = (int32_t)t_get(&v->w[T_A].t, idx);
    }
    lik_ref_maxsim_pair_backward(&Q, qi, &D, dj, p->normalize, am, gs, &out);
  }
  check_grad("grad_Q", &v->w[T_GQ], out.gq, out.gq_scale, p->qm, p->d, p->dt);
  check_grad("grad_D", &v->w[T_GD], out.gd, out.gd_scale, p->dm, p->d, p->dt);
  free(out.gq), free(out.gd), free(out.gq_scale), free(out.gd_scale), free(am);
}

static void run_case(const backend_t *b, const problem_t *p) {
  case_begin("%s %s %s d=%lld nq=%lld nd=%lld lq=%lld ld=%lld norm=%d threads=%d scores=%s "
             "grad_scores=%s",
             b->name, OP_NAMES[p->op], dtype_str(p->dt), (long long)p->d, (long long)p->nq,
             (long long)p->nd, (long long)p->lq, (long long)p->ld, p->normalize, p->threads,
             p->f64_scores ? "f64" : "f32", p->gs_f64 ? "f64" : "f32");
  views_t v;
  views_make(p, &v);
  lik_status bst = LIK_OK;
  const lik_status st = run_on(b, p, &v, &bst);
  CHECK(st == LIK_OK, "forward: %s: %s", lik_status_string(st), lik_last_error());
  CHECK(st != LIK_OK || bst == LIK_OK, "backward: %s: %s", lik_status_string(bst),
        lik_last_error());
  if (st == LIK_OK) check_forward(p, &v, tolerance(p, b->cuda));
  if (st == LIK_OK && bst == LIK_OK) check_backward(p, &v);
  views_free(&v);
}

static int cuda_present(void) {
#ifdef LIK_TEST_HAS_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return 0;
#endif
}

int main(int argc, char **argv) {
  test_init("test_harness");
  const int cases = argc > 1 ? atoi(argv[1]) : 300;
  backend_t bs[LIK_TEST_NISAS + 1];
  int nb = 0;
  for (int i = 0; i < LIK_TEST_NISAS; i++) {
    lik_context_options co = {0};
    co.cpu_isa = LIK_TEST_ISAS[i];
    bs[nb].name = LIK_TEST_ISAS[i];
    bs[nb].cuda = 0;
    if (lik_context_create(&co, &bs[nb].ctx) == LIK_OK) nb++;
  }
  if (cuda_present()) {
    bs[nb].name = "cuda";
    bs[nb].ctx = NULL;
    bs[nb].cuda = 1;
    nb++;
  } else {
    printf("cuda: skipped (%s)\n", "no CUDA backend in this build, or no device");
  }
  for (int i = 0; i < nb; i++) {
    group_begin(bs[i].name);
    for (int c = 0; c < cases; c++) {
      problem_t p;
      problem_make(&p);
      run_case(&bs[i], &p);
      problem_free(&p);
    }
    group_end();
  }
  for (int i = 0; i < nb; i++) lik_context_free(bs[i].ctx);
  return test_finish("test_harness");
}
