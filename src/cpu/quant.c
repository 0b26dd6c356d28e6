/*
 * quant.c — the CPU low-bit MaxSim (lik_maxsim_scaled, lik_maxsim_binary) and
 * the quantisers (lik_quantize_int8 / _binary).
 *
 * Driver: the valid tokens of every query are packed once into panels of
 * LIK_QT_LANES lanes; a task is a block of documents, whose valid tokens are
 * the rows the ISA's tile kernel (quant_internal.h) runs over every panel,
 * keeping a running max of scale_D * dot per lane (so the max never needs a
 * horizontal reduction); the query's |scale_Q| then multiplies the max
 * (pack_q_lane).  Rows are read in place when they are contiguous int8 with
 * d % 4 == 0, else copied once per document.  Each score has one writer and
 * a fixed order (query tokens summed ascending), so results do not depend on
 * the thread count.  Query int8 values are read clamped to [-127, 127] (so
 * the AVX2 sign trick is exact; lik_quantize_int8 never writes -128).
 * Binary documents with int8 queries unpack to +-1 int8 rows and reuse the
 * int8 tile.  fp8 (a compatibility path: no fp8 arithmetic on x86) decodes
 * to fp32.
 */
#include <math.h>
#include <string.h>

#include "../core/checked.h"
#include "../core/quant.h"
#include "cpu_internal.h"
#include "quant_internal.h"

enum { L = LIK_QT_LANES };

/* ---- portable tiles ---------------------------------------------------------- */

void lik_i8_tile_portable(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                          const float *sd, int64_t nrows, int64_t kg, float *m) {
  (void)qsum;
  for (int64_t r = 0; r < nrows; r++)
    for (int l = 0; l < L; l++) {
      int64_t dot = 0;
      for (int64_t k = 0; k < kg * 4; k++) dot += (int64_t)rows[r][k] * qp[((k / 4) * L + l) * 4 + k % 4];
      const float v = (float)dot * sd[r];
      m[l] = v > m[l] ? v : m[l];
    }
}

static void bits_tile_portable(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                               int64_t nw, int64_t d, float *m) {
  lik_bits_tile_body(qw, rows, nrows, nw, d, m);
}

const lik_quant_kernels lik_quant_kernels_portable = {"portable", lik_i8_tile_portable,
                                                      bits_tile_portable};

/* fp8 decoded to fp32: qf [d][L] (lanes), rows of d fp32; one fp32 chain per
 * (row, lane), k ascending. */
static void f32_tile(const float *qf, const float *const *rows, const float *sd, int64_t nrows,
                     int64_t d, float *m) {
  for (int64_t r = 0; r < nrows; r++) {
    float acc[L] = {0};
    for (int64_t k = 0; k < d; k++) {
      const float a = rows[r][k];
      for (int l = 0; l < L; l++) acc[l] += a * qf[k * L + l];
    }
    for (int l = 0; l < L; l++) {
      const float v = acc[l] * sd[r];
      m[l] = v > m[l] ? v : m[l];
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

/* Sign bits of a byte as eight +-1 int8, dimension order (MSB first). */
static uint64_t sign_bytes(uint8_t b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)(uint8_t)((b >> (7 - i)) & 1 ? 1 : -1) << (8 * i);
  return v;
}

/* ---- packing ------------------------------------------------------------------ */

typedef struct {
  const lik_quant_problem *p;
  lik_i8_tile_fn i8_tile;
  lik_bits_tile_fn bits_tile;
  int64_t kg, nw;        /* int8: groups of 4 features; bits: 64-bit words */
  int64_t panel_bytes;   /* one packed query panel: values, then qsum, sq */
  int64_t row_bytes;     /* one copied document row */
  int in_place;          /* document rows read in place (contiguous int8, d % 4 == 0) */
  uint8_t *qbuf;         /* panels of every query */
  int64_t *qfirst;       /* [nq + 1]: first panel of query i */
  int32_t *qvalid;       /* [nq]: valid tokens of query i */
  uint8_t *dscratch;     /* per thread: rows, row pointers, sd, token list */
  int64_t dscratch_bytes, block;
  float lut[256];        /* fp8 values */
  uint64_t signs[256];   /* sign bits -> eight +-1 int8 */
} qrun;

static const uint8_t *tok_ptr(const lik_seqs *s, int64_t n, int64_t l) {
  return (const uint8_t *)s->data + lik_token_offset(s, n, l);
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

/* Query token (n, l) into lane ln of panel qp (zeroed), with |scale_Q|
 * beside it and its values negated where scale_Q is negative (exact: int8
 * in [-127, 127], fp8 a sign), so that the query scale leaves the max:
 * max_t scale_Q (scale_D dot) = |scale_Q| max_t (scale_D (sign dot)). */
static void pack_q_lane(const qrun *c, int64_t n, int64_t l, int ln, uint8_t *qp) {
  const lik_quant_problem *p = c->p;
  const uint8_t *t = tok_ptr(&p->q, n, l);
  const int64_t sk = p->q.sk, d = p->d;
  int32_t *qsum = (int32_t *)(qp + c->panel_bytes) - 2 * L;
  float *sq = (float *)(qsum + L);
  const float s = p->scale_q.data ? lik_scale_at(&p->scale_q, n, l) : 1.0f;
  const int neg = signbit(s) != 0;
  sq[ln] = fabsf(s);
  switch (p->kind) {
    case LIK_QK_INT8:
    case LIK_QK_I8_BITS:
      for (int64_t k = 0; k < d; k++) {
        int8_t v = (int8_t)t[k * sk] < -127 ? -127 : (int8_t)t[k * sk];
        v = neg ? (int8_t)-v : v;
        ((int8_t *)qp)[((k / 4) * L + ln) * 4 + k % 4] = v;
        qsum[ln] += v;
      }
      break;
    case LIK_QK_FP8:
      for (int64_t k = 0; k < d; k++) ((float *)qp)[k * L + ln] = neg ? -c->lut[t[k * sk]] : c->lut[t[k * sk]];
      break;
    case LIK_QK_BITS:
      pack_words(t, sk, d, c->nw, (uint64_t *)qp + ln * c->nw);
      break;
  }
}

/* Document token (n, l) as a row: in place, or copied to dst. */
static const void *doc_row(const qrun *c, int64_t n, int64_t l, uint8_t *dst) {
  const lik_quant_problem *p = c->p;
  const uint8_t *t = tok_ptr(&p->d_seqs, n, l);
  const int64_t sk = p->d_seqs.sk, d = p->d;
  if (c->in_place) return t;
  memset(dst, 0, (size_t)c->row_bytes);
  switch (p->kind) {
    case LIK_QK_INT8:
      for (int64_t k = 0; k < d; k++) dst[k] = t[k * sk];
      break;
    case LIK_QK_I8_BITS:
      for (int64_t b = 0; b < lik_bits_bytes(d); b++) {
        const uint64_t v = c->signs[t[b * sk]];
        memcpy(dst + 8 * b, &v, (size_t)(d - 8 * b < 8 ? d - 8 * b : 8));
      }
      break;
    case LIK_QK_FP8:
      for (int64_t k = 0; k < d; k++) ((float *)dst)[k] = c->lut[t[k * sk]];
      break;
    case LIK_QK_BITS:
      pack_words(t, sk, d, c->nw, (uint64_t *)dst);
      break;
  }
  return dst;
}

/* ---- scoring ------------------------------------------------------------------- */

/* score of query i against nrows document rows. */
static float score_one(const qrun *c, int64_t i, const void *const *rows, const float *sd,
                       int64_t nrows) {
  const lik_quant_problem *p = c->p;
  float total = 0.0f;
  for (int64_t pn = c->qfirst[i]; pn < c->qfirst[i + 1]; pn++) {
    float m[L];
    for (int l = 0; l < L; l++) m[l] = -INFINITY;
    const uint8_t *qp = c->qbuf + pn * c->panel_bytes;
    const int32_t *qsum = (const int32_t *)(qp + c->panel_bytes) - 2 * L;
    const float *sq = (const float *)(qsum + L);
    switch (p->kind) {
      case LIK_QK_INT8:
      case LIK_QK_I8_BITS:
        c->i8_tile((const int8_t *)qp, qsum, (const int8_t *const *)rows, sd, nrows, c->kg, m);
        break;
      case LIK_QK_FP8:
        f32_tile((const float *)qp, (const float *const *)rows, sd, nrows, p->d, m);
        break;
      case LIK_QK_BITS:
        c->bits_tile((const uint64_t *)qp, (const uint64_t *const *)rows, nrows, c->nw, p->d, m);
        break;
    }
    const int64_t lanes = c->qvalid[i] - (pn - c->qfirst[i]) * L;
    for (int l = 0; l < L && l < lanes; l++) {
      const float v = sq[l] * m[l]; /* NaN (a NaN scale, 0 * inf) or -inf: not summed */
      if (v > -INFINITY) total += v;
    }
  }
  return total;
}

static void doc_task(void *ctx, int tid, int64_t task) {
  const qrun *c = (const qrun *)ctx;
  const lik_quant_problem *p = c->p;
  const int64_t ld = p->d_seqs.len;
  uint8_t *rowbuf = c->dscratch + (int64_t)tid * c->dscratch_bytes;
  const void **rows = (const void **)(rowbuf + (c->in_place ? 0 : ld * c->row_bytes));
  float *sd = (float *)(rows + ld);
  int32_t *tok = (int32_t *)(sd + ld);
  const int64_t j1 = (task + 1) * c->block;
  for (int64_t j = task * c->block; j < j1 && j < p->d_seqs.count; j++) {
    const int64_t nv = valid_tokens(&p->d_seqs, &p->d_mask, j, tok);
    for (int64_t x = 0; x < nv; x++) {
      rows[x] = doc_row(c, j, tok[x], rowbuf + x * c->row_bytes);
      sd[x] = p->scale_d.data ? lik_scale_at(&p->scale_d, j, tok[x]) : 1.0f;
    }
    for (int64_t i = 0; i < p->q.count; i++)
      p->scores[i * p->score_si + j * p->score_sj] = nv ? score_one(c, i, rows, sd, nv) : 0.0f;
  }
}

/* Sizes of c; nonzero when one does not fit. */
static int plan(qrun *c, int nthreads, int64_t *qbytes, int64_t *panels) {
  const lik_quant_problem *p = c->p;
  const int64_t d = p->d, ld = p->d_seqs.len;
  c->kg = (d + 3) / 4;
  c->nw = (d + 63) / 64;
  int64_t lane;
  switch (p->kind) {
    case LIK_QK_FP8: lane = d * 4; break;
    case LIK_QK_BITS: lane = c->nw * 8; break;
    default: lane = c->kg * 4; break;
  }
  c->row_bytes = (lane + 63) / 64 * 64;
  c->in_place = p->kind == LIK_QK_INT8 && p->d_seqs.sk == 1 && d % 4 == 0;
  int64_t t, rowsb = 0;
  if (lik_mul_i64(lane, L, &t) || lik_add_i64(t, 2 * L * 4 + 63, &t)) return 1;
  c->panel_bytes = t / 64 * 64;
  if (lik_mul_i64((p->q.len + L - 1) / L, p->q.count, panels) ||
      lik_mul_i64(*panels, c->panel_bytes, qbytes) ||
      (!c->in_place && lik_mul_i64(ld, c->row_bytes, &rowsb)) ||
      lik_mul_i64(ld, (int64_t)(sizeof(void *) + 8), &t) || lik_add_i64(t, rowsb + 64, &t))
    return 1;
  c->dscratch_bytes = t / 64 * 64;
  return lik_mul_i64(c->dscratch_bytes, nthreads, &t);
}

lik_status lik_cpu_maxsim_quant(const lik_quant_problem *p) {
  qrun c;
  memset(&c, 0, sizeof c);
  c.p = p;
  const lik_quant_kernels *k = lik_cpu_kernels_for(p->call.context)->quant;
  if ((p->d + 3) / 4 * 4 > LIK_QT_KMAX) k = &lik_quant_kernels_portable; /* int64 sums */
  c.i8_tile = k->i8_tile;
  c.bits_tile = k->bits_tile;
  for (int b = 0; b < 256; b++) {
    if (p->kind == LIK_QK_FP8) c.lut[b] = f8_value((uint8_t)b, p->q.dtype == LIK_F8E5M2);
    c.signs[b] = sign_bytes((uint8_t)b);
  }
  int nthreads = p->call.threads;
  const int64_t nd = p->d_seqs.count;
  c.block = nd / ((int64_t)nthreads * 8);
  c.block = c.block < 1 ? 1 : c.block > 64 ? 64 : c.block;
  const int64_t ntasks = (nd + c.block - 1) / c.block;
  if (ntasks < nthreads) nthreads = (int)ntasks;
  int64_t qbytes, panels;
  if (plan(&c, nthreads, &qbytes, &panels))
    return lik_fail(LIK_ERR_ALLOC, "lik: scratch for Nq=%lld, Lq=%lld, Ld=%lld, d=%lld does not "
                    "fit int64", (long long)p->q.count, (long long)p->q.len,
                    (long long)p->d_seqs.len, (long long)p->d);
  const int64_t nq = p->q.count, scratch = c.dscratch_bytes * nthreads; /* checked by plan */
  size_t first_b, valid_b, tok_b; /* q.len <= INT32_MAX (validated) */
  int64_t nq1;
  if (lik_add_i64(nq, 1, &nq1) || lik_bytes(nq1, sizeof(int64_t), &first_b) ||
      lik_bytes(nq1, sizeof(int32_t), &valid_b) || lik_bytes(p->q.len + 1, sizeof(int32_t), &tok_b))
    return lik_fail(LIK_ERR_ALLOC, "lik: Nq=%lld queries of Lq=%lld tokens exceed the address space",
                    (long long)nq, (long long)p->q.len);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  c.qbuf = lik_ws_alloc(&ws, (size_t)qbytes + 64);
  c.qfirst = lik_ws_alloc(&ws, first_b);
  c.qvalid = lik_ws_alloc(&ws, valid_b);
  c.dscratch = lik_ws_alloc(&ws, (size_t)scratch);
  int32_t *tok = lik_ws_alloc(&ws, tok_b);
  lik_status st = LIK_OK;
  if (!c.qbuf || !c.qfirst || !c.qvalid || !c.dscratch || !tok) {
    st = lik_fail(LIK_ERR_ALLOC, "lik: cannot allocate packed queries and document rows "
                  "(%lld bytes)", (long long)(qbytes + scratch));
  } else {
    memset(c.qbuf, 0, (size_t)qbytes); /* unused lanes: q = 0, scale 0 */
    int64_t pn = 0;
    for (int64_t i = 0; i < nq; i++) {
      const int64_t nv = valid_tokens(&p->q, &p->q_mask, i, tok);
      c.qfirst[i] = pn;
      c.qvalid[i] = (int32_t)nv;
      for (int64_t x = 0; x < nv; x++)
        pack_q_lane(&c, i, tok[x], (int)(x % L), c.qbuf + (pn + x / L) * c.panel_bytes);
      pn += (nv + L - 1) / L;
    }
    c.qfirst[nq] = pn;
    lik_parallel_run(nthreads, ntasks, doc_task, &c);
  }
  lik_ws_close(&ws);
  return st;
}

/* ---- quantisers ------------------------------------------------------------------ */

enum { QUANT_BLOCK = 512 };

static float x_at(const lik_quantize_problem *p, int64_t off) {
  return lik_load_f32(p->x, p->dtype, off);
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
    p->scale[so] = p->call.normalize ? scale / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS) : scale;
  }
}

lik_status lik_cpu_quantize(const lik_quantize_problem *p) {
  int64_t ntok = 1;
  for (int i = 0; i < p->nlead; i++) ntok *= p->lead[i];
  lik_parallel_run(p->call.threads, (ntok + QUANT_BLOCK - 1) / QUANT_BLOCK, quant_task, (void *)p);
  return LIK_OK;
}
