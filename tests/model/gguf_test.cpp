// GGUF reader and writer: round trips, the shared golden files, and corrupt files that must be
// refused with an error naming the offending field (never a crash).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tensor/error.h"
#include "test_data.h"

namespace orchard {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------------------------
// Helpers

// Builds GGUF images byte by byte, so a test can forge exactly the field it wants to break.
struct Raw {
  std::vector<uint8_t> b;

  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(static_cast<uint32_t>(GGUFType::U32)).u32(v); }
  Raw& tensor_info(std::string_view name, std::initializer_list<int64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) u64(static_cast<uint64_t>(d));
    return u32(type).u64(offset);
  }
  Raw& pad_to(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }

  template <typename T>
  Raw& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
};

std::unique_ptr<GGUFFile> parse(const std::vector<uint8_t>& bytes) {
  return GGUFFile::from_memory(bytes, "x.gguf");
}

// Asserts that parsing fails with an orchard::Error that starts with the file name and contains
// every one of `parts`.
void expect_refused(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> parts) {
  try {
    parse(bytes);
    ADD_FAILURE() << "the file was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("x.gguf: "));
    for (const char* p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

GGUFValue scalar_int(GGUFType t, int64_t i) {
  GGUFValue v;
  v.type = t;
  v.i = i;
  v.u64 = static_cast<uint64_t>(i);
  return v;
}

GGUFValue array_of(GGUFType elem, std::vector<double> numbers) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = elem;
  v.numbers = std::move(numbers);
  return v;
}

GGUFValue array_of_arrays(std::vector<GGUFValue> items) {
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  v.elem_type = GGUFType::ARRAY;
  v.arrays = std::move(items);
  return v;
}

void expect_same_value(const GGUFValue& want, const GGUFValue& got, const std::string& key) {
  SCOPED_TRACE(key);
  ASSERT_EQ(want.type, got.type);
  switch (want.type) {
    case GGUFType::U64: EXPECT_EQ(want.u64, got.u64); break;
    case GGUFType::F32: case GGUFType::F64: EXPECT_EQ(want.f, got.f); break;
    case GGUFType::BOOL: EXPECT_EQ(want.b, got.b); break;
    case GGUFType::STRING: EXPECT_EQ(want.s, got.s); break;
    case GGUFType::ARRAY:
      ASSERT_EQ(want.elem_type, got.elem_type);
      EXPECT_EQ(want.strings, got.strings);
      EXPECT_EQ(want.numbers, got.numbers);
      ASSERT_EQ(want.arrays.size(), got.arrays.size());
      for (size_t i = 0; i < want.arrays.size(); ++i)
        expect_same_value(want.arrays[i], got.arrays[i], key + "[" + std::to_string(i) + "]");
      break;
    default: EXPECT_EQ(want.i, got.i); break;
  }
}

// A small valid file: two keys and two tensors, used by the corruption tests.
std::vector<uint8_t> small_valid_file() {
  GGUFWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
  w.set_f32_array("tokenizer.ggml.scores", {0.f, -1.f, -2.f});
  w.add_tensor("a", DType::F32, {4, 2}, random_bytes(32, 1));
  w.add_tensor("b", DType::Q8_0, {32}, random_bytes(34, 2));
  return w.to_bytes();
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(GgufRoundTrip, EveryValueTypeAndSeveralTensorTypesAreBitExact) {
  std::vector<std::pair<std::string, GGUFValue>> values;
  values.emplace_back("t.u8", scalar_int(GGUFType::U8, 255));
  values.emplace_back("t.i8", scalar_int(GGUFType::I8, -128));
  values.emplace_back("t.u16", scalar_int(GGUFType::U16, 65535));
  values.emplace_back("t.i16", scalar_int(GGUFType::I16, -32768));
  values.emplace_back("t.u32", scalar_int(GGUFType::U32, 4294967295));
  values.emplace_back("t.i32", scalar_int(GGUFType::I32, std::numeric_limits<int32_t>::min()));
  GGUFValue u64_max;
  u64_max.type = GGUFType::U64;
  u64_max.u64 = std::numeric_limits<uint64_t>::max();
  values.emplace_back("t.u64", u64_max);
  values.emplace_back("t.i64", scalar_int(GGUFType::I64, std::numeric_limits<int64_t>::min()));
  GGUFValue f32;
  f32.type = GGUFType::F32;
  f32.f = 9.99999974738e-06f;
  values.emplace_back("t.f32", f32);
  GGUFValue f64;
  f64.type = GGUFType::F64;
  f64.f = 0.1;
  values.emplace_back("t.f64", f64);
  GGUFValue flag;
  flag.type = GGUFType::BOOL;
  flag.b = true;
  values.emplace_back("t.bool", flag);
  GGUFValue text;
  text.type = GGUFType::STRING;
  text.s = "héllo ▁wörld 🌳 \n\t\x01 end";
  values.emplace_back("t.string.utf8", text);
  GGUFValue empty_text;
  empty_text.type = GGUFType::STRING;
  values.emplace_back("t.string.empty", empty_text);

  values.emplace_back("a.u8", array_of(GGUFType::U8, {0, 1, 255}));
  values.emplace_back("a.i8", array_of(GGUFType::I8, {-128, 0, 127}));
  values.emplace_back("a.u16", array_of(GGUFType::U16, {0, 65535}));
  values.emplace_back("a.i16", array_of(GGUFType::I16, {-32768, 32767}));
  values.emplace_back("a.u32", array_of(GGUFType::U32, {0, 4294967295.0}));
  values.emplace_back("a.i32", array_of(GGUFType::I32, {-2147483648.0, 2147483647.0}));
  values.emplace_back("a.u64", array_of(GGUFType::U64, {0, 9007199254740992.0}));
  values.emplace_back("a.i64", array_of(GGUFType::I64, {-9007199254740992.0, 42}));
  values.emplace_back("a.f32", array_of(GGUFType::F32, {0.5, -1.25, 1e-5f}));
  values.emplace_back("a.f64", array_of(GGUFType::F64, {0.1, -1e300}));
  values.emplace_back("a.bool", array_of(GGUFType::BOOL, {1, 0, 1}));
  values.emplace_back("a.empty.i32", array_of(GGUFType::I32, {}));
  GGUFValue strings;
  strings.type = GGUFType::ARRAY;
  strings.elem_type = GGUFType::STRING;
  strings.strings = {"<unk>", "▁the", "", "日本語"};
  values.emplace_back("a.string", strings);
  GGUFValue empty_strings = strings;
  empty_strings.strings.clear();
  values.emplace_back("a.empty.string", empty_strings);
  values.emplace_back("a.nested",
                      array_of_arrays({array_of(GGUFType::I32, {1, 2, 3}), array_of(GGUFType::I32, {}),
                                       array_of_arrays({strings, array_of(GGUFType::F32, {2.5})})}));
  values.emplace_back("a.empty.nested", array_of_arrays({}));

  GGUFWriter w;
  for (const auto& [k, v] : values) w.set_value(k, v);
  const auto f32_data = random_bytes(4 * 8 * 3, 11);
  const auto f16_data = random_bytes(2 * 64, 12);
  const auto q8_data = random_bytes(34 * 2 * 3, 13);
  const auto q4_data = random_bytes(18 * 4 * 1 * 2 * 2, 14);
  w.add_tensor("f32", DType::F32, {8, 3}, f32_data);
  w.add_tensor("f16", DType::F16, {64}, f16_data);
  w.add_tensor("q8_0", DType::Q8_0, {64, 3}, q8_data);
  w.add_tensor("q4_0", DType::Q4_0, {128, 1, 2, 2}, q4_data);
  const auto bytes = w.to_bytes();

  auto f = parse(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  ASSERT_EQ(f->metadata().size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, values[i].first);  // insertion order is kept
    expect_same_value(values[i].second, f->metadata()[i].second, values[i].first);
  }

  const std::vector<std::tuple<std::string, DType, std::vector<int64_t>, const std::vector<uint8_t>*>> want = {
      {"f32", DType::F32, {8, 3}, &f32_data},
      {"f16", DType::F16, {64}, &f16_data},
      {"q8_0", DType::Q8_0, {64, 3}, &q8_data},
      {"q4_0", DType::Q4_0, {128, 1, 2, 2}, &q4_data}};
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [name, type, ne, data] = want[i];
    const GGUFTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, type);
    EXPECT_EQ(t->ne, ne);
    EXPECT_EQ(t->nbytes, data->size());
    EXPECT_EQ(t->offset % 32, 0u);
    EXPECT_EQ(std::vector<uint8_t>(f->tensor_data(*t), f->tensor_data(*t) + t->nbytes), *data) << name;
  }
  // Writing what was read gives the same bytes again.
  GGUFWriter again;
  for (const auto& [k, v] : f->metadata()) again.set_value(k, v);
  for (const auto& t : f->tensors())
    again.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(f->tensor_data(t), f->tensor_data(t) + t.nbytes));
  EXPECT_EQ(again.to_bytes(), bytes);
}

TEST(GgufRoundTrip, NonDefaultAlignmentIsWrittenAndHonoured) {
  GGUFWriter w(256);
  w.set_u32("x", 1);
  w.add_tensor("a", DType::F32, {3}, random_bytes(12, 3));
  w.add_tensor("b", DType::F32, {5}, random_bytes(20, 4));
  auto f = parse(w.to_bytes());
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->get_int("general.alignment"), 256);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->find_tensor("b")->offset, 256u);
}

TEST(GgufRoundTrip, WriteGoesThroughTheFileSystemAndOpenMapsIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("orchard_gguf_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "small.gguf").string();
  GGUFWriter w;
  w.set_string("general.name", "tiny");
  w.add_tensor("w", DType::F16, {16, 2}, random_bytes(64, 5));
  w.write(path);
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(f->get_string("general.name"), "tiny");
  EXPECT_EQ(std::vector<uint8_t>(f->tensor_data(f->tensors()[0]), f->tensor_data(f->tensors()[0]) + 64),
            random_bytes(64, 5));
  // Only the final file is left behind: the temporary was renamed into place.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, Version2FilesReadLikeVersion3) {
  auto bytes = small_valid_file();
  bytes[4] = 2;
  auto f = parse(bytes);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->tensors().size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Writer errors

TEST(GgufWriter, WriteFailureNamesThePath) {
  GGUFWriter w;
  w.set_u32("x", 1);
  try {
    w.write("/nonexistent-orchard-dir/out.gguf");
    ADD_FAILURE() << "write succeeded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-orchard-dir/out.gguf"));
  }
}

TEST(GgufWriter, RefusesInconsistentTensorsAndValues) {
  GGUFWriter w;
  EXPECT_THROW(w.add_tensor("short", DType::F32, {4}, std::vector<uint8_t>(15)), Error);
  EXPECT_THROW(w.add_tensor("partial_block", DType::Q4_0, {16}, std::vector<uint8_t>(9)), Error);
  EXPECT_THROW(w.add_tensor("five_dims", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor("zero_dim", DType::F32, {4, 0}, {}), Error);
  w.add_tensor("ok", DType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("ok", DType::F32, {1}, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.set_value("bad.u8", array_of(GGUFType::U8, {256})), Error);
  EXPECT_THROW(w.set_value("bad.i32", array_of(GGUFType::I32, {0.5})), Error);
  EXPECT_THROW(w.set_value("bad.bool", array_of(GGUFType::BOOL, {2})), Error);
  EXPECT_THROW(w.set_value("bad.i8", scalar_int(GGUFType::I8, 128)), Error);
  EXPECT_THROW(w.set_u32("general.alignment", 48), Error);
  EXPECT_THROW(GGUFWriter(3).to_bytes(), Error);
}

// ---------------------------------------------------------------------------------------------
// Typed getters

TEST(GgufGetters, ConvertWhereSafeAndNameKeyAndTypesOtherwise) {
  GGUFWriter w;
  w.set_u32("u32", 7);
  w.set_u64("u64.max", std::numeric_limits<uint64_t>::max());
  w.set_u64("u64.small", 5);
  w.set_f32("f32", 0.5f);
  w.set_string("s", "text");
  w.set_bool("b", false);
  w.set_i32_array("ints", {1, -2});
  w.set_value("empty", array_of(GGUFType::U8, {}));
  auto f = parse(w.to_bytes());

  EXPECT_EQ(f->get_int("u32"), 7);
  EXPECT_EQ(f->get_int("u64.small"), 5);
  EXPECT_EQ(f->get_int("absent"), std::nullopt);
  EXPECT_EQ(f->get_float("f32"), 0.5);
  EXPECT_EQ(f->get_float("u32"), 7.0);
  EXPECT_EQ(f->get_bool("b"), false);
  EXPECT_EQ(f->get_string("s"), "text");
  EXPECT_EQ(*f->get_number_array("ints"), (std::vector<double>{1, -2}));
  EXPECT_EQ(f->get_string_array("absent"), nullptr);
  ASSERT_NE(f->get_string_array("empty"), nullptr);
  EXPECT_TRUE(f->get_string_array("empty")->empty());

  try {
    f->get_int("s");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'s'"));
    EXPECT_THAT(e.what(), HasSubstr("string"));
    EXPECT_THAT(e.what(), HasSubstr("integer"));
  }
  EXPECT_THROW(f->get_int("u64.max"), Error);
  EXPECT_THROW(f->get_float("s"), Error);
  EXPECT_THROW(f->get_bool("u32"), Error);
  EXPECT_THROW(f->get_string("u32"), Error);
  EXPECT_THROW(f->get_string_array("ints"), Error);
  EXPECT_THROW(f->get_number_array("s"), Error);
}

// ---------------------------------------------------------------------------------------------
// Golden files from the shared data folder

TEST(GgufGolden, Stories260K) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  auto f = GGUFFile::open(test::data_file("models/stories260K.gguf").string());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 14176u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("tokenizer.ggml.padding_token_id"), 4294967295);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  ASSERT_NE(f->get_string_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->at(1), "<s>");
  EXPECT_EQ(f->get_number_array("tokenizer.ggml.scores")->size(), 512u);
  const GGUFTensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_EQ(emb->nbytes, 64u * 512 * 4);
  // output.weight is a byte-identical copy of the tied embedding.
  const GGUFTensorInfo* out = f->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(std::memcmp(f->tensor_data(*emb), f->tensor_data(*out), emb->nbytes), 0);
}

TEST(GgufGolden, Stories260KRewrittenByOurWriterIsByteIdentical) {
  ORCHARD_REQUIRE_FILES("models/stories260K.gguf");
  const auto path = test::data_file("models/stories260K.gguf");
  auto f = GGUFFile::open(path.string());
  GGUFWriter w(f->alignment());
  for (const auto& [k, v] : f->metadata()) w.set_value(k, v);
  for (const auto& t : f->tensors())
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(f->tensor_data(t), f->tensor_data(t) + t.nbytes));
  const auto original = test::read_bytes(path);
  const auto rewritten = w.to_bytes();
  ASSERT_EQ(rewritten.size(), original.size());
  EXPECT_EQ(std::memcmp(rewritten.data(), original.data(), original.size()), 0);
}

TEST(GgufGolden, RandllamaQ4KSTensorTypes) {
  ORCHARD_REQUIRE_DATA();
  auto f = GGUFFile::open(test::data_file("golden/quant/randllama.Q4_K_S.gguf").string());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_int("general.file_type"), 14);
  int q4k = 0, f32 = 0;
  for (const auto& t : f->tensors()) {
    if (t.ne.size() == 1) {
      EXPECT_EQ(t.type, DType::F32) << t.name;
      ++f32;
    } else {
      EXPECT_EQ(t.type, DType::Q4_K) << t.name;
      ++q4k;
    }
  }
  EXPECT_EQ(q4k, 16);
  EXPECT_EQ(f32, 5);
  const GGUFTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(q->nbytes, 256u / 256 * 144 * 256);
}

TEST(GgufGolden, RandllamaF32AttnQDataOffset) {
  ORCHARD_REQUIRE_DATA();
  auto f = GGUFFile::open(test::data_file("golden/quant/randllama.F32.gguf").string());
  const GGUFTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(f->data_offset() + q->offset, 538016u);
  EXPECT_EQ(f->tensor_data(*q) - f->tensor_data(f->tensors()[0]) + f->data_offset() + f->tensors()[0].offset,
            538016);
}

// ---------------------------------------------------------------------------------------------
// Corrupt files: each must be refused with a message naming the field.

TEST(GgufCorrupt, BadMagic) {
  expect_refused(Raw().u32(0x67676d6c).u32(3).u64(0).u64(0).b, {"magic", "expected 'GGUF'"});
  expect_refused(Raw().u8('G').u8('G').b, {"too short", "magic"});
}

TEST(GgufCorrupt, UnsupportedVersions) {
  expect_refused(Raw().header(0, 0, 1).b, {"version 1", "not supported"});
  expect_refused(Raw().header(0, 0, 99).b, {"version 99"});
  expect_refused(Raw().header(0, 0, 0x03000000).b, {"big-endian"});
}

TEST(GgufCorrupt, TruncatedHeader) {
  auto bytes = Raw().header(0, 0).b;
  bytes.resize(10);
  expect_refused(bytes, {"header", "tensor_count", "truncated"});
}

TEST(GgufCorrupt, AbsurdCounts) {
  expect_refused(Raw().header(0, 1ull << 40).zeros(64).b, {"kv_count 1099511627776"});
  expect_refused(Raw().header(std::numeric_limits<uint64_t>::max(), 0).zeros(64).b, {"tensor_count"});
}

TEST(GgufCorrupt, TruncatedInKeyString) {
  auto bytes = Raw().header(0, 1).u64(40).b;
  bytes.insert(bytes.end(), {'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'n', 'a', 'm', 'e', 'x'});
  expect_refused(bytes, {"metadata key #0", "key", "length 40 exceeds the remaining 13 bytes"});
}

TEST(GgufCorrupt, HugeStringLength) {
  auto bytes = Raw().header(0, 1).str("general.name").u32(static_cast<uint32_t>(GGUFType::STRING))
                   .u64(1ull << 62).zeros(16).b;
  expect_refused(bytes, {"metadata key #0 'general.name'", "string value", "exceeds the remaining 16 bytes"});
}

TEST(GgufCorrupt, HugeArrayCount) {
  auto bytes = Raw().header(0, 1).str("tokenizer.ggml.tokens").u32(static_cast<uint32_t>(GGUFType::ARRAY))
                   .u32(static_cast<uint32_t>(GGUFType::STRING)).u64(4294967295u).zeros(100).b;
  expect_refused(bytes, {"'tokenizer.ggml.tokens'", "array count 4294967295 exceeds the remaining 100 bytes"});
}

TEST(GgufCorrupt, StringInsideArrayRunsPastTheEnd) {
  auto bytes = Raw().header(0, 1).str("toks").u32(static_cast<uint32_t>(GGUFType::ARRAY))
                   .u32(static_cast<uint32_t>(GGUFType::STRING)).u64(2).str("ok").u64(50).zeros(8).b;
  expect_refused(bytes, {"'toks'[1]", "string", "length 50"});
}

TEST(GgufCorrupt, UnknownMetadataValueTypes) {
  expect_refused(Raw().header(0, 1).str("k").u32(13).zeros(8).b, {"'k'", "unknown value type 13"});
  expect_refused(Raw().header(0, 1).str("k").u32(static_cast<uint32_t>(GGUFType::ARRAY)).u32(77).u64(0).b,
                 {"'k'", "unknown array element type 77"});
}

TEST(GgufCorrupt, NestingTooDeep) {
  Raw raw;
  raw.header(0, 1).str("deep").u32(static_cast<uint32_t>(GGUFType::ARRAY));
  for (int i = 0; i < 9; ++i) raw.u32(static_cast<uint32_t>(GGUFType::ARRAY)).u64(1);
  raw.u32(static_cast<uint32_t>(GGUFType::U8)).u64(0);
  expect_refused(raw.b, {"'deep'", "nesting depth"});
}

TEST(GgufCorrupt, DuplicateKey) {
  expect_refused(Raw().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2).b,
                 {"metadata key #1 'a.b'", "duplicate key"});
}

TEST(GgufCorrupt, BadBool) {
  expect_refused(Raw().header(0, 1).str("flag").u32(static_cast<uint32_t>(GGUFType::BOOL)).u8(2).b,
                 {"'flag'", "bool value 2"});
}

TEST(GgufCorrupt, BadAlignment) {
  expect_refused(Raw().header(0, 1).kv_u32("general.alignment", 0).b, {"general.alignment", "power of two"});
  expect_refused(Raw().header(0, 1).kv_u32("general.alignment", 3).b, {"general.alignment", "alignment 3"});
  expect_refused(Raw().header(0, 1).str("general.alignment").u32(static_cast<uint32_t>(GGUFType::U64)).u64(32).b,
                 {"general.alignment", "u64", "expected u32"});
}

TEST(GgufCorrupt, UnknownTensorTypeId) {
  expect_refused(Raw().header(1, 0).tensor_info("blk.0.attn_q.weight", {32}, 99, 0).pad_to(32).zeros(128).b,
                 {"tensor 'blk.0.attn_q.weight' (#0)", "unknown tensor type id 99"});
}

TEST(GgufCorrupt, NonComputableTypesStillLoad) {
  auto f = parse(Raw().header(1, 0).tensor_info("w", {256}, static_cast<uint32_t>(DType::IQ2_XXS), 0)
                     .pad_to(32).zeros(66).b);
  EXPECT_EQ(f->tensors()[0].type, DType::IQ2_XXS);
  EXPECT_EQ(f->tensors()[0].nbytes, 66u);
}

TEST(GgufCorrupt, TooManyDims) {
  expect_refused(Raw().header(1, 0).tensor_info("w", {1, 1, 1, 1, 1}, 0, 0).pad_to(32).zeros(4).b,
                 {"tensor 'w' (#0)", "n_dims 5"});
  expect_refused(Raw().header(1, 0).tensor_info("w", {}, 0, 0).pad_to(32).zeros(4).b, {"n_dims 0"});
}

TEST(GgufCorrupt, ZeroNegativeAndOverflowingDims) {
  expect_refused(Raw().header(1, 0).tensor_info("w", {4, 0}, 0, 0).pad_to(32).zeros(16).b,
                 {"tensor 'w' (#0)", "ne[1] = 0"});
  expect_refused(Raw().header(1, 0).tensor_info("w", {-5}, 0, 0).pad_to(32).zeros(16).b, {"ne[0] = -5"});
  expect_refused(Raw().header(1, 0).tensor_info("w", {1ll << 40, 1ll << 40}, 0, 0).pad_to(32).b,
                 {"tensor 'w' (#0)", "64 bits"});
}

TEST(GgufCorrupt, RowNotAMultipleOfTheBlock) {
  expect_refused(Raw().header(1, 0).tensor_info("q", {33}, static_cast<uint32_t>(DType::Q4_0), 0).pad_to(32)
                     .zeros(64).b,
                 {"tensor 'q' (#0)", "ne[0] = 33", "Q4_0 block size 32"});
}

TEST(GgufCorrupt, MisalignedOffset) {
  expect_refused(Raw().header(1, 0).tensor_info("w", {1}, 0, 7).pad_to(32).zeros(64).b,
                 {"tensor 'w' (#0)", "offset 7", "alignment 32"});
}

TEST(GgufCorrupt, TensorDataPastEndOfFile) {
  auto bytes = small_valid_file();
  bytes.resize(bytes.size() - 40);  // cuts into the last tensor's data
  expect_refused(bytes, {"tensor 'b' (#1)", "runs past the end of the file"});
  expect_refused(Raw().header(1, 0).tensor_info("w", {4}, 0, 0xffffffffffffffe0ull).pad_to(32).zeros(16).b,
                 {"tensor 'w' (#0)", "runs past the end of the file"});
}

TEST(GgufCorrupt, DuplicateTensorName) {
  expect_refused(Raw().header(2, 0).tensor_info("w", {8}, 0, 0).tensor_info("w", {8}, 0, 32).pad_to(32).zeros(64).b,
                 {"tensor 'w' (#1)", "duplicate tensor name"});
}

TEST(GgufCorrupt, OverlappingTensors) {
  expect_refused(Raw().header(2, 0).tensor_info("a", {16}, 0, 0).tensor_info("b", {8}, 0, 32).pad_to(32).zeros(96).b,
                 {"tensor 'b' (#1)", "overlaps tensor 'a' (#0)"});
}

TEST(GgufCorrupt, EveryPrefixOfAValidFileIsRefused) {
  const auto bytes = small_valid_file();
  auto f = parse(bytes);
  // Only the padding after the last tensor's data may be cut off.
  size_t needed = 0;
  for (const auto& t : f->tensors()) needed = std::max<size_t>(needed, f->data_offset() + t.offset + t.nbytes);
  ASSERT_LT(needed, bytes.size());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    if (n < needed)
      EXPECT_THROW(parse(prefix), Error) << "prefix of " << n << " bytes";
    else
      EXPECT_NO_THROW(parse(prefix)) << "prefix of " << n << " bytes";
  }
}

TEST(GgufCorrupt, OpenNamesThePath) {
  try {
    GGUFFile::open("/nonexistent/model.gguf");
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("/nonexistent/model.gguf: "));
  }
  EXPECT_THROW(GGUFFile::open("/dev/null"), Error);
  EXPECT_THROW(GGUFFile::open("/"), Error);
}

}  // namespace
}  // namespace orchard
