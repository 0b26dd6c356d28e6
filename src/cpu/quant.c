/*
 * quant.c — the CPU low-bit MaxSim (lik_maxsim_scaled, lik_maxsim_binary) and
 * the quantisers (lik_quantize_int8 / _binary).
 *
 * Driver: every query is packed once into panels of LIK_QT_ROWS valid
 * tokens; a task is a block of documents, each packed once (valid tokens
 * compacted into tiles of LIK_QT_LANES, the last tile padded by repeating its
 * last token, which never changes a max) and scored against every query by
 * the ISA's tile kernel (quant_internal.h).  Each score has one writer and a
 * fixed order (query tokens summed ascending), so results do not depend on
 * the thread count.  int8 values are read clamped to [-127, 127] (so the
 * AVX2 sign trick is exact; lik_quantize_int8 never writes -128).  Binary
 * documents with int8 queries unpack to +-1 int8 and reuse the int8 tile.
 * fp8 (a compatibility path: no fp8 arithmetic on x86) decodes to fp32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/quant.h"
#include "cpu_internal.h"
#include "quant_internal.h"

enum { R = LIK_QT_ROWS, L = LIK_QT_LANES };

/* ---- portable tiles ---------------------------------------------------------- */

static void i8_tile_portable(const uint8_t *qp, const int8_t *dp, const int32_t *dsum,
                             int64_t kg, const float *sq, const float *sd, float *m) {
  (void)dsum;
  for (int r = 0; r < R; r++)
    for (int l = 0; l < L; l++) {
      int64_t dot = 0;
      for (int64_t g = 0; g < kg; g++)
        for (int b = 0; b < 4; b++)
          dot += (int64_t)(int8_t)qp[(g * R + r) * 4 + b] * dp[(g * L + l) * 4 + b];
      const float v = (float)dot * (sq[r] * sd[l]);
      m[r * L + l] = v > m[r * L + l] ? v : m[r * L + l];
    }
}

static void bits_tile_portable(const uint64_t *qw, const uint64_t *dw, int64_t nw, int64_t d,
                               float *m) {
  for (int r = 0; r < R; r++)
    for (int l = 0; l < L; l++) {
      int64_t pc = 0;
      for (int64_t w = 0; w < nw; w++) pc += __builtin_popcountll(qw[r * nw + w] ^ dw[l * nw + w]);
      const float v = (float)(d - 2 * pc);
      m[r * L + l] = v > m[r * L + l] ? v : m[r * L + l];
    }
}

const lik_quant_kernels lik_quant_kernels_portable = {"portable", 0, i8_tile_portable,
                                                      bits_tile_portable};

/* fp8 decoded to fp32: qf [R][d], df [d][L]; one fp32 chain per (r, l). */
static void f32_tile(const float *qf, const float *df, int64_t d, const float *sq,
                     const float *sd, float *m) {
  for (int r = 0; r < R; r++) {
    float acc[L] = {0};
    for (int64_t k = 0; k < d; k++) {
      const float a = qf[r * d + k];
      for (int l = 0; l < L; l++) acc[l] += a * df[k * L + l];
    }
    for (int l = 0; l < L; l++) {
      const float v = acc[l] * (sq[r] * sd[l]);
      m[r * L + l] = v > m[r * L + l] ? v : m[r * L + l];
    }
  }
}

/* The value of an fp8 byte: e4m3fn (bias 7, no infinities, S.1111.111 NaN) or
 * e5m2 (bias 15, IEEE-like). */
static float f8_value(uint8_t b, int e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (b & 0x7f) >> mbits, man = b & ((1 << mbits) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e5m2 && e == 31) return man ? NAN : sign * INFINITY;
  if (!e5m2 && e == 15 && man == 7) return NAN;
  if (e == 0) return sign * ldexpf((float)man, 1 - bias - mbits);
  return sign * ldexpf((float)((1 << mbits) | man), e - bias - mbits);
}

/* ---- packing ------------------------------------------------------------------ */

typedef struct {
  const lik_quant_problem *p;
  lik_i8_tile_fn i8_tile;
  lik_bits_tile_fn bits_tile;
  uint8_t q_xor;
  int64_t kg, nw;        /* int8: groups of 4 features; bits: 64-bit words */
  int64_t qpanel_bytes;  /* one packed query panel */
  int64_t tile_data;     /* bytes of a doc tile's values (then dsum, sd) */
  int64_t tile_bytes;
  uint8_t *qbuf;         /* panels of every query */
  float *qscale;         /* [panels * R] */
  int64_t *qfirst;       /* [nq + 1]: first panel of query i */
  int32_t *qvalid;       /* [nq]: valid tokens of query i */
  uint8_t *dscratch;     /* per thread: tiles of one document + token list */
  int64_t dscratch_bytes, block;
  float lut[256];
} qrun;

static const uint8_t *tok_ptr(const lik_seqs *s, int64_t n, int64_t l) {
  return (const uint8_t *)s->data + lik_token_offset(s, n, l);
}

static int8_t i8_at(const uint8_t *t, int64_t sk, int64_t k) {
  const int8_t v = (int8_t)t[k * sk];
  return v < -127 ? -127 : v;
}

static int bit_at(const uint8_t *t, int64_t sk, int64_t k) {
  return (t[(k / 8) * sk] >> (7 - k % 8)) & 1;
}

static void pack_words(const uint8_t *t, int64_t sk, int64_t d, int64_t nw, uint64_t *w) {
  memset(w, 0, (size_t)nw * 8);
  uint8_t *b = (uint8_t *)w;
  const int64_t nb = lik_bits_bytes(d);
  for (int64_t i = 0; i < nb; i++) b[i] = t[i * sk];
  if (d % 8) b[nb - 1] &= (uint8_t)(0xff00u >> (d % 8));
}

/* Valid tokens of sequence n (mask) into tok; returns their number. */
static int64_t valid_tokens(const lik_seqs *s, const lik_mask *m, int64_t n, int32_t *tok) {
  int64_t c = 0;
  for (int64_t l = 0; l < s->len; l++)
    if (lik_mask_valid(m, s, n, l)) tok[c++] = (int32_t)l;
  return c;
}

/* Query token (n, l) into row r of panel qp. */
static void pack_q_row(const qrun *c, int64_t n, int64_t l, int r, uint8_t *qp) {
  const lik_quant_problem *p = c->p;
  const uint8_t *t = tok_ptr(&p->q, n, l);
  const int64_t sk = p->q.sk, d = p->d;
  switch (p->kind) {
    case LIK_QK_INT8:
    case LIK_QK_I8_BITS:
      for (int64_t k = 0; k < d; k++)
        qp[((k / 4) * R + r) * 4 + k % 4] = (uint8_t)i8_at(t, sk, k) ^ c->q_xor;
      break;
    case LIK_QK_FP8:
      for (int64_t k = 0; k < d; k++) ((float *)qp)[r * d + k] = c->lut[t[k * sk]];
      break;
    case LIK_QK_BITS:
      pack_words(t, sk, d, c->nw, (uint64_t *)qp + r * c->nw);
      break;
  }
}

/* Document token (n, l) into lane ln of tile dt. */
static void pack_d_lane(const qrun *c, int64_t n, int64_t l, int ln, uint8_t *dt) {
  const lik_quant_problem *p = c->p;
  const uint8_t *t = tok_ptr(&p->d_seqs, n, l);
  const int64_t sk = p->d_seqs.sk, d = p->d;
  int32_t *dsum = (int32_t *)(dt + c->tile_data);
  float *sd = (float *)(dsum + L);
  int32_t sum = 0;
  sd[ln] = p->scale_d.data ? lik_scale_at(&p->scale_d, n, l) : 1.0f;
  switch (p->kind) {
    case LIK_QK_INT8:
    case LIK_QK_I8_BITS:
      for (int64_t k = 0; k < d; k++) {
        const int8_t v = p->kind == LIK_QK_INT8 ? i8_at(t, sk, k) : (int8_t)(2 * bit_at(t, sk, k) - 1);
        ((int8_t *)dt)[((k / 4) * L + ln) * 4 + k % 4] = v;
        sum += v;
      }
      break;
    case LIK_QK_FP8:
      for (int64_t k = 0; k < d; k++) ((float *)dt)[k * L + ln] = c->lut[t[k * sk]];
      break;
    case LIK_QK_BITS:
      pack_words(t, sk, d, c->nw, (uint64_t *)dt + ln * c->nw);
      break;
  }
  dsum[ln] = sum;
}

/* ---- scoring ------------------------------------------------------------------- */

static void run_tile(const qrun *c, const uint8_t *qp, const float *sq, const uint8_t *dt,
                     float *m) {
  const int32_t *dsum = (const int32_t *)(dt + c->tile_data);
  const float *sd = (const float *)(dsum + L);
  switch (c->p->kind) {
    case LIK_QK_INT8:
    case LIK_QK_I8_BITS:
      c->i8_tile(qp, (const int8_t *)dt, dsum, c->kg, sq, sd, m);
      break;
    case LIK_QK_FP8:
      f32_tile((const float *)qp, (const float *)dt, c->p->d, sq, sd, m);
      break;
    case LIK_QK_BITS:
      c->bits_tile((const uint64_t *)qp, (const uint64_t *)dt, c->nw, c->p->d, m);
      break;
  }
}

/* score of query i against the packed document (ntiles tiles at dtiles). */
static float score_one(const qrun *c, int64_t i, const uint8_t *dtiles, int64_t ntiles) {
  float total = 0.0f;
  for (int64_t pn = c->qfirst[i]; pn < c->qfirst[i + 1]; pn++) {
    float m[R * L];
    for (int x = 0; x < R * L; x++) m[x] = -INFINITY;
    const uint8_t *qp = c->qbuf + pn * c->qpanel_bytes;
    for (int64_t t = 0; t < ntiles; t++)
      run_tile(c, qp, c->qscale + pn * R, dtiles + t * c->tile_bytes, m);
    const int64_t rows = c->qvalid[i] - (pn - c->qfirst[i]) * R;
    for (int r = 0; r < R && r < rows; r++) {
      float mx = -INFINITY;
      for (int l = 0; l < L; l++) mx = m[r * L + l] > mx ? m[r * L + l] : mx;
      if (mx > -INFINITY) total += mx;
    }
  }
  return total;
}

static void doc_task(void *ctx, int tid, int64_t task) {
  const qrun *c = (const qrun *)ctx;
  const lik_quant_problem *p = c->p;
  uint8_t *tiles = c->dscratch + (int64_t)tid * c->dscratch_bytes;
  const int64_t ntmax = (p->d_seqs.len + L - 1) / L;
  int32_t *tok = (int32_t *)(tiles + ntmax * c->tile_bytes);
  const int64_t nq = p->q.count, j1 = (task + 1) * c->block;
  for (int64_t j = task * c->block; j < j1 && j < p->d_seqs.count; j++) {
    const int64_t nv = valid_tokens(&p->d_seqs, &p->d_mask, j, tok);
    const int64_t ntiles = (nv + L - 1) / L;
    for (int64_t x = 0; x < ntiles * L; x++) {
      uint8_t *dt = tiles + (x / L) * c->tile_bytes;
      if (x % L == 0) memset(dt, 0, (size_t)c->tile_bytes);
      pack_d_lane(c, j, tok[x < nv ? x : nv - 1], (int)(x % L), dt);
    }
    for (int64_t i = 0; i < nq; i++)
      p->scores[i * p->score_si + j * p->score_sj] = nv ? score_one(c, i, tiles, ntiles) : 0.0f;
  }
}

static lik_status alloc_fail(const char *what, int64_t n) {
  return lik_fail(LIK_ERR_ALLOC, "lik: cannot allocate %s (%lld bytes)", what, (long long)n);
}

/* Pointers and sizes of c; nonzero when a size does not fit. */
static int plan(qrun *c, int nthreads, int64_t *qbytes, int64_t *panels) {
  const lik_quant_problem *p = c->p;
  const int64_t d = p->d;
  c->kg = (d + 3) / 4;
  c->nw = (d + 63) / 64;
  int64_t qrow, lane;
  switch (p->kind) {
    case LIK_QK_FP8: qrow = d * 4; lane = d * 4; break;
    case LIK_QK_BITS: qrow = c->nw * 8; lane = c->nw * 8; break;
    default: qrow = c->kg * 4; lane = c->kg * 4; break;
  }
  int64_t ppq = (p->q.len + R - 1) / R, t;
  if (lik_mul_i64(qrow, R, &c->qpanel_bytes) || lik_mul_i64(lane, L, &c->tile_data) ||
      lik_add_i64(c->tile_data, L * 8 + 63, &t))
    return 1;
  c->tile_bytes = t / 64 * 64;
  const int64_t ntmax = (p->d_seqs.len + L - 1) / L;
  if (lik_mul_i64(ppq, p->q.count, panels) || lik_mul_i64(*panels, c->qpanel_bytes, qbytes) ||
      lik_mul_i64(ntmax, c->tile_bytes, &t) || lik_add_i64(t, p->d_seqs.len * 4 + 64, &t))
    return 1;
  c->dscratch_bytes = t / 64 * 64;
  return lik_mul_i64(c->dscratch_bytes, nthreads, &t);
}

lik_status lik_cpu_maxsim_quant(const lik_quant_problem *p) {
  qrun c;
  memset(&c, 0, sizeof c);
  c.p = p;
  const int level = lik_cpu_level_for(p->context);
  const lik_quant_kernels *k = &lik_quant_kernels_portable;
#if defined(LIK_CPU_X86)
  if (level == 3) k = &lik_quant_kernels_vnni;
  else if (level >= 1) k = &lik_quant_kernels_avx2;
#endif
  if ((p->d + 3) / 4 * 4 > LIK_QT_KMAX) k = &lik_quant_kernels_portable; /* int64 sums */
  c.i8_tile = k->i8_tile;
  c.bits_tile = k->bits_tile;
  c.q_xor = k->q_xor;
  if (p->kind == LIK_QK_FP8)
    for (int b = 0; b < 256; b++) c.lut[b] = f8_value((uint8_t)b, p->q.dtype == LIK_F8E5M2);
  int nthreads = p->num_threads;
  const int64_t nd = p->d_seqs.count;
  c.block = nd / ((int64_t)nthreads * 8);
  c.block = c.block < 1 ? 1 : c.block > 64 ? 64 : c.block;
  const int64_t ntasks = (nd + c.block - 1) / c.block;
  if (ntasks < nthreads) nthreads = (int)ntasks;
  int64_t qbytes, panels;
  if (plan(&c, nthreads, &qbytes, &panels))
    return lik_fail(LIK_ERR_ALLOC, "lik: scratch for Nq=%lld, Lq=%lld, Ld=%lld, d=%lld does not fit "
                    "int64", (long long)p->q.count, (long long)p->q.len,
                    (long long)p->d_seqs.len, (long long)p->d);
  const int64_t nq = p->q.count, scratch = c.dscratch_bytes * nthreads;
  c.qbuf = malloc((size_t)qbytes + 1);
  c.qscale = malloc((size_t)panels * R * sizeof(float) + 1);
  c.qfirst = malloc((size_t)(nq + 1) * sizeof(int64_t));
  c.qvalid = malloc((size_t)nq * sizeof(int32_t) + 1);
  c.dscratch = aligned_alloc(64, (size_t)scratch);
  int32_t *tok = malloc((size_t)p->q.len * sizeof(int32_t) + 1);
  lik_status st = LIK_OK;
  if (!c.qbuf || !c.qscale || !c.qfirst || !c.qvalid || !c.dscratch || !tok) {
    st = alloc_fail("packed queries and document tiles", qbytes + scratch);
  } else {
    memset(c.qbuf, c.q_xor, (size_t)qbytes); /* padding rows: q = 0 */
    int64_t pn = 0;
    for (int64_t i = 0; i < nq; i++) {
      const int64_t nv = valid_tokens(&p->q, &p->q_mask, i, tok);
      c.qfirst[i] = pn;
      c.qvalid[i] = (int32_t)nv;
      for (int64_t x = 0; x < (nv + R - 1) / R * R; x++) {
        uint8_t *qp = c.qbuf + (pn + x / R) * c.qpanel_bytes;
        if (p->kind != LIK_QK_INT8 && p->kind != LIK_QK_I8_BITS && x % R == 0)
          memset(qp, 0, (size_t)c.qpanel_bytes);
        if (x < nv) pack_q_row(&c, i, tok[x], (int)(x % R), qp);
        c.qscale[(pn + x / R) * R + x % R] =
            x >= nv ? 0.0f : p->scale_q.data ? lik_scale_at(&p->scale_q, i, tok[x]) : 1.0f;
      }
      pn += (nv + R - 1) / R;
    }
    c.qfirst[nq] = pn;
    lik_parallel_run(nthreads, ntasks, doc_task, &c);
  }
  free(c.qbuf);
  free(c.qscale);
  free(c.qfirst);
  free(c.qvalid);
  free(c.dscratch);
  free(tok);
  return st;
}

/* ---- quantisers ------------------------------------------------------------------ */

enum { QUANT_BLOCK = 512 };

static float x_at(const lik_quantize_problem *p, int64_t off) {
  return p->dtype == LIK_F64 ? (float)((const double *)p->x)[off] : lik_load_f32(p->x, p->dtype, off);
}

static void quant_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  const lik_quantize_problem *p = (const lik_quantize_problem *)ctx;
  int64_t ntok = 1;
  for (int i = 0; i < p->nlead; i++) ntok *= p->lead[i];
  for (int64_t t = task * QUANT_BLOCK; t < (task + 1) * QUANT_BLOCK && t < ntok; t++) {
    int64_t xo = 0, oo = 0, so = 0, rest = t;
    for (int i = p->nlead - 1; i >= 0; i--) {
      const int64_t ix = rest % p->lead[i];
      rest /= p->lead[i];
      xo += ix * p->sx[i];
      oo += ix * p->so[i];
      so += ix * p->ss[i];
    }
    uint8_t *out = (uint8_t *)p->out;
    if (!p->scale) {
      for (int64_t b = 0; b < lik_bits_bytes(p->d); b++) {
        uint8_t v = 0;
        for (int64_t k = b * 8; k < b * 8 + 8 && k < p->d; k++)
          if (x_at(p, xo + k * p->sxk) > 0.0f) v |= (uint8_t)(0x80u >> (k % 8));
        out[oo + b * p->sok] = v;
      }
      continue;
    }
    float amax = 0.0f, ss = 0.0f;
    for (int64_t k = 0; k < p->d; k++) {
      const float x = x_at(p, xo + k * p->sxk);
      amax = fabsf(x) > amax ? fabsf(x) : amax;
      ss += x * x;
    }
    const float scale = amax / 127.0f;
    for (int64_t k = 0; k < p->d; k++) {
      float r = scale > 0.0f ? nearbyintf(x_at(p, xo + k * p->sxk) / scale) : 0.0f;
      if (!(r > -127.0f)) r = -127.0f;
      if (r > 127.0f) r = 127.0f;
      out[oo + k * p->sok] = (uint8_t)(int8_t)r;
    }
    p->scale[so] = p->normalize ? scale / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS) : scale;
  }
}

void lik_cpu_quantize(const lik_quantize_problem *p) {
  int64_t ntok = 1;
  for (int i = 0; i < p->nlead; i++) ntok *= p->lead[i];
  lik_parallel_run(p->num_threads, (ntok + QUANT_BLOCK - 1) / QUANT_BLOCK, quant_task, (void *)p);
}
