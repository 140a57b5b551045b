// Repacking a model's matrices gives back the file copy's pages they came from, so a loaded
// model holds one copy of its weights, not one and a third.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/hparams.h"
#include "model/synthetic/synthetic.h"
#include "model/weights.h"
#include "tensor/quant.h"

namespace orchard {
namespace {

// Bytes of [p, p + n) resident in memory, counted in 4 KiB pages.
size_t resident_bytes(const uint8_t* p, size_t n) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t pages = (reinterpret_cast<uintptr_t>(p) + n - begin + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (::mincore(reinterpret_cast<void*>(begin), pages * page, in.data()) != 0) return SIZE_MAX;
  size_t count = 0;
  for (unsigned char c : in) count += c & 1;
  return count * page;
}

TEST(ModelWeights, RepackingGivesBackTheFileCopyOfEveryRepackedMatrix) {
  if (!pack_replaces_original(DType::Q4_0)) GTEST_SKIP() << "Q4_0 matrices are not repacked on this CPU";
  const auto path = std::filesystem::path(::testing::TempDir()) / "release-small-Q4_0.gguf";
  // "small": 12 layers whose q, k, v and wo (0.3–0.6 MB each) are all smaller than a huge page.
  write_synthetic_model(model_shape("small"), DType::Q4_0, 5, path.string());
  auto file = GGUFFile::open(path.string(), GGUFLoad::Read);
  const HParams hp = HParams::from_gguf(*file);
  ModelWeights w = ModelWeights::bind(*file, hp);
  const GGUFTensorInfo& first = file->tensors().front();
  const uint8_t* base = file->tensor_data(first) - file->data_offset() - first.offset;
  const size_t size = file->file_size();
  ASSERT_GE(resident_bytes(base, size), size * 9 / 10) << "the file was not read into memory";

  w.pack_for_cpu(file.get());
  // Still needed: the header (tokenizer) and the embedding table, whose rows get_row reads,
  // each plus at most a huge page on either side that it shares with freed bytes.
  const size_t embd = row_bytes(w.tok_embd.type, w.tok_embd.cols) * static_cast<size_t>(w.tok_embd.rows);
  const size_t slack = 4 * (size_t{2} << 20);
  EXPECT_LE(resident_bytes(base, size), file->data_offset() + embd + slack)
      << "of a " << size << "-byte file, the embedding table being " << embd << " bytes";
  for (const auto& L : w.layers) {
    EXPECT_EQ(L.wq.data, nullptr);
    EXPECT_NE(L.wq.packed, nullptr);
    EXPECT_NE(L.attn_norm, nullptr);
  }
  // The norms were copied out at bind, so freeing the pages around them left them intact.
  auto fresh = GGUFFile::open(path.string(), GGUFLoad::Map);
  const GGUFTensorInfo* norm = fresh->find_tensor("blk." + std::to_string(hp.n_layers - 1) + ".ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  ASSERT_EQ(norm->type, DType::F32);
  EXPECT_EQ(std::memcmp(w.layers.back().ffn_norm, fresh->tensor_data(*norm), static_cast<size_t>(hp.dim) * 4), 0);
  std::filesystem::remove(path);
}

// Pages go back while packing is under way (so a load never holds two copies), and never one
// that a matrix still to be packed reads: releasing before every matrix must pack exactly the
// bytes that packing without any release does.
TEST(ModelWeights, ReleasingWhilePackingNeverTakesBytesStillToBePacked) {
  for (DType type : {DType::F16, DType::Q4_0}) {
    if (!pack_replaces_original(type)) continue;
    const auto path = std::filesystem::path(::testing::TempDir()) / ("release-early-" + std::string(type_name(type)) + ".gguf");
    write_synthetic_model(model_shape("small"), type, 9, path.string());
    auto file = GGUFFile::open(path.string(), GGUFLoad::Read);
    auto reference = GGUFFile::open(path.string(), GGUFLoad::Read);
    const HParams hp = HParams::from_gguf(*file);
    ModelWeights early = ModelWeights::bind(*file, hp), whole = ModelWeights::bind(*reference, hp);
    early.pack_for_cpu(file.get(), 1);
    whole.pack_for_cpu(nullptr);
    ASSERT_EQ(early.packed.size(), 1u);
    ASSERT_EQ(whole.packed.size(), 1u);
    ASSERT_EQ(early.packed[0]->size(), whole.packed[0]->size());
    EXPECT_EQ(std::memcmp(early.packed[0]->data(), whole.packed[0]->data(), whole.packed[0]->size()), 0)
        << type_name(type) << ": a matrix was packed from pages already given back";
    // And the pages did go back: the file's copy now holds little beyond the embedding table.
    const GGUFTensorInfo& first = file->tensors().front();
    const uint8_t* base = file->tensor_data(first) - file->data_offset() - first.offset;
    const size_t embd = row_bytes(early.tok_embd.type, early.tok_embd.cols) * static_cast<size_t>(early.tok_embd.rows);
    EXPECT_LE(resident_bytes(base, file->file_size()), file->data_offset() + embd + 4 * (size_t{2} << 20))
        << type_name(type);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace orchard
