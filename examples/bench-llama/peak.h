// Compute peaks of this machine, measured by kvg-bench in the same run as the rates it
// compares with them: short bursts of independent chains of one instruction on n threads
// at once, best of several bursts, the instruction chosen at run time by CPU features.
#pragma once

struct Peak {
    double rate = 0;          // G(FL)OP/s; 0 when the CPU has none of the instructions
    const char * kind = "-"; // the instruction measured
};

// f32 FMA: 2 FLOP per lane (vfmadd on zmm with AVX-512F, else ymm with AVX2+FMA).
Peak fma_f32_peak(int n_threads);
// u8 x s8 dot products into i32: 2 OP per multiply-add (vpdpbusd on zmm with AVX512_VNNI,
// else vpmaddubsw + vpmaddwd on zmm with AVX512BW or on ymm with AVX2; the adds that
// accumulate their sums are not counted).
Peak int8_dot_peak(int n_threads);
// bf16 pairs dotted into f32: 4 FLOP per f32 lane (vdpbf16ps on zmm with AVX512_BF16; rate 0
// without it).
Peak bf16_dot_peak(int n_threads);
