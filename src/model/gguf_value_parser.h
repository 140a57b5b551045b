#pragma once
// Parsing of GGUF metadata values (scalars, strings and arbitrarily nested arrays). Internal to
// the GGUF reader.
#include <cstdint>

#include "model/gguf.h"
#include "model/gguf_byte_reader.h"

namespace orchard::gguf_detail {

// Arrays of arrays deeper than this are refused: no real model needs more than two levels, and
// the limit bounds the parser's recursion on hostile input.
constexpr int kMaxArrayDepth = 8;

// Reads a u32 value type and refuses ids outside the GGUF table.
GGUFType read_value_type(ByteReader& r, const char* field);
// Reads one value of `type`; `depth` is the number of arrays already enclosing it.
GGUFValue parse_value(ByteReader& r, GGUFType type, int depth = 0);

}  // namespace orchard::gguf_detail
