#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "model/gguf_byte_reader.h"
#include "model/gguf_value_parser.h"
#include "platform/platform.h"
#include "tensor/error.h"

namespace orchard {

using gguf_detail::ByteReader;

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Smallest possible encodings, used to refuse forged counts before anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // key length, value type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, ne[0], type, offset

uint32_t byte_swap(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

std::string printable(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string describe(const GGUFTensorInfo& t, size_t index) {
  return "tensor '" + t.name + "' (#" + std::to_string(index) + ")";
}

// How a value's type reads in an error: "array of string" is more useful than "array".
std::string value_type_text(const GGUFValue& v) {
  if (v.type != GGUFType::ARRAY) return gguf_type_name(v.type);
  return std::string("array of ") + gguf_type_name(v.elem_type);
}

bool is_integer(GGUFType t) {
  switch (t) {
    case GGUFType::U8: case GGUFType::I8: case GGUFType::U16: case GGUFType::I16:
    case GGUFType::U32: case GGUFType::I32: case GGUFType::U64: case GGUFType::I64:
      return true;
    default:
      return false;
  }
}

bool is_number(GGUFType t) {
  return is_integer(t) || t == GGUFType::F32 || t == GGUFType::F64 || t == GGUFType::BOOL;
}

}  // namespace

int64_t GGUFTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

namespace {

// Copies the file into private anonymous memory backed by transparent huge pages. Page-cache
// pages are 4 KiB, and streaming every weight through 4 KiB TLB entries once per token ran the
// generation kernels at ~40 % of the speed they reach on huge pages (measured, docs/benchmarks.md).
void* read_into_anonymous_memory(int fd, const std::string& path, size_t size) {
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot allocate " + std::to_string(size) + " bytes to load the file: " +
                std::strerror(err));
  }
  platform::advise_huge_pages(mem, size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(mem) + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::munmap(mem, size);
      ::close(fd);
      throw Error(path + ": read failed after " + std::to_string(done) + " of " + std::to_string(size) +
                  " bytes: " + (err ? std::strerror(err) : "unexpected end of file"));
    }
    done += static_cast<size_t>(n);
  }
  return mem;
}

}  // namespace

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path, GGUFLoad mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw Error(path + ": file is empty (0 bytes), not a GGUF file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (mode == GGUFLoad::Map) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (map == MAP_FAILED) throw Error(path + ": cannot memory-map " + std::to_string(size) + " bytes: " +
                                       std::strerror(map_errno));
  } else {
    map = read_into_anonymous_memory(fd, path, size);
    ::close(fd);
  }

  std::unique_ptr<GGUFFile> file(new GGUFFile());
  file->name_ = path;
  file->mapping_ = map;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  file->parse();  // on error the destructor unmaps
  return file;
}

std::unique_ptr<GGUFFile> GGUFFile::open_selected(const std::string& path,
                                                  const std::function<ByteRanges(const GGUFFile&)>& select) {
  ByteRanges ranges;
  size_t size = 0;
  {
    auto header = open(path, GGUFLoad::Map);
    ranges = select(*header);
    ranges.emplace_back(0, header->data_offset());
    size = header->file_size();
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  // Anonymous memory is only backed where it is written: untouched ranges cost nothing.
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot reserve " + std::to_string(size) + " bytes: " + std::strerror(err));
  }
  platform::advise_huge_pages(mem, size);
  for (const auto& [begin, end] : ranges) {
    size_t done = begin;
    while (done < std::min<uint64_t>(end, size)) {
      const ssize_t n = ::pread(fd, static_cast<char*>(mem) + done, std::min<uint64_t>(end, size) - done,
                                static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : 0;
        ::munmap(mem, size);
        ::close(fd);
        throw Error(path + ": read failed at byte " + std::to_string(done) + ": " +
                    (err ? std::strerror(err) : "unexpected end of file"));
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  std::unique_ptr<GGUFFile> file(new GGUFFile());
  file->name_ = path;
  file->mapping_ = mem;
  file->base_ = static_cast<const uint8_t*>(mem);
  file->size_ = size;
  file->parse();
  return file;
}

void GGUFFile::release(const void* p, size_t n) const {
  if (!mapping_ || n == 0) return;
  // Whole 2 MiB regions only: giving back part of a transparent huge page splits it, and the
  // neighbouring weights left in it would then stream through 4 KiB pages (measured: tensor-
  // parallel generation ~8 % slower).
  const uintptr_t page = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (end > begin) platform::release_pages(reinterpret_cast<void*>(begin), end - begin);
}

std::unique_ptr<GGUFFile> GGUFFile::from_memory(std::span<const uint8_t> bytes, const std::string& name) {
  std::unique_ptr<GGUFFile> file(new GGUFFile());
  file->name_ = name;
  file->base_ = bytes.data();
  file->size_ = bytes.size();
  file->parse();
  return file;
}

GGUFFile::~GGUFFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

void GGUFFile::parse() {
  ByteReader r(std::span<const uint8_t>(base_, size_), name_);

  // Header.
  if (size_ < 4) r.fail("file is " + std::to_string(size_) + " bytes, too short for the GGUF magic");
  const uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic)
    r.fail("bad magic '" + printable(std::string_view(reinterpret_cast<const char*>(base_), 4)) +
           "', expected 'GGUF' (not a GGUF file)");
  version_ = r.read<uint32_t>("version");
  if (version_ == 1)
    r.fail("GGUF version 1 is not supported (it used 32-bit counts); re-convert the model with a current tool");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = byte_swap(version_);
    if (swapped == 2 || swapped == 3)
      r.fail("version field reads " + std::to_string(swapped) +
             " byte-swapped: this is a big-endian GGUF file, only little-endian files are supported");
    r.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2 and 3)");
  }
  const uint64_t tensor_count = r.read<uint64_t>("tensor_count");
  const uint64_t kv_count = r.read<uint64_t>("kv_count");
  if (kv_count > r.remaining() / kMinKvBytes)
    r.fail("kv_count " + std::to_string(kv_count) + " is impossible: the remaining " +
           std::to_string(r.remaining()) + " bytes hold at most " + std::to_string(r.remaining() / kMinKvBytes) +
           " key/value pairs");
  if (tensor_count > r.remaining() / kMinTensorInfoBytes)
    r.fail("tensor_count " + std::to_string(tensor_count) + " is impossible: the remaining " +
           std::to_string(r.remaining()) + " bytes hold at most " +
           std::to_string(r.remaining() / kMinTensorInfoBytes) + " tensor infos");

  // Metadata.
  kv_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string where = "metadata key #" + std::to_string(k);
    r.set_context(where);
    std::string key(r.read_string("key"));
    r.set_context(where + " '" + key + "'");
    if (kv_index_.count(key)) r.fail("duplicate key (first defined as #" + std::to_string(kv_index_[key]) + ")");
    const GGUFType type = gguf_detail::read_value_type(r, "value type");
    GGUFValue value = gguf_detail::parse_value(r, type);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GGUFValue* a = find("general.alignment")) {
    r.set_context("metadata key 'general.alignment'");
    if (a->type != GGUFType::U32) r.fail(std::string("type is ") + value_type_text(*a) + ", expected u32");
    if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0)
      r.fail("alignment " + std::to_string(a->u64) + " is not a nonzero power of two");
    alignment_ = a->u64;
  } else {
    alignment_ = kGgufDefaultAlignment;
  }

  // Tensor infos.
  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t ti = 0; ti < tensor_count; ++ti) {
    const std::string index = " (#" + std::to_string(ti) + ")";
    r.set_context("tensor #" + std::to_string(ti));
    GGUFTensorInfo t;
    t.name = std::string(r.read_string("name"));
    r.set_context("tensor '" + t.name + "'" + index);
    if (tensor_index_.count(t.name))
      r.fail("duplicate tensor name (first defined as #" + std::to_string(tensor_index_[t.name]) + ")");

    const uint32_t n_dims = r.read<uint32_t>("n_dims");
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      r.fail("n_dims " + std::to_string(n_dims) + " is outside 1.." + std::to_string(kGgufMaxDims));
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const std::string field = "ne[" + std::to_string(d) + "]";
      const uint64_t raw = r.read<uint64_t>(field.c_str());
      if (raw == 0 || raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        r.fail(field + " = " + std::to_string(static_cast<int64_t>(raw)) + " is not a positive dimension");
      t.ne.push_back(static_cast<int64_t>(raw));
      if (__builtin_mul_overflow(n_elements, t.ne.back(), &n_elements))
        r.fail("shape " + shape_text(t.ne) + " has more elements than fit in 64 bits");
    }

    const uint32_t type_id = r.read<uint32_t>("type");
    const TypeInfo* info = type_info(type_id);
    if (!info) r.fail("unknown tensor type id " + std::to_string(type_id));
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % info->block_elems != 0)
      r.fail("ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " + info->name + " block size " +
             std::to_string(info->block_elems));
    const uint64_t row = static_cast<uint64_t>(t.ne[0] / info->block_elems) * info->block_bytes;
    if (__builtin_mul_overflow(row, static_cast<uint64_t>(n_elements / t.ne[0]), &t.nbytes))
      r.fail("shape " + shape_text(t.ne) + " needs more bytes than fit in 64 bits");

    t.offset = r.read<uint64_t>("offset");
    if (t.offset % alignment_ != 0)
      r.fail("offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos. Both
  // values are far below 2^63, so the rounding cannot overflow.
  data_offset_ = (static_cast<uint64_t>(r.pos()) + alignment_ - 1) / alignment_ * alignment_;

  const auto fail_tensor = [&](size_t i, const std::string& what) {
    throw Error(name_ + ": " + describe(tensors_[i], i) + ": " + what);
  };
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const GGUFTensorInfo& t = tensors_[i];
    uint64_t start = 0, end = 0;
    if (__builtin_add_overflow(data_offset_, t.offset, &start) || __builtin_add_overflow(start, t.nbytes, &end) ||
        end > size_)
      fail_tensor(i, "data [offset " + std::to_string(t.offset) + ", " + std::to_string(t.nbytes) +
                         " bytes] runs past the end of the file (size " + std::to_string(size_) +
                         ", data section at " + std::to_string(data_offset_) + ")");
  }

  // Overlapping tensors would alias each other's weights: almost certainly a broken writer.
  std::vector<size_t> by_offset(tensors_.size());
  for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = i;
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GGUFTensorInfo& prev = tensors_[by_offset[k - 1]];
    const GGUFTensorInfo& next = tensors_[by_offset[k]];
    if (prev.offset + prev.nbytes > next.offset)
      fail_tensor(by_offset[k], "data [offset " + std::to_string(next.offset) + "] overlaps " +
                                    describe(prev, by_offset[k - 1]) + " [offset " + std::to_string(prev.offset) +
                                    ", " + std::to_string(prev.nbytes) + " bytes]");
  }
}

const GGUFValue* GGUFFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const GGUFValue& v, const char* wanted) {
  throw Error(file + ": metadata key '" + std::string(key) + "' has type " + value_type_text(v) + ", expected " +
              wanted);
}

}  // namespace

std::optional<int64_t> GGUFFile::get_int(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type)) wrong_type(name_, key, *v, "an integer");
  if (v->type == GGUFType::U64 && v->u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(name_ + ": metadata key '" + std::string(key) + "': u64 value " + std::to_string(v->u64) +
                " does not fit in a signed 64-bit integer");
  return v->i;
}

std::optional<double> GGUFFile::get_float(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GGUFType::F32 || v->type == GGUFType::F64) return v->f;
  if (v->type == GGUFType::U64) return static_cast<double>(v->u64);
  if (is_integer(v->type)) return static_cast<double>(v->i);
  wrong_type(name_, key, *v, "a number");
}

std::optional<bool> GGUFFile::get_bool(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GGUFType::BOOL) wrong_type(name_, key, *v, "bool");
  return v->b;
}

std::optional<std::string> GGUFFile::get_string(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GGUFType::STRING) wrong_type(name_, key, *v, "string");
  return v->s;
}

const std::vector<std::string>* GGUFFile::get_string_array(std::string_view key) const {
  static const std::vector<std::string> kEmpty;
  const GGUFValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != GGUFType::ARRAY) wrong_type(name_, key, *v, "array of string");
  // Writers give empty arrays arbitrary element types; an empty list is an empty list.
  if (v->array_size() == 0) return &kEmpty;
  if (v->elem_type != GGUFType::STRING) wrong_type(name_, key, *v, "array of string");
  return &v->strings;
}

const std::vector<double>* GGUFFile::get_number_array(std::string_view key) const {
  static const std::vector<double> kEmpty;
  const GGUFValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != GGUFType::ARRAY) wrong_type(name_, key, *v, "array of numbers");
  if (v->array_size() == 0) return &kEmpty;
  if (!is_number(v->elem_type)) wrong_type(name_, key, *v, "array of numbers");
  return &v->numbers;
}

}  // namespace orchard
