#include "tensor/attention.h"

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

bool attend_available(int64_t head_dim) { return head_dim > 0 && head_dim % 16 == 0 && attend_kernel(); }

void attend(const AttendArgs& a) {
  if (!attend_available(a.head_dim))
    throw Error("attend: no attention kernel for head size " + std::to_string(a.head_dim) + " on this CPU");
  if (a.ntok <= 0) return;
  attend_kernel()(a);
}

}  // namespace orchard
