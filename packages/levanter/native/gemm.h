// The native GEMM as other kernels call it (native/ops.cc's attention): C = op(A)·op(B) for
// float32 matrices, element (r, c) of op(A) at a[r·ars + c·acs] and of op(B) at b[r·brs + c·bcs],
// C row-major M×N with rows ldc floats apart, on the calling thread. False when the packing
// buffers cannot be allocated.
#pragma once

#include <cstdint>

namespace levanter {

bool gemmOnThisThread(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs, float* c,
                      int64_t ldc, int64_t M, int64_t K, int64_t N);

// C (+)= op(A)·op(B), C row-major M×N (rows N floats apart), split over the pool's threads; false
// as above.
bool gemmParallel(const float* a, int64_t ars, int64_t acs, const float* b, int64_t brs, int64_t bcs, float* c,
                  int64_t M, int64_t K, int64_t N, bool accumulate);

}  // namespace levanter
