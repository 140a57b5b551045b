#include "model/gguf_value_parser.h"

#include <limits>
#include <string>

namespace orchard {

const char* gguf_type_name(GGUFType t) {
  switch (t) {
    case GGUFType::U8: return "u8";
    case GGUFType::I8: return "i8";
    case GGUFType::U16: return "u16";
    case GGUFType::I16: return "i16";
    case GGUFType::U32: return "u32";
    case GGUFType::I32: return "i32";
    case GGUFType::F32: return "f32";
    case GGUFType::BOOL: return "bool";
    case GGUFType::STRING: return "string";
    case GGUFType::ARRAY: return "array";
    case GGUFType::U64: return "u64";
    case GGUFType::I64: return "i64";
    case GGUFType::F64: return "f64";
  }
  return "unknown";
}

size_t GGUFValue::array_size() const {
  if (type != GGUFType::ARRAY) return 0;
  if (elem_type == GGUFType::STRING) return strings.size();
  if (elem_type == GGUFType::ARRAY) return arrays.size();
  return numbers.size();
}

namespace gguf_detail {
namespace {

constexpr uint32_t kLastValueType = static_cast<uint32_t>(GGUFType::F64);

// The fewest file bytes one element can occupy; an array count is checked against the bytes
// that remain before anything is reserved, so a forged count cannot trigger a huge allocation.
size_t min_encoded_size(GGUFType t) {
  switch (t) {
    case GGUFType::U8: case GGUFType::I8: case GGUFType::BOOL: return 1;
    case GGUFType::U16: case GGUFType::I16: return 2;
    case GGUFType::U32: case GGUFType::I32: case GGUFType::F32: return 4;
    case GGUFType::U64: case GGUFType::I64: case GGUFType::F64: return 8;
    case GGUFType::STRING: return 8;                                      // length
    case GGUFType::ARRAY: return sizeof(uint32_t) + sizeof(uint64_t);    // type + count
  }
  return 1;
}

bool read_bool(ByteReader& r) {
  const uint8_t b = r.read<uint8_t>("bool value");
  // Anything but 0/1 means the reader is out of step with the writer; better to say so.
  if (b > 1) r.fail("bool value " + std::to_string(b) + " is neither 0 nor 1");
  return b == 1;
}

// Reads one number of `type` as a double (arrays store numbers this way, see gguf.h).
double read_number(ByteReader& r, GGUFType type) {
  switch (type) {
    case GGUFType::U8: return r.read<uint8_t>("u8 value");
    case GGUFType::I8: return r.read<int8_t>("i8 value");
    case GGUFType::U16: return r.read<uint16_t>("u16 value");
    case GGUFType::I16: return r.read<int16_t>("i16 value");
    case GGUFType::U32: return r.read<uint32_t>("u32 value");
    case GGUFType::I32: return r.read<int32_t>("i32 value");
    case GGUFType::F32: return r.read<float>("f32 value");
    case GGUFType::BOOL: return read_bool(r) ? 1.0 : 0.0;
    case GGUFType::U64: return static_cast<double>(r.read<uint64_t>("u64 value"));
    case GGUFType::I64: return static_cast<double>(r.read<int64_t>("i64 value"));
    case GGUFType::F64: return r.read<double>("f64 value");
    case GGUFType::STRING: case GGUFType::ARRAY: break;
  }
  r.fail(std::string("internal: ") + gguf_type_name(type) + " is not a number type");
}

void parse_array(ByteReader& r, GGUFValue& v, int depth) {
  v.elem_type = read_value_type(r, "array element type");
  const uint64_t count = r.read<uint64_t>("array count");
  const size_t min_size = min_encoded_size(v.elem_type);
  if (count > r.remaining() / min_size)
    r.fail("array count " + std::to_string(count) + " exceeds the remaining " + std::to_string(r.remaining()) +
           " bytes (" + gguf_type_name(v.elem_type) + " elements take at least " + std::to_string(min_size) +
           " bytes each)");
  if (v.elem_type == GGUFType::ARRAY && depth + 1 >= kMaxArrayDepth)
    r.fail("array nesting depth exceeds the limit of " + std::to_string(kMaxArrayDepth) + " levels");

  const size_t n = static_cast<size_t>(count);
  r.push_index(0);
  if (v.elem_type == GGUFType::STRING) {
    v.strings.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      r.set_index(i);
      v.strings.emplace_back(r.read_string("string"));
    }
  } else if (v.elem_type == GGUFType::ARRAY) {
    v.arrays.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      r.set_index(i);
      v.arrays.push_back(parse_value(r, GGUFType::ARRAY, depth + 1));
    }
  } else {
    v.numbers.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      r.set_index(i);
      v.numbers.push_back(read_number(r, v.elem_type));
    }
  }
  r.pop_index();
}

}  // namespace

GGUFType read_value_type(ByteReader& r, const char* field) {
  const uint32_t id = r.read<uint32_t>(field);
  if (id > kLastValueType)
    r.fail(std::string("unknown ") + field + " " + std::to_string(id) + " (known: 0.." +
           std::to_string(kLastValueType) + ")");
  return static_cast<GGUFType>(id);
}

GGUFValue parse_value(ByteReader& r, GGUFType type, int depth) {
  GGUFValue v;
  v.type = type;
  switch (type) {
    case GGUFType::U8: case GGUFType::U16: case GGUFType::U32: {
      const auto x = static_cast<uint64_t>(read_number(r, type));  // exact: at most 32 bits
      v.u64 = x;
      v.i = static_cast<int64_t>(x);
      break;
    }
    case GGUFType::I8: case GGUFType::I16: case GGUFType::I32:
      v.i = static_cast<int64_t>(read_number(r, type));  // exact: at most 32 bits
      break;
    case GGUFType::U64:
      v.u64 = r.read<uint64_t>("u64 value");
      v.i = static_cast<int64_t>(v.u64);  // wraps above INT64_MAX; getters check `u64`
      break;
    case GGUFType::I64:
      v.i = r.read<int64_t>("i64 value");
      break;
    case GGUFType::F32: v.f = r.read<float>("f32 value"); break;
    case GGUFType::F64: v.f = r.read<double>("f64 value"); break;
    case GGUFType::BOOL: v.b = read_bool(r); break;
    case GGUFType::STRING: v.s = std::string(r.read_string("string value")); break;
    case GGUFType::ARRAY: parse_array(r, v, depth); break;
  }
  return v;
}

}  // namespace gguf_detail
}  // namespace orchard
