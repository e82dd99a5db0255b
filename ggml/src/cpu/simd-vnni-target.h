// The AVX-512 VNNI files' common opening (simd-avx512-vnni.cpp, quants-vnni.cpp,
// quants-vnni-matvec.cpp, simd-avx512-bf16.cpp): the intrinsics and the target attribute every function of theirs
// carries. Include inside their x86 section only; no file-wide ISA flags, so the library
// still runs on CPUs without VNNI (features.cpp checks CPUID before using these tables).
#pragma once

#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_* placeholders (inside intrinsics) as
// uninitialized when they are inlined into target-attributed functions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// KVG_TARGET_EXTRA: more features of the including file (",avx512bf16")
#ifndef KVG_TARGET_EXTRA
#define KVG_TARGET_EXTRA ""
#endif
#define KVG_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c" KVG_TARGET_EXTRA)))
#define KVG_INLINE KVG_TARGET inline __attribute__((always_inline))
