/*
 * fuzz_api.c — fuzz target of the C API's argument surface (include/lik.h):
 * the input decodes into one call of a public entry point — its tensor views
 * (dtype, ndim, shape, strides, device, where the data lies and what it
 * holds), its options and top_k.  Oracles: no crash, sanitizer report, leak
 * or hang; a failing call says why, a successful one leaves no message; a
 * call the contract says must fail (a size int64 cannot count, d or a
 * padded sequence longer than INT32_MAX, an unknown dtype or device code)
 * fails; an accepted call has no output sharing memory with another of its
 * tensors.  (CUDA tensors in this CPU-only build fail unless there is
 * nothing to compute.)
 *
 * Input (little-endian): a header, 12 tensor records, then data bytes.
 *   header  op u8 (mod 16: maxsim, maxsim_pairs, retrieve, maxsim_varlen,
 *           score_pairs_packed, the four backwards in that order,
 *           maxsim_residual, maxsim_residual_varlen, plaid_approx_score,
 *           codec_train, codec_compress, codec_decompress, topk_merge),
 *           opts u8 (bit 0: NULL options, bit 1: normalize, bits 2-3:
 *           num_threads, bits 4-5: backward strategy, 3 = an invalid code),
 *           top_k i64, max_seqlen_q i64 (for the codec calls its byte 0 is
 *           nbits, byte 1 the residual layout, each as int8)
 *   record  present u8 (0: NULL), dtype u8, ndim i8, device u8 (0: CPU,
 *           1: CUDA, else the code itself), shape i64[4], strides i64[4],
 *           layout u8 (bit 0: the strides above, else dense row-major;
 *           bits 4-7 = k > 0: the data lies inside slot k-1's memory, at
 *           byte `offset`), offset u16, fill u8 (0: data bytes, 1: zeros,
 *           2 .. 6: values from a count the slot refers to, see fill_values)
 *   slots   0 Q, 1 D, 2 q_mask, 3 d_mask, 4 cu_seqlens_q, 5 cu_seqlens_d,
 *           6 pair_q, 7 pair_d, 8 argmax (a backward's input), 9 grad_scores,
 *           10, 11 the outputs (scores and argmax / indices; grad_Q, grad_D).
 *           Residual and codec calls: 0 Q (X, centroid_scores, the training
 *           sample), 1 / 2 / 3 the codec's centroids / bucket_cutoffs /
 *           bucket_weights, 4 codes, 5 residuals, 6 doc_lengths or
 *           cu_seqlens_d, 10, 11 the outputs.  topk_merge: 0 scores,
 *           4 indices, 6 lengths, 10, 11 the outputs.
 * Each view gets its own allocation of exactly its span (so ASan sees any
 * access outside it), filled cyclically from the data bytes.  A call with a
 * view spanning more than 64 KiB, or with more than 2^16 cu_seqlens or pair
 * entries (validation reads them all), is skipped, and so is one whose work
 * exceeds 2^18 multiply-adds unless the contract says it must fail (a view
 * whose span int64 cannot count gets a 64-byte stand-in: it must be refused
 * before it is read).
 */
#include <stdlib.h>
#include <string.h>

#include "lik.h"
#include "lik_experimental.h"

/* Limits that keep one execution under a few milliseconds (under ASan). */
enum { NSLOT = 12, OUT0 = 10, CAP_BYTES = 1 << 16, CAP_VALUES = 1 << 16 };
#define CAP_WORK ((int64_t)1 << 18)

typedef struct {
  const uint8_t *p;
  size_t n;
} reader;

static uint8_t u8(reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}

static int64_t i64(reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i);
  return (int64_t)v;
}

typedef struct {
  lik_tensor t;
  int present, alias, fill, bogus, unbacked;
  unsigned offset;
  unsigned char *mem; /* own allocation (freed), or NULL */
  size_t bytes;       /* bytes of the span; 0 when empty */
  int64_t numel, lo;  /* numel < 0: overflows int64 */
} slot;

static size_t elem_size(int dtype) {
  switch (dtype) {
    case LIK_F64: case LIK_I64: return 8;
    case LIK_F32: case LIK_I32: return 4;
    case LIK_F16: case LIK_BF16: return 2;
    default: return 1;
  }
}

/* numel (-1 on overflow; 0 if any size is 0 or negative sizes), the element
 * offsets [lo, hi] and the byte span; bogus when an offset or the span does
 * not fit int64 (the library must refuse such a view). */
static void measure(slot *s) {
  const lik_tensor *t = &s->t;
  int64_t n = 1, lo = 0, hi = 0, step;
  int bad = t->ndim < 0 || t->ndim > LIK_MAX_DIMS;
  for (int i = 0; !bad && i < t->ndim; i++) {
    if (t->shape[i] < 0) bad = 1;
    else if (__builtin_mul_overflow(n, t->shape[i], &n)) n = -1, bad = 1;
  }
  s->numel = bad ? -1 : n;
  s->bytes = 0;
  s->lo = 0;
  if (bad || n == 0) return;
  for (int i = 0; i < t->ndim; i++)
    if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &step) ||
        __builtin_add_overflow(step < 0 ? lo : hi, step, step < 0 ? &lo : &hi)) {
      s->bogus = 1;
      return;
    }
  int64_t span, bytes;
  if (__builtin_sub_overflow(hi, lo, &span) || __builtin_add_overflow(span, 1, &span) ||
      __builtin_mul_overflow(span, (int64_t)elem_size(t->dtype), &bytes)) {
    s->bogus = 1;
    return;
  }
  s->lo = lo;
  s->bytes = (size_t)bytes;
}

/* Element i (row-major logical index) of a view set to v, in its dtype. */
static void put_value(slot *s, int64_t i, int64_t v) {
  const lik_tensor *t = &s->t;
  int64_t off = 0, rest = i;
  for (int k = t->ndim - 1; k >= 0; k--) {
    off += (rest % t->shape[k]) * t->strides[k];
    rest /= t->shape[k];
  }
  switch (t->dtype) {
    case LIK_I64: ((int64_t *)t->data)[off] = v; break;
    case LIK_I32: ((int32_t *)t->data)[off] = (int32_t)v; break;
    case LIK_F32: ((float *)t->data)[off] = (float)v; break;
    case LIK_F64: ((double *)t->data)[off] = (double)v; break;
    default: break;
  }
}

static int64_t dim0(const slot *s) { return s->t.ndim >= 1 && s->t.ndim <= 4 ? s->t.shape[0] : 0; }
static int64_t dim_from_end(const slot *s, int k) {
  return s->t.ndim >= k && s->t.ndim <= 4 ? s->t.shape[s->t.ndim - k] : 0;
}

/* x - 1, or -1 (no bound) where x < 1: a fuzzed shape may be INT64_MIN. */
static int64_t less1(int64_t x) { return x >= 1 ? x - 1 : -1; }

/* The count a value fill of slot i refers to, per op: the rows cu_seqlens
 * split, the count indices and codes stay below, the length lengths and
 * argmax stay within. */
static int64_t fill_bound(int op, int i, const slot *s) {
  switch (i) {
    case 4: /* cu_seqlens_q: Q's rows; codes: C centroids; topk indices: any */
      return op <= 8 ? dim0(&s[0]) : op == 11 ? dim_from_end(&s[0], 1) : op == 15 ? 1000 : dim0(&s[1]);
    case 5: return dim0(&s[1]); /* cu_seqlens_d: D's rows */
    case 6: /* pair_q: queries; doc_lengths: Ld; cu_seqlens_d: codes' T; topk lengths: K */
      return op <= 8 ? less1(dim0(&s[4])) : op == 9 ? dim_from_end(&s[4], 1)
             : op == 15 ? dim_from_end(&s[0], 1) : dim0(&s[4]);
    case 7: return less1(dim0(&s[5])); /* pair_d: documents */
    default: return dim_from_end(&s[1], 2); /* argmax: D's tokens */
  }
}

/* Value fills (fill >= 2): 2 a cu_seqlens ramp over the bound, 3 byte % bound,
 * 4 byte % (bound + 1) - 1 (argmax-like), 5 byte % (bound + 1) (lengths),
 * 6 the flat index, negated for floats (sorted lists). */
static void fill_values(slot *s, int op, int i, const slot *all, const uint8_t *data, size_t n) {
  const int64_t b = fill_bound(op, i, all), parts = s->numel - 1;
  if (s->t.ndim < 1 || s->numel > CAP_VALUES || b < 0 || b > ((int64_t)1 << 40)) return;
  const int flt = s->t.dtype == LIK_F32 || s->t.dtype == LIK_F64;
  for (int64_t e = 0; e < s->numel; e++) {
    const int64_t byte = n ? data[e % (int64_t)n] : 0;
    int64_t v = byte;
    switch (s->fill) {
      case 2: v = parts > 0 ? e * b / parts : 0; break;
      case 3: v = b > 0 ? byte % b : 0; break;
      case 4: v = byte % (b + 1) - 1; break;
      case 5: v = byte % (b + 1); break;
      case 6: v = flt ? -e : e; break;
    }
    put_value(s, e, v);
  }
}

/* Which slots each op passes (bit i = slot i). */
static const unsigned USED[16] = {
    0xC0F, 0xC0F, 0xC0F,         /* maxsim, pairs, retrieve: Q D masks, outputs     */
    0xC3F, 0xCFF,                /* varlen (+cu), pairs_packed (+cu, pairs)        */
    0xF0F, 0xF0F, 0xF3F, 0xFFF,  /* backwards: + argmax, grad_scores              */
    0xC7B, 0xC7B,                /* residual (_varlen): Q centroids weights codes
                                    residuals lengths / cu, outputs               */
    0x451,                       /* plaid_approx: centroid_scores codes cu scores */
    0xC01, 0xC07, 0x43A,         /* codec train, compress, decompress           */
    0xC51};                      /* topk_merge: scores indices lengths, outputs */

static int overlap(const slot *a, const slot *b) {
  if (a->numel <= 0 || b->numel <= 0 || a->bogus || b->bogus || a->unbacked || b->unbacked)
    return 0;
  const uintptr_t alo = (uintptr_t)a->t.data + (uintptr_t)(a->lo * (int64_t)elem_size(a->t.dtype));
  const uintptr_t blo = (uintptr_t)b->t.data + (uintptr_t)(b->lo * (int64_t)elem_size(b->t.dtype));
  return alo < blo + b->bytes && blo < alo + a->bytes;
}

static unsigned char standin[64] __attribute__((aligned(64)));

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("LIK_NUM_THREADS", "1", 1); /* opts decide; the default is one thread */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  const int op = u8(&r) % 16;
  const unsigned ob = u8(&r);
  const int64_t top_k = i64(&r), max_seqlen_q = i64(&r);
  slot s[NSLOT];
  memset(s, 0, sizeof s);
  for (int i = 0; i < NSLOT; i++) {
    slot *x = &s[i];
    x->present = u8(&r) != 0;
    x->t.dtype = (lik_dtype)u8(&r);
    x->t.ndim = (int8_t)u8(&r);
    const unsigned dev = u8(&r);
    x->t.device = dev == 0 ? LIK_CPU : dev == 1 ? LIK_CUDA : (lik_device_type)dev;
    for (int k = 0; k < 4; k++) x->t.shape[k] = i64(&r);
    int64_t strides[4];
    for (int k = 0; k < 4; k++) strides[k] = i64(&r);
    const unsigned layout = u8(&r);
    x->offset = u8(&r);
    x->offset |= (unsigned)u8(&r) << 8;
    x->fill = u8(&r);
    x->alias = (int)(layout >> 4);
    const int nd = x->t.ndim >= 0 && x->t.ndim <= 4 ? x->t.ndim : 0;
    int64_t run = 1;
    for (int k = nd - 1; k >= 0; k--) { /* dense row-major unless explicit */
      x->t.strides[k] = (layout & 1) ? strides[k] : run;
      if (!(layout & 1) && __builtin_mul_overflow(run, x->t.shape[k] > 0 ? x->t.shape[k] : 1, &run))
        run = 1;
    }
  }
  const uint8_t *fill = r.p; /* the rest is data */
  const size_t nfill = r.n;

  /* Back the views, and decide whether the call must fail. */
  int must_fail = 0, unbacked = 0;
  int64_t work = 1;
  for (int i = 0; i < NSLOT; i++) {
    slot *x = &s[i];
    if (!x->present || !((USED[op] >> i) & 1)) {
      x->present = 0;
      continue;
    }
    measure(x);
    lik_tensor *t = &x->t;
    if (x->numel < 0 || x->bogus || (unsigned)t->dtype > LIK_I64 ||
        (t->device != LIK_CPU && t->device != LIK_CUDA && t->device != 0))
      must_fail = 1;
    /* slots 0 / 1 are embeddings or centroids (d last) in every op but the
     * approx score, codec training and the merge; their second-last size is a
     * sequence length or a centroid count (int32) but in the packed forms and
     * for compress's X */
    const int dense = op <= 10 || op == 13 || op == 14;
    const int counted = op <= 2 || op == 5 || op == 6 || (op >= 9 && (i == 1 || op <= 10));
    if ((i == 0 || i == 1) && dense && t->ndim >= 1 && t->ndim <= 4) {
      if (t->shape[t->ndim - 1] > INT32_MAX) must_fail = 1; /* d */
      if (counted && t->ndim >= 2 && t->shape[t->ndim - 2] > INT32_MAX) must_fail = 1;
    }
    if (i <= 1 || i == 4 || i == 6) /* the work: embeddings, codes, pairs */
      for (int k = 0; k < t->ndim && k < 4; k++)
        if (__builtin_mul_overflow(work, t->shape[k] > 1 ? t->shape[k] : 1, &work))
          work = INT64_MAX;
    const size_t es = elem_size(t->dtype);
    if (((i >= 4 && i <= 7) || (op == 15 && i == 0)) && x->numel > CAP_VALUES)
      unbacked = 1; /* values validation reads (cu_seqlens, pairs, codes, lengths, lists) */
    if (x->numel <= 0) {
      t->data = NULL;
    } else if (x->bogus || x->bytes > CAP_BYTES) {
      t->data = standin;
      x->unbacked = 1;
      unbacked |= !x->bogus; /* a bogus view must be refused before it is read */
    } else if (x->alias > 0 && x->alias - 1 < NSLOT && x->alias - 1 != i &&
               s[x->alias - 1].mem && x->offset / es * es + x->bytes <= s[x->alias - 1].bytes) {
      t->data = s[x->alias - 1].mem + x->offset / es * es - x->lo * (int64_t)es;
    } else {
      x->mem = malloc(x->bytes);
      if (!x->mem) goto out;
      for (size_t b = 0; b < x->bytes; b++)
        x->mem[b] = x->fill == 1 || !nfill ? 0 : fill[(b + (size_t)i * 136) % nfill];
      t->data = x->mem - x->lo * (int64_t)es;
      if (x->fill >= 2) fill_values(x, op, i, s, fill, nfill);
    }
  }
  /* (validation reads cu_seqlens and pair indices: every view that can be
   * read is backed; a bogus one is refused before it is read) */
  if (unbacked || (!must_fail && work > CAP_WORK)) goto out;

  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = (ob >> 1) & 1;
  opts.num_threads = (int)((ob >> 2) & 3);
  opts.backward = (lik_backward)((ob >> 4) & 3);
  opts.max_seqlen_q = max_seqlen_q;
  const lik_options *o = (ob & 1) ? NULL : &opts;
  const lik_tensor *T[NSLOT];
  for (int i = 0; i < NSLOT; i++) T[i] = s[i].present ? &s[i].t : NULL;
  lik_tensor *o0 = (lik_tensor *)T[OUT0], *o1 = (lik_tensor *)T[OUT0 + 1];
  const lik_codec codec = {T[1], T[2], T[3], (int8_t)max_seqlen_q,
                           (lik_residual_layout)(int8_t)(max_seqlen_q >> 8)};
  lik_status st;
  switch (op) {
    case 0: st = lik_maxsim(T[0], T[1], T[2], T[3], o, o0, o1); break;
    case 1: st = lik_maxsim_pairs(T[0], T[1], T[2], T[3], o, o0, o1); break;
    case 2: st = lik_retrieve(T[0], T[1], T[2], T[3], top_k, o, o0, o1); break;
    case 3: st = lik_maxsim_varlen(T[0], T[1], T[4], T[5], T[2], T[3], o, o0, o1); break;
    case 4:
      st = lik_score_pairs_packed(T[0], T[1], T[4], T[5], T[6], T[7], T[2], T[3], o, o0, o1);
      break;
    case 5: st = lik_maxsim_backward(T[0], T[1], T[2], T[3], T[8], T[9], o, o0, o1); break;
    case 6: st = lik_maxsim_pairs_backward(T[0], T[1], T[2], T[3], T[8], T[9], o, o0, o1); break;
    case 7:
      st = lik_maxsim_varlen_backward(T[0], T[1], T[4], T[5], T[2], T[3], T[8], T[9], o, o0, o1);
      break;
    case 8:
      st = lik_score_pairs_packed_backward(T[0], T[1], T[4], T[5], T[6], T[7], T[2], T[3], T[8],
                                           T[9], o, o0, o1);
      break;
    case 9: st = lik_maxsim_residual(T[0], &codec, T[4], T[5], T[6], o, o0, o1); break;
    case 10: st = lik_maxsim_residual_varlen(T[0], &codec, T[4], T[5], T[6], o, o0, o1); break;
    case 11: st = lik_plaid_approx_score(T[0], T[4], T[6], o, o0); break;
    case 12: st = lik_codec_train(T[0], codec.nbits, o0, o1); break;
    case 13: st = lik_codec_compress(&codec, T[0], o, o0, o1); break;
    case 14: st = lik_codec_decompress(&codec, T[4], T[5], o, o0); break;
    default: st = lik_topk_merge(T[0], T[4], T[6], top_k, o, o0, o1); break;
  }
  const char *msg = lik_last_error();
  if ((unsigned)st > LIK_ERR_CUDA || (st != LIK_OK) != (msg[0] != 0))
    __builtin_trap(); /* a status out of range, a failure without a reason or the reverse */
  if (st == LIK_OK) {
    if (must_fail) __builtin_trap(); /* the contract's limits were not enforced */
    for (int i = OUT0; i < NSLOT; i++)
      for (int j = 0; j < NSLOT; j++)
        if (j != i && s[i].present && s[j].present && overlap(&s[i], &s[j]))
          __builtin_trap(); /* an output shares memory with another tensor */
  }
out:
  for (int i = 0; i < NSLOT; i++) free(s[i].mem);
  return 0;
}
