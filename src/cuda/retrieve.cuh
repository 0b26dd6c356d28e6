/*
 * retrieve.cuh — exact top-k on the GPU (included by launch.cu).
 *
 * Block-streaming design: documents are scored B at a time by the forward
 * kernel into a [Nq, B] fp32 scratch; after each block one CTA per query
 *   1. radix-selects (4 x 8-bit passes over order-preserving float keys) the
 *      k-th best key of the block, keeps every score above it and the
 *      lowest-index ties of it (an ordered per-thread scan) — at most k
 *      candidates, deterministic;
 *   2. merges them with the running top-k (kept sorted, ping-pong buffers)
 *      by rank counting under the total order (score desc, NaN last, index asc).
 * Few queries against a large block (Nq below twice the SM count): the block is
 * split into G slices and the same kernel runs twice — G CTAs per query
 * select each slice's sorted top-k (from an empty running top-k), then one
 * CTA per query selects from those G*k candidates and merges.  The top-k
 * of the block is inside the union of the slices' top-k, and for equal
 * scores the candidates' positions follow their indices, so the ordered tie
 * scan still keeps the lowest indices: the result is the same.
 * The [Nq, Nd] matrix is never held: scratch is Nq*B*4 + Nq*k*12*(2 + 2G)
 * + k*12 bytes, stream-ordered scratch from lik's pool on the
 * call's stream (StreamScratch: no host sync, graph capturable).
 */

namespace lik_cuda {

/* The top-k order: fkey / rbetter (common.cuh). */

/* An empty slot of a top-k list: (NaN, INT64_MAX), after every candidate
 * under rbetter (a NaN score included), skipped as a candidate itself. */
__global__ void topk_init_kernel(float *s, int64_t *ix, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    s[i] = CUDART_NAN_F;
    ix[i] = INT64_MAX;
  }
}

/* CTA (query i, slice g) of a grid of Nq * G: selects from the scores
 * sc[i * sq + g * slen + c], c < min(slen, nb - g * slen), whose index is
 * sidx[same] (or jstart + g * slen + c without sidx), merges them with the
 * running top-k st_*[i * pk ...] (pk = 0: one shared empty list) and writes
 * the sorted top-k to nt_*[blockIdx.x * k ...]. */
__global__ void __launch_bounds__(256)
    topk_merge_kernel(const float *sc, const int64_t *sidx, int64_t sq,
                      int64_t slen, int64_t nb, int64_t jstart, int64_t G,
                      int64_t k, const float *st_s, const int64_t *st_i,
                      int64_t pk, float *nt_s, int64_t *nt_i, float *cand_s,
                      int64_t *cand_i) {
  __shared__ unsigned hist[256];
  __shared__ uint32_t s_pref;
  __shared__ int64_t s_need;
  __shared__ int64_t tie_base[256];
  __shared__ unsigned long long s_nc;
  const int tid = threadIdx.x;
  const int64_t i = blockIdx.x / G, g = blockIdx.x % G;
  const int64_t off = i * sq + g * slen;
  const float *s = sc + off;
  const int64_t *sx = sidx ? sidx + off : nullptr;
  const int64_t base = jstart + g * slen;
  nb -= g * slen;
  if (nb > slen) nb = slen;
  if (nb < 0) nb = 0;
  const float *ps = st_s + i * pk;
  const int64_t *pi = st_i + i * pk;
  float *qs = nt_s + blockIdx.x * k;
  int64_t *qi = nt_i + blockIdx.x * k;
  float *cs = cand_s + blockIdx.x * k;
  int64_t *ci = cand_i + blockIdx.x * k;

  int64_t need = nb < k ? nb : k;
  uint32_t pref = 0, pmask = 0;
  for (int dg = 3; dg >= 0; --dg) {
    hist[tid] = 0;
    __syncthreads();
    for (int64_t c = tid; c < nb; c += 256) {
      const uint32_t key = fkey(s[c]);
      if ((key & pmask) == pref) atomicAdd(&hist[(key >> (8 * dg)) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      int64_t cum = 0;
      for (int b = 255; b >= 0; --b) {
        if (cum + hist[b] >= need) {
          pref |= (uint32_t)b << (8 * dg);
          need -= cum;
          break;
        }
        cum += hist[b];
      }
      s_pref = pref;
      s_need = need;
    }
    __syncthreads();
    pref = s_pref;
    need = s_need;
    pmask |= 0xFFu << (8 * dg);
    __syncthreads();
  }
  /* candidates: key > pref, plus the `need` lowest-index keys == pref */
  const int64_t chunk = (nb + 255) / 256;
  const int64_t c0 = tid * chunk, c1 = c0 + chunk < nb ? c0 + chunk : nb;
  int64_t ties = 0;
  for (int64_t c = c0; c < c1; ++c) ties += fkey(s[c]) == pref;
  tie_base[tid] = ties;
  if (tid == 0) s_nc = 0;
  __syncthreads();
  if (tid == 0) {
    int64_t run = 0;
    for (int t = 0; t < 256; ++t) {
      const int64_t x = tie_base[t];
      tie_base[t] = run;
      run += x;
    }
  }
  __syncthreads();
  int64_t tr = tie_base[tid];
  for (int64_t c = c0; c < c1; ++c) {
    const uint32_t key = fkey(s[c]);
    bool take = key > pref;
    if (key == pref) take = tr++ < need;
    if (take) {
      const unsigned long long slot = atomicAdd(&s_nc, 1ull);
      cs[slot] = s[c];
      ci[slot] = sx ? sx[c] : base + c;
    }
  }
  for (int64_t r = tid; r < k; r += 256) { /* empty slots (topk_init_kernel) */
    qs[r] = CUDART_NAN_F;
    qi[r] = INT64_MAX;
  }
  __syncthreads();
  const int64_t nc = (int64_t)s_nc;
  const int64_t m = k + nc;
  for (int64_t x = tid; x < m; x += 256) {
    const float xs = x < k ? ps[x] : cs[x - k];
    const int64_t xi = x < k ? pi[x] : ci[x - k];
    if (xi == INT64_MAX) continue;
    int64_t rank = 0;
    for (int64_t y = 0; y < k && rank < k; ++y) rank += rbetter(ps[y], pi[y], xs, xi);
    for (int64_t y = 0; y < nc && rank < k; ++y) rank += rbetter(cs[y], ci[y], xs, xi);
    if (rank < k) {
      qs[rank] = xs;
      qi[rank] = xi;
    }
  }
}

__global__ void topk_out_kernel(const float *st_s, const int64_t *st_i,
                                int64_t nq, int64_t k, float *os, int64_t osi,
                                int64_t osr, int64_t *oi, int64_t oii,
                                int64_t oir) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nq * k;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t / k, r = t % k;
    os[i * osi + r * osr] = st_s[t];
    oi[i * oii + r * oir] = st_i[t];
  }
}

/* Slices per query for a block of nb scores: enough CTAs to fill the GPU
 * when the queries alone do not (Nq < 2 SMs), each slice >= 4k and >= 4096
 * scores, the candidates (Nq * G * k) at most 16 M. */
static int64_t topk_slices(int64_t nq, int64_t nb, int64_t k, int sms) {
  if (nq >= 2 * (int64_t)sms) return 1;
  int64_t G = 2 * (int64_t)sms / nq;
  const int64_t per = 4 * k > 4096 ? 4 * k : 4096;
  if (G > nb / per) G = nb / per;
  if (G > ((int64_t)16 << 20) / (nq * k)) G = ((int64_t)16 << 20) / (nq * k);
  return G < 2 ? 1 : G;
}

static lik_status retrieve(const lik_problem *p, int64_t k, float *out_scores,
                           int64_t out_si, int64_t out_sr, int64_t *out_indices,
                           int64_t idx_si, int64_t idx_sr) {
  const int64_t nq = p->q.count, nd = p->d.count;
  if (k > nd) k = nd;
  if (nq <= 0 || k <= 0) return LIK_OK;
  if (p->q.dim != p->d.dim)
    return lik_fail(LIK_ERR_SHAPE, "D: d=%lld does not match Q's d=%lld",
                    (long long)p->d.dim, (long long)p->q.dim);
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  cudaStream_t stream = (cudaStream_t)p->call.stream;

  /* block of documents: ~32 MiB of fp32 scores, at least 1024 docs */
  int64_t B = ((int64_t)8 << 20) / nq;
  if (B < 1024) B = 1024;
  if (B > nd) B = nd;
  const int sms = dev.info->sms;
  cudaError_t e;
  const int64_t gmax = topk_slices(nq, B, k, sms);
  const size_t sc_bytes = (size_t)(nq * B) * sizeof(float);
  const size_t kb = (size_t)(nq * k), gkb = kb * (size_t)gmax;
  const size_t total = sc_bytes + (2 * kb + 2 * gkb + (size_t)k) * (sizeof(float) + sizeof(int64_t)) + 256;
  void *buf = nullptr;
  StreamScratch scratch(dev, stream);
  e = scratch.get(&buf, total);
  if (e != cudaSuccess)
    return lik_fail(LIK_ERR_ALLOC, "retrieve: %zu bytes of CUDA scratch could not be allocated (%s)",
                    total, cudaGetErrorString(e));
  char *b = (char *)buf;
  int64_t *st_i[2], *cand_i, *sl_i, *empty_i;
  float *st_s[2], *cand_s, *sl_s, *empty_s;
  st_i[0] = (int64_t *)b; b += kb * 8;
  st_i[1] = (int64_t *)b; b += kb * 8;
  cand_i = (int64_t *)b; b += gkb * 8;
  sl_i = (int64_t *)b; b += gkb * 8;
  empty_i = (int64_t *)b; b += k * 8;
  float *sc = (float *)b; b += sc_bytes;
  st_s[0] = (float *)b; b += kb * 4;
  st_s[1] = (float *)b; b += kb * 4;
  cand_s = (float *)b; b += gkb * 4;
  sl_s = (float *)b; b += gkb * 4;
  empty_s = (float *)b;

  lik_status st = LIK_OK;
  topk_init_kernel<<<256, 256, 0, stream>>>(st_s[0], st_i[0], (int64_t)kb);
  topk_init_kernel<<<1, 256, 0, stream>>>(empty_s, empty_i, k);
  e = cudaGetLastError();
  if (e != cudaSuccess) st = cuda_fail(e, "retrieve init");
  int cur = 0;
  const int esz = elt_size(p->d.dtype);
  for (int64_t j = 0; st == LIK_OK && j < nd; j += B) {
    const int64_t nb = nd - j < B ? nd - j : B;
    /* documents j .. j + nb - 1: the cross pairing of Q with them, scored
     * into the block's rows of sc */
    lik_problem blk = *p;
    lik_seqs &d = blk.d;
    if (d.offsets.data) {
      d.offsets.data = (const char *)d.offsets.data +
                       j * d.offsets.stride * (d.offsets.dtype == LIK_I64 ? 8 : 4);
    } else {
      d.data = (const char *)d.data + j * d.sn * esz;
      if (blk.d_mask.data) blk.d_mask.data += j * blk.d_mask.sn;
      if (d.lens) d.lens += j * d.lens_sn;
    }
    blk.pairing = LIK_PAIRING_CROSS;
    blk.ncand = nb;
    blk.out = lik_out{};
    blk.out.scores = sc;
    blk.out.score_si = B;
    blk.out.score_sj = 1;
    KParams P = make_params(&blk);
    P.fast_q = vec16_ok(p->q);
    P.fast_d = vec16_ok(d);
    st = run_forward(P, p->q.dtype, stream, dev);
    if (st != LIK_OK) break;
    const int64_t G = topk_slices(nq, nb, k, sms);
    if (G > 1) { /* the slices' top-k, then their merge with the running top-k */
      const int64_t slen = (nb + G - 1) / G;
      topk_merge_kernel<<<(unsigned)(nq * G), 256, 0, stream>>>(
          sc, nullptr, B, slen, nb, j, G, k, empty_s, empty_i, 0, sl_s, sl_i, cand_s, cand_i);
      topk_merge_kernel<<<(unsigned)nq, 256, 0, stream>>>(
          sl_s, sl_i, G * k, G * k, G * k, 0, 1, k, st_s[cur], st_i[cur], k, st_s[cur ^ 1],
          st_i[cur ^ 1], cand_s, cand_i);
    } else {
      topk_merge_kernel<<<(unsigned)nq, 256, 0, stream>>>(
          sc, nullptr, B, nb, nb, j, 1, k, st_s[cur], st_i[cur], k, st_s[cur ^ 1],
          st_i[cur ^ 1], cand_s, cand_i);
    }
    e = cudaGetLastError();
    if (e != cudaSuccess) st = cuda_fail(e, "retrieve top-k merge");
    cur ^= 1;
  }
  if (st == LIK_OK) {
    topk_out_kernel<<<256, 256, 0, stream>>>(st_s[cur], st_i[cur], nq, k,
                                             out_scores, out_si, out_sr,
                                             out_indices, idx_si, idx_sr);
    e = cudaGetLastError();
    if (e != cudaSuccess) st = cuda_fail(e, "retrieve output");
  }
  return st;
}

} // namespace lik_cuda
