#pragma once
// Included first by the files whose float arithmetic must round as ggml's reference C does
// (quant_legacy.cpp, quant_k.cpp, quantize_k.cpp): every product and sum rounded on its own.
// Under -march=native, GCC and clang would otherwise fuse `a*b + c` into one FMA (C++ allows
// contraction), which rounds once instead of twice and so differs from ggml, gguf-py and
// llama-quantize (built for the baseline ISA) in the last bit — and a quantizer's choices then
// tip the other way.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
