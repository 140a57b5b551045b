#pragma once
// Bounds-checked little-endian reads over a GGUF image. Internal to the GGUF reader.
//
// Every read is checked against the bytes that remain, and every failure names the file, the
// item being parsed ("metadata key #5 'tokenizer.ggml.tokens'") and, inside arrays, the element
// path ("[3][0]"), so a corrupt file is reported precisely instead of being read out of bounds.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/error.h"

namespace orchard::gguf_detail {

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }
  const std::string& file() const { return file_; }

  // The item now being parsed; set once per key or tensor, so it costs nothing per element.
  void set_context(std::string context) { context_ = std::move(context); }
  // Indices of the array elements being parsed, outermost first.
  void push_index(uint64_t i) { path_.push_back(i); }
  void set_index(uint64_t i) { path_.back() = i; }
  void pop_index() { path_.pop_back(); }

  [[noreturn]] void fail(const std::string& what) const {
    std::string msg = file_ + ": " + context_;
    for (uint64_t i : path_) msg += "[" + std::to_string(i) + "]";
    throw Error(msg + ": " + what);
  }

  template <typename T>
  T read(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 byte count, then the bytes (not NUL-terminated).
  std::string_view read_string(const char* field) {
    const uint64_t len = read<uint64_t>(field);
    if (len > remaining())
      fail(std::string(field) + ": length " + std::to_string(len) + " exceeds the remaining " +
           std::to_string(remaining()) + " bytes");
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  void need(size_t n, const char* field) const {
    if (n > remaining())
      fail(std::string(field) + ": needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
           " but the file ends at " + std::to_string(bytes_.size()) + " (truncated)");
  }

  std::span<const uint8_t> bytes_;
  const std::string& file_;
  size_t pos_ = 0;
  std::string context_ = "header";
  std::vector<uint64_t> path_;
};

}  // namespace orchard::gguf_detail
