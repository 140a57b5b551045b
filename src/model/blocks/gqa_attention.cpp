#include "model/blocks/gqa_attention.h"

#include <algorithm>
#include <cmath>

#include "tensor/attention.h"
#include "tensor/ops.h"
#include "tensor/threadpool.h"

namespace orchard {

void GqaAttention::forward(const HParams& hp, const Heads& heads, const LayerWeights& L, int64_t li, const float* xn,
                           int64_t n, std::span<KVCache* const> kvs, std::span<const int32_t> seq_of,
                           std::span<const int64_t> pos_of, const float* rope_cs, float* att,
                           std::vector<uint8_t>& scratch, bool batch_invariant) {
  const int64_t qd = heads.q_dim(hp), kvd = heads.kv_dim(hp), hd = hp.head_dim, n_rot = hp.n_rot;
  const int64_t n_heads = heads.n_heads(hp), n_kv_heads = heads.n_kv_heads;
  const bool neox = hp.rope_order == RopeOrder::NeoX;
  q_.resize(static_cast<size_t>(n * qd));
  k_.resize(static_cast<size_t>(n * kvd));
  v_.resize(static_cast<size_t>(n * kvd));
  ActivationVector &q = q_, &k = k_, &v = v_;
  // q = Wq·xn (+bq), k = Wk·xn (+bk), v = Wv·xn (+bv)   (this shard's heads only)
  {
    const MatrixView ws[] = {L.wq, L.wk, L.wv};
    float* const ys[] = {q.data(), k.data(), v.data()};
    matmul_shared(ws, xn, n, ys, scratch, batch_invariant);
  }
  if (L.bq) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < qd; ++i) q[t * qd + i] += L.bq[i];
      for (int64_t i = 0; i < kvd; ++i) k[t * kvd + i] += L.bk[i], v[t * kvd + i] += L.bv[i];
    }
  }

  for (int64_t t = 0; t < n; ++t) {
    // qwen3: q_h = rmsnorm(q_h) · q_norm, k_h = rmsnorm(k_h) · k_norm, per head
    if (L.q_norm) {
      for (int64_t h = 0; h < n_heads; ++h) rms_norm(&q[t * qd + h * hd], L.q_norm, &q[t * qd + h * hd], hd, hp.rms_eps);
      for (int64_t h = 0; h < n_kv_heads; ++h) rms_norm(&k[t * kvd + h * hd], L.k_norm, &k[t * kvd + h * hd], hd, hp.rms_eps);
    }
    // q_h, k_h = rope(q_h, pos), rope(k_h, pos)
    const int64_t pos = pos_of[static_cast<size_t>(t)];
    KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
    const float* cs = rope_cs + t * n_rot;
    for (int64_t h = 0; h < n_heads; ++h) rope_rotate(&q[t * qd + h * hd], n_rot, cs, neox);
    for (int64_t h = 0; h < n_kv_heads; ++h) rope_rotate(&k[t * kvd + h * hd], n_rot, cs, neox);
    kv.store_k(li, pos, &k[t * kvd]);
    kv.store_v(li, pos, &v[t * kvd]);
  }

  // att = softmax(q·Kᵀ / √head_dim + causal mask) · V, per head (GQA: heads share KV heads)
  attend_heads(hp, heads, li, q.data(), n, kvs, seq_of, pos_of, att);
}


void GqaAttention::attend_heads(const HParams& hp, const Heads& heads, int64_t layer, const float* q, int64_t n,
                                std::span<KVCache* const> kvs, std::span<const int32_t> seq_of,
                                std::span<const int64_t> pos_of, float* out) {
  const int64_t hd = hp.head_dim, qd = heads.q_dim(hp), group = hp.n_heads / hp.n_kv_heads;
  const int64_t n_kv_heads = heads.n_kv_heads, kv_dim = heads.kv_dim(hp);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (attend_available(hd)) {
    // Jobs: a run of up to 16 tokens of one sequence × some of its KV heads, whose `group`
    // query heads share their keys. Rows of a sequence lie end to end. A job takes several
    // heads when there are runs enough to keep every thread busy: decoding one token, the
    // kernel then works on the heads side by side.
    struct Job {
      int64_t t0, ntok, kvh, nkv;
    };
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int64_t t = 0; t < n;) {
      int64_t end = t + 1;
      while (end < n && end - t < 16 && seq_of[static_cast<size_t>(end)] == seq_of[static_cast<size_t>(t)]) ++end;
      runs.emplace_back(t, end - t);
      t = end;
    }
    const int64_t threads = global_pool().size();
    const int64_t heads_per_job =
        threads <= 1 ? n_kv_heads
                     : std::clamp<int64_t>(static_cast<int64_t>(runs.size()) * n_kv_heads / (2 * threads), 1, n_kv_heads);
    std::vector<Job> jobs;
    for (const auto& [t0, ntok] : runs)
      for (int64_t kvh = 0; kvh < n_kv_heads; kvh += heads_per_job)
        jobs.push_back({t0, ntok, kvh, std::min(heads_per_job, n_kv_heads - kvh)});
    len_of_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) len_of_[static_cast<size_t>(t)] = pos_of[static_cast<size_t>(t)] + 1;
    // Balanced, as below: later runs of a causal prompt cost more.
    global_pool().parallel_for_balanced(static_cast<int64_t>(jobs.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const Job& job = jobs[static_cast<size_t>(j)];
        KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(job.t0)])];
        AttendArgs a;
        a.kv_type = kv.type();
        a.q = q + job.t0 * qd + job.kvh * group * hd;
        a.out = out + job.t0 * qd + job.kvh * group * hd;
        a.tok_stride = qd;
        a.ntok = job.ntok;
        a.group = group;
        a.len = len_of_.data() + job.t0;
        a.k = kv.k_panels(layer, job.kvh);
        a.v = kv.v_head(layer, job.kvh);
        a.kv_stride = kv_dim;
        a.head_dim = hd;
        a.scale = scale;
        a.n_kv = job.nkv;
        a.k_head_stride = job.nkv > 1 ? kv.k_head_stride() : 0;
        attend(a);
      }
    });
    return;
  }
  int64_t longest = 0;
  for (int64_t t = 0; t < n; ++t) longest = std::max(longest, pos_of[static_cast<size_t>(t)] + 1);
  // Every (row, KV head) pair is independent: threads take contiguous runs of them, and steal
  // from each other's ends (a causal prompt's later rows cost more: split evenly, the thread with
  // the first half waited for the other, 14 % of a 1b Q4_0 prompt at 2 threads). A cache of
  // halves has a pair's keys and values widened once for the `group` query heads sharing them.
  global_pool().parallel_for_balanced(n * n_kv_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(longest)), keys, values;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / n_kv_heads, kvh = job % n_kv_heads;
      KVCache& kv = *kvs[static_cast<size_t>(seq_of[static_cast<size_t>(t)])];
      const int64_t len = pos_of[static_cast<size_t>(t)] + 1;  // causal: itself and everything before
      const float* kp = static_cast<const float*>(kv.k_panels(layer, kvh));
      const float* vp0 = static_cast<const float*>(kv.v_head(layer, kvh));
      int64_t v_stride = kv_dim;
      if (kv.type() == KVType::F16) {
        keys.resize(static_cast<size_t>(key_panels_size(len, hd)));
        to_floats(static_cast<const uint16_t*>(kv.k_panels(layer, kvh)), keys.data(), key_panels_size(len, hd));
        values.resize(static_cast<size_t>(len * hd));
        for (int64_t p = 0; p < len; ++p)
          to_floats(static_cast<const uint16_t*>(kv.v_head(layer, kvh)) + p * kv_dim, &values[static_cast<size_t>(p * hd)], hd);
        kp = keys.data();
        vp0 = values.data();
        v_stride = hd;
      }
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* qh = q + t * qd + h * hd;
        // scores[p] = Σ_d q_h[d]·K[p][d], a panel of 32 positions at a time
        for (int64_t p0 = 0; p0 < len; p0 += kKeyPanel) {
          float acc[kKeyPanel] = {};
          const float* panel = kp + key_offset(p0, 0, hd);
          for (int64_t d = 0; d < hd; ++d)
            for (int64_t j = 0; j < kKeyPanel; ++j) acc[j] += qh[d] * panel[d * kKeyPanel + j];
          std::copy_n(acc, std::min<int64_t>(kKeyPanel, len - p0), &scores[static_cast<size_t>(p0)]);
        }
        for (int64_t p = 0; p < len; ++p) scores[p] *= scale;
        softmax(scores.data(), len);
        // out_h = Σ_p scores[p] · V_p: written out here (not axpy per position) so the compiler
        // keeps out_h in registers across positions; per-call overhead dominated at small heads.
        float* oh = out + t * qd + h * hd;
        std::fill_n(oh, hd, 0.0f);
        const float* vp = vp0;
        for (int64_t p = 0; p < len; ++p, vp += v_stride) {
          const float sp = scores[p];
          for (int64_t d = 0; d < hd; ++d) oh[d] += sp * vp[d];
        }
      }
    }
  });
}

}  // namespace orchard
