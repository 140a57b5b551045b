#include "tensor/attention.h"

#include <algorithm>
#include <string>

#include "tensor/error.h"
#include "tensor/kernels/kernels.h"

namespace orchard {

namespace {
kernels::AttendFn attend_kernel() {
  static const kernels::AttendFn fn = kernels::lookup_attend(kernels::detect_isa());
  return fn;
}
}  // namespace

void store_key(float* panels, int64_t head_dim, int64_t pos, const float* key) {
  float* panel = panels + (pos / kKeyPanel) * head_dim * kKeyPanel;
  if (pos % kKeyPanel == 0) std::fill_n(panel, head_dim * kKeyPanel, 0.0f);
  for (int64_t d = 0; d < head_dim; ++d) panel[d * kKeyPanel + pos % kKeyPanel] = key[d];
}

bool attend_available(int64_t head_dim) { return head_dim > 0 && head_dim % 16 == 0 && attend_kernel(); }

void attend(const AttendArgs& a) {
  if (!attend_available(a.head_dim))
    throw Error("attend: no attention kernel for head size " + std::to_string(a.head_dim) + " on this CPU");
  if (a.ntok <= 0) return;
  attend_kernel()(a);
}

}  // namespace orchard
