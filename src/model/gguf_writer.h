#pragma once
// Writes GGUF v3 files: metadata in insertion order, tensors aligned to `general.alignment`.
#include <cstdint>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace orchard {

class GGUFWriter {
 public:
  explicit GGUFWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Any value, including nested arrays (used by tests to round-trip every type).
  void set_value(const std::string& key, const GGUFValue& v);

  // `data` must hold exactly row_bytes(type, ne[0]) * (product of the other ne) bytes.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                  std::vector<uint8_t> data);

  // Writes to `path` via a temporary file and rename, so a failure never leaves half a file;
  // throws orchard::Error naming the path on any I/O failure (e.g. a full disk).
  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  // Header, metadata, tensor infos and the padding up to the data section.
  std::vector<uint8_t> header_bytes() const;

  uint64_t alignment_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace orchard
