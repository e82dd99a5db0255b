// avx512 kernels (placeholder until written).
#include "simd.h"

const kvg::cpu_kernels * kvg::kernels_avx512() { return nullptr; }
