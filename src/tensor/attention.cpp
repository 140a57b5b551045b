#include "tensor/attention.h"

#include <algorithm>
#include <string>

#include "tensor/error.h"
#include "tensor/f16.h"
#include "tensor/kernels/kernels.h"

namespace orchard {

namespace {
kernels::AttendFn attend_kernel() {
  static const kernels::AttendFn fn = kernels::lookup_attend(kernels::detect_isa());
  return fn;
}
const kernels::HalfFns* half_kernels() {
  static const kernels::HalfFns* fns = kernels::lookup_half(kernels::detect_isa());
  return fns;
}
}  // namespace

const char* kv_type_name(KVType t) { return t == KVType::F16 ? "f16" : "f32"; }

bool kv_type_from_name(std::string_view name, KVType& out) {
  if (name == "f32") out = KVType::F32;
  else if (name == "f16") out = KVType::F16;
  else return false;
  return true;
}

template <class T>
void store_key(T* panels, int64_t head_dim, int64_t pos, const T* key) {
  T* panel = panels + (pos / kKeyPanel) * head_dim * kKeyPanel;
  if (pos % kKeyPanel == 0) std::fill_n(panel, head_dim * kKeyPanel, T{0});
  for (int64_t d = 0; d < head_dim; ++d) panel[d * kKeyPanel + pos % kKeyPanel] = key[d];
}
template void store_key<float>(float*, int64_t, int64_t, const float*);
template void store_key<uint16_t>(uint16_t*, int64_t, int64_t, const uint16_t*);

void to_halves(const float* x, uint16_t* out, int64_t n) {
  if (const kernels::HalfFns* k = half_kernels()) return k->to_half(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void to_floats(const uint16_t* h, float* out, int64_t n) {
  if (const kernels::HalfFns* k = half_kernels()) return k->to_float(h, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

bool attend_available(int64_t head_dim) { return head_dim > 0 && head_dim % 16 == 0 && attend_kernel(); }

void attend(const AttendArgs& a) {
  if (!attend_available(a.head_dim))
    throw Error("attend: no attention kernel for head size " + std::to_string(a.head_dim) + " on this CPU");
  if (a.ntok <= 0) return;
  attend_kernel()(a);
}

}  // namespace orchard
