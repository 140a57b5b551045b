// libFuzzer target for the GGUF reader: any input must either parse or raise orchard::Error.
// On success every metadata value and the first and last byte of every tensor are read, so
// ASan catches any bound the reader accepted without checking; then the hyper-parameters are
// read and every weight bound (dense, experts, latent attention), as loading a model does, and
// each shard's byte ranges are computed.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "model/gguf.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tensor/error.h"

namespace {

// Folds everything into a checksum the optimiser cannot discard.
uint64_t touch(const orchard::GGUFValue& v) {
  uint64_t f_bits;
  std::memcpy(&f_bits, &v.f, sizeof f_bits);  // a cast would be undefined for NaN or huge values
  uint64_t sum = static_cast<uint64_t>(v.i) ^ v.u64 ^ f_bits ^ v.b;
  for (char c : v.s) sum += static_cast<uint8_t>(c);
  for (const auto& s : v.strings)
    for (char c : s) sum += static_cast<uint8_t>(c);
  for (double x : v.numbers) sum += static_cast<uint64_t>(x == x);
  for (const auto& a : v.arrays) sum += touch(a);
  return sum + v.array_size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = orchard::GGUFFile::from_memory(std::span<const uint8_t>(data, size), "fuzz.gguf");
    volatile uint64_t sink = 0;
    for (const auto& [key, value] : file->metadata()) {
      sink = sink + key.size() + touch(value);
      // The typed getters must answer or throw orchard::Error for every key.
      try { sink = sink + static_cast<uint64_t>(file->get_int(key).value_or(0)); } catch (const orchard::Error&) {}
      try { sink = sink + static_cast<uint64_t>(file->get_float(key).value_or(0) != 0); } catch (const orchard::Error&) {}
      try { sink = sink + (file->get_string_array(key) != nullptr); } catch (const orchard::Error&) {}
      try { sink = sink + (file->get_number_array(key) != nullptr); } catch (const orchard::Error&) {}
    }
    for (const auto& t : file->tensors()) {
      const uint8_t* p = file->tensor_data(t);
      sink = sink + p[0] + p[t.nbytes - 1] + static_cast<uint64_t>(t.n_elements());
      if (file->find_tensor(t.name) == nullptr) __builtin_trap();
    }
    const orchard::HParams hp = orchard::HParams::from_gguf(*file);
    const orchard::ModelWeights w = orchard::ModelWeights::bind(*file, hp);
    sink = sink + w.layers.size();
    orchard::Shard half;  // the second half of the experts, as an expert-parallel rank holds
    half.expert_begin = hp.n_expert / 2;
    if (hp.n_expert > 1) sink = sink + orchard::ModelWeights::byte_ranges(*file, hp, half).size();
  } catch (const orchard::Error&) {
    // Refusing a malformed file is the expected outcome.
  }
  return 0;
}
