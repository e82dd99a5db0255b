// avx2 kernels (placeholder until written).
#include "simd.h"

const kvg::cpu_kernels * kvg::kernels_avx2() { return nullptr; }
