#pragma once
// Element-wise sums for the collectives, in every supported dtype. Half types
// are widened to f32, added, and rounded once, so the order of the sources is
// the only thing that decides the result bits.
#include <cstddef>

#include "dist/group.h"

namespace orchard::dist {

// dst[i] += src[i]
void add_into(void* dst, const void* src, size_t count, DType type);

// dst[i] = srcs[0][i] + srcs[1][i] + ... in that order (dst may alias srcs[k]).
void sum_sources(void* dst, const void* const* srcs, int n, size_t count, DType type);

}  // namespace orchard::dist
