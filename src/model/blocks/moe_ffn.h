#pragma once
// A mixture-of-experts feed-forward layer over a batch of rows:
//   out_t = Σ_{k} w_tk · down_e(silu(gate_e·x_t) ⊙ up_e·x_t)    e = expert k of token t (moe_routing.h)
//         + g_t · down_s(silu(gate_s·x_t) ⊙ up_s·x_t)          the shared expert, if any
//                                                             (g_t = sigmoid(gate_inp_s·x_t) or 1)
// Rows routed to the same expert go through its matrices together (one product per expert),
// and a token's experts are summed in its routing order, so each row's result is the same
// whichever other rows share the batch; a token reads only its chosen experts' weights.
#include <cstdint>
#include <vector>

#include "model/blocks/moe_routing.h"
#include "model/weights.h"
#include "tensor/huge_buffer.h"

namespace orchard {

class MoeFfn {
 public:
  // xn: n rows of dim; out: n rows of dim (overwritten).
  void forward(const MoeWeights& w, const RouterConfig& c, const float* xn, int64_t n, int64_t dim, float* out,
               std::vector<uint8_t>& scratch, bool batch_invariant);

  // The last forward's choices: row t's experts at [t·n_used, (t+1)·n_used), and their weights.
  const std::vector<int32_t>& experts() const { return experts_; }
  const std::vector<float>& weights() const { return weights_; }

 private:
  bool one_token(const MoeWeights& w, const float* x, int64_t dim, int64_t e0, int64_t e1,
                 std::vector<uint8_t>& scratch, bool batch_invariant);

  std::vector<int32_t> experts_;
  std::vector<float> weights_, route_scratch_;
  std::vector<int64_t> rows_of_;       // per expert, its (token · n_used + slot) entries, grouped
  std::vector<int64_t> first_of_;      // where each expert's entries start in rows_of_
  ActivationVector logits_, x_, gate_, up_, y_, slots_, shared_, padded_;
};

// down·(silu(gate·x) ⊙ up·x) for n rows of x into out (n × down.rows); gate/up: buffers.
void dense_ffn(const FfnWeights& w, const float* x, int64_t n, float* out, ActivationVector& gate, ActivationVector& up,
               std::vector<uint8_t>& scratch, bool batch_invariant);

}  // namespace orchard
