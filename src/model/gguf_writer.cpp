#include "model/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "tensor/error.h"

namespace orchard {
namespace {

constexpr uint32_t kVersion = 3;
const char* const kAlignmentKey = "general.alignment";

bool valid_alignment(uint64_t a) { return a != 0 && (a & (a - 1)) == 0 && a <= std::numeric_limits<uint32_t>::max(); }

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

  template <typename T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) { out_.resize(align_up(out_.size(), alignment), 0); }

 private:
  std::vector<uint8_t>& out_;
};

[[noreturn]] void bad_value(const std::string& key, const std::string& what) {
  throw Error("GGUF writer: metadata key '" + key + "': " + what);
}

// Converts a stored number to the element type, refusing anything the type cannot hold exactly
// in range (casting an out-of-range double to an integer is undefined behaviour).
template <typename T>
T checked_number(double x, const std::string& key) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(x);
  } else {
    // 2^bits for unsigned, 2^(bits-1) for signed: the first value out of range.
    constexpr double upper = std::is_signed_v<T> ? -static_cast<double>(std::numeric_limits<T>::min())
                                                 : static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    constexpr double lower = static_cast<double>(std::numeric_limits<T>::min());
    if (!(x >= lower && x < upper) || std::trunc(x) != x)
      bad_value(key, "array element " + std::to_string(x) + " does not fit the element type");
    return static_cast<T>(x);
  }
}

template <typename T>
T checked_int(int64_t x, const std::string& key) {
  if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      x > static_cast<int64_t>(std::numeric_limits<T>::max()))
    bad_value(key, "value " + std::to_string(x) + " does not fit the value type");
  return static_cast<T>(x);
}

void encode_number(Encoder& e, GGUFType type, double x, const std::string& key) {
  switch (type) {
    case GGUFType::U8: e.put(checked_number<uint8_t>(x, key)); return;
    case GGUFType::I8: e.put(checked_number<int8_t>(x, key)); return;
    case GGUFType::U16: e.put(checked_number<uint16_t>(x, key)); return;
    case GGUFType::I16: e.put(checked_number<int16_t>(x, key)); return;
    case GGUFType::U32: e.put(checked_number<uint32_t>(x, key)); return;
    case GGUFType::I32: e.put(checked_number<int32_t>(x, key)); return;
    case GGUFType::U64: e.put(checked_number<uint64_t>(x, key)); return;
    case GGUFType::I64: e.put(checked_number<int64_t>(x, key)); return;
    case GGUFType::F32: e.put(static_cast<float>(x)); return;
    case GGUFType::F64: e.put(x); return;
    case GGUFType::BOOL:
      if (x != 0.0 && x != 1.0) bad_value(key, "bool array element " + std::to_string(x) + " is neither 0 nor 1");
      e.put<uint8_t>(x == 1.0);
      return;
    case GGUFType::STRING: case GGUFType::ARRAY: break;
  }
  bad_value(key, std::string("element type ") + gguf_type_name(type) + " is not a number type");
}

void encode_value(Encoder& e, const GGUFValue& v, const std::string& key);

void encode_array(Encoder& e, const GGUFValue& v, const std::string& key) {
  e.put(static_cast<uint32_t>(v.elem_type));
  e.put<uint64_t>(v.array_size());
  if (v.elem_type == GGUFType::STRING) {
    for (const auto& s : v.strings) e.put_string(s);
  } else if (v.elem_type == GGUFType::ARRAY) {
    for (const auto& a : v.arrays) {
      if (a.type != GGUFType::ARRAY) bad_value(key, "an element of an array of arrays is not an array");
      encode_value(e, a, key);
    }
  } else {
    for (double x : v.numbers) encode_number(e, v.elem_type, x, key);
  }
}

void encode_value(Encoder& e, const GGUFValue& v, const std::string& key) {
  switch (v.type) {
    case GGUFType::U8: e.put(checked_int<uint8_t>(v.i, key)); return;
    case GGUFType::I8: e.put(checked_int<int8_t>(v.i, key)); return;
    case GGUFType::U16: e.put(checked_int<uint16_t>(v.i, key)); return;
    case GGUFType::I16: e.put(checked_int<int16_t>(v.i, key)); return;
    case GGUFType::U32: e.put(checked_int<uint32_t>(v.i, key)); return;
    case GGUFType::I32: e.put(checked_int<int32_t>(v.i, key)); return;
    case GGUFType::U64:
      // The reader fills both fields; a hand-built value may set only `i`.
      if (v.u64 == 0 && v.i < 0) bad_value(key, "u64 value " + std::to_string(v.i) + " is negative");
      e.put<uint64_t>(v.u64 != 0 ? v.u64 : static_cast<uint64_t>(v.i));
      return;
    case GGUFType::I64: e.put<int64_t>(v.i); return;
    case GGUFType::F32: e.put(static_cast<float>(v.f)); return;
    case GGUFType::F64: e.put(v.f); return;
    case GGUFType::BOOL: e.put<uint8_t>(v.b ? 1 : 0); return;
    case GGUFType::STRING: e.put_string(v.s); return;
    case GGUFType::ARRAY: encode_array(e, v, key); return;
  }
  bad_value(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

GGUFValue scalar(GGUFType type) {
  GGUFValue v;
  v.type = type;
  return v;
}

GGUFValue number_array(GGUFType elem_type) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = elem_type;
  return v;
}

// Writes all of `data`, retrying short writes and interrupted calls.
bool write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, data, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

void GGUFWriter::set_u32(const std::string& key, uint32_t v) {
  GGUFValue x = scalar(GGUFType::U32);
  x.i = v;
  x.u64 = v;
  set_value(key, x);
}

void GGUFWriter::set_i32(const std::string& key, int32_t v) {
  GGUFValue x = scalar(GGUFType::I32);
  x.i = v;
  set_value(key, x);
}

void GGUFWriter::set_u64(const std::string& key, uint64_t v) {
  GGUFValue x = scalar(GGUFType::U64);
  x.i = static_cast<int64_t>(v);
  x.u64 = v;
  set_value(key, x);
}

void GGUFWriter::set_f32(const std::string& key, float v) {
  GGUFValue x = scalar(GGUFType::F32);
  x.f = v;
  set_value(key, x);
}

void GGUFWriter::set_bool(const std::string& key, bool v) {
  GGUFValue x = scalar(GGUFType::BOOL);
  x.b = v;
  set_value(key, x);
}

void GGUFWriter::set_string(const std::string& key, const std::string& v) {
  GGUFValue x = scalar(GGUFType::STRING);
  x.s = v;
  set_value(key, x);
}

void GGUFWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  GGUFValue x = number_array(GGUFType::STRING);
  x.strings = v;
  set_value(key, x);
}

void GGUFWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  GGUFValue x = number_array(GGUFType::F32);
  x.numbers.assign(v.begin(), v.end());
  set_value(key, x);
}

void GGUFWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  GGUFValue x = number_array(GGUFType::I32);
  x.numbers.assign(v.begin(), v.end());
  set_value(key, x);
}

void GGUFWriter::set_value(const std::string& key, const GGUFValue& v) {
  // Validates now so that a bad value is reported where it is set, not at write time.
  std::vector<uint8_t> scratch;
  Encoder e(scratch);
  encode_value(e, v, key);

  // The alignment key and the constructor argument describe the same thing; the key wins, which
  // lets a tool copy every key of a source file and keep its layout.
  if (key == kAlignmentKey) {
    if (v.type != GGUFType::U32 || !valid_alignment(static_cast<uint64_t>(v.i)))
      bad_value(key, "must be a u32 nonzero power of two");
    alignment_ = static_cast<uint64_t>(v.i);
  }
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = v;  // replacing keeps the original position
      return;
    }
  }
  kv_.emplace_back(key, v);
}

void GGUFWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                            std::vector<uint8_t> data) {
  const std::string where = "GGUF writer: tensor '" + name + "': ";
  const TypeInfo* info = type_info(static_cast<uint32_t>(type));
  if (!info) throw Error(where + "unknown type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > kGgufMaxDims)
    throw Error(where + std::to_string(ne.size()) + " dimensions, expected 1.." + std::to_string(kGgufMaxDims));
  uint64_t rows = 1;
  for (int64_t d : ne) {
    if (d <= 0) throw Error(where + "dimension " + std::to_string(d) + " is not positive");
  }
  for (size_t i = 1; i < ne.size(); ++i)
    if (__builtin_mul_overflow(rows, static_cast<uint64_t>(ne[i]), &rows))
      throw Error(where + "shape overflows 64 bits");
  size_t row = 0;
  try {
    row = row_bytes(type, ne[0]);
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(row), rows, &expected))
    throw Error(where + "shape overflows 64 bits");
  if (data.size() != expected)
    throw Error(where + "has " + std::to_string(data.size()) + " bytes of data, but " + info->name + " " +
                "of this shape needs " + std::to_string(expected));
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(where + "added twice");
  tensors_.push_back(Tensor{name, type, ne, std::move(data)});
}

std::vector<uint8_t> GGUFWriter::header_bytes() const {
  if (!valid_alignment(alignment_))
    throw Error("GGUF writer: alignment " + std::to_string(alignment_) + " is not a nonzero power of two");
  const bool alignment_key_set = std::any_of(kv_.begin(), kv_.end(),
                                             [](const auto& kv) { return kv.first == kAlignmentKey; });
  const bool write_alignment_key = !alignment_key_set && alignment_ != kGgufDefaultAlignment;

  std::vector<uint8_t> out;
  Encoder e(out);
  e.put<uint32_t>(0x46554747);  // "GGUF"
  e.put<uint32_t>(kVersion);
  e.put<uint64_t>(tensors_.size());
  e.put<uint64_t>(kv_.size() + (write_alignment_key ? 1 : 0));
  for (const auto& [key, value] : kv_) {
    e.put_string(key);
    e.put(static_cast<uint32_t>(value.type));
    encode_value(e, value, key);
  }
  if (write_alignment_key) {
    e.put_string(kAlignmentKey);
    e.put(static_cast<uint32_t>(GGUFType::U32));
    e.put(static_cast<uint32_t>(alignment_));
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) e.put<uint64_t>(static_cast<uint64_t>(d));
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  e.pad_to(alignment_);
  return out;
}

std::vector<uint8_t> GGUFWriter::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GGUFWriter::write(const std::string& path) const {
  const std::vector<uint8_t> header = header_bytes();  // may throw before any file is touched

  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw Error(path + ": cannot create a temporary file in " + dir.string() + ": " + std::strerror(errno));

  const auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + ": " + std::strerror(err));
  };

  const std::vector<uint8_t> zeros(static_cast<size_t>(alignment_), 0);
  if (!write_all(fd, header.data(), header.size())) fail("write failed");
  for (const auto& t : tensors_) {
    if (!write_all(fd, t.data.data(), t.data.size())) fail("write failed");
    const size_t pad = static_cast<size_t>(align_up(t.data.size(), alignment_) - t.data.size());
    if (!write_all(fd, zeros.data(), pad)) fail("write failed");
  }
  // mkstemp creates the file 0600; a model file is meant to be shared. (Reading the umask would
  // mean changing it, which races with other threads.)
  if (::fchmod(fd, 0644) != 0) fail("cannot set permissions");
  if (::fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": close failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot rename the temporary file into place: " + std::strerror(err));
  }
  // Makes the rename itself durable; failure here leaves a complete file, so it is not an error.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace orchard
