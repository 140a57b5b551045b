#pragma once
// GGUF reader (versions 2 and 3): memory-maps the file and validates every count, offset, size
// and type against the file size before anything is used, so a truncated, corrupt or hostile
// file is refused with an error naming the field instead of being read out of bounds.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/types.h"

namespace orchard {

enum class GGUFType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GGUFType t);

// The format's alignment of tensor data when `general.alignment` is absent, and its most
// dimensions per tensor (GGML_MAX_DIMS): the reader checks files by them, the writer writes by them.
constexpr uint64_t kGgufDefaultAlignment = 32;
constexpr uint32_t kGgufMaxDims = 4;

// One metadata value. Scalars live in the matching field; arrays keep their element type and
// elements (nested arrays are arrays of GGUFValue). Large homogeneous arrays of numbers or
// strings are stored compactly in `strings` / `numbers` to keep 150k-entry vocabularies cheap.
struct GGUFValue {
  GGUFType type = GGUFType::U8;
  // Scalars: integers as int64 (u64 values above INT64_MAX keep their bits in `u64`).
  int64_t i = 0;
  uint64_t u64 = 0;
  double f = 0;
  bool b = false;
  std::string s;
  // Arrays
  GGUFType elem_type = GGUFType::U8;
  std::vector<std::string> strings;   // when elem_type == STRING
  std::vector<double> numbers;        // when elem_type is a number or BOOL
  std::vector<GGUFValue> arrays;      // when elem_type == ARRAY
  size_t array_size() const;
};

struct GGUFTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the row length (ggml order)
  DType type = DType::F32;
  uint64_t offset = 0;      // relative to the start of the data section
  uint64_t nbytes = 0;
  int64_t n_elements() const;
};

// How a file's bytes reach memory: Map shares the page cache (cheap to open, for inspecting);
// Read copies them into huge-page-backed private memory (for running: much faster to stream).
enum class GGUFLoad { Map, Read };

class GGUFFile {
 public:
  // Loads and validates `path`; throws orchard::Error("<path>: <what is wrong>").
  static std::unique_ptr<GGUFFile> open(const std::string& path, GGUFLoad mode = GGUFLoad::Map);
  // File byte ranges [begin, end).
  using ByteRanges = std::vector<std::pair<uint64_t, uint64_t>>;
  // Like Read, but only the ranges `select` picks from the parsed header (plus the header
  // itself) are read; the rest of the file takes no memory. For a rank holding a shard.
  static std::unique_ptr<GGUFFile> open_selected(const std::string& path,
                                                 const std::function<ByteRanges(const GGUFFile&)>& select);
  // Parses a buffer the caller keeps alive (used by the fuzzer and tests). `name` prefixes errors.
  static std::unique_ptr<GGUFFile> from_memory(std::span<const uint8_t> bytes,
                                               const std::string& name = "<memory>");
  ~GGUFFile();
  GGUFFile(const GGUFFile&) = delete;
  GGUFFile& operator=(const GGUFFile&) = delete;

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
  const GGUFValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: nullopt when the key is absent; orchard::Error naming the key when present
  // with the wrong type.
  std::optional<int64_t> get_int(std::string_view key) const;  // any integer type
  std::optional<double> get_float(std::string_view key) const;  // F32/F64 (or integer)
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Arrays: nullptr when absent; Error when present with another element type.
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  const std::vector<double>* get_number_array(std::string_view key) const;

  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(std::string_view name) const;
  // Start of a tensor's bytes (already validated to lie inside the file).
  const uint8_t* tensor_data(const GGUFTensorInfo& t) const { return base_ + data_offset_ + t.offset; }
  // Gives back the whole pages inside [p, p+n) that this process will not read again (bytes
  // already copied elsewhere); a no-op for buffers it does not own.
  void release(const void* p, size_t n) const;

 private:
  GGUFFile() = default;
  void parse();

  std::string name_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when we own an mmap
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GGUFTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace orchard
