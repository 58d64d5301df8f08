#pragma once
// The bf16-weight small-M products of native/gemv-bf16.cc (compiled with -mavx512bf16; call only where the CPU has
// AVX512_BF16): a matrix converted once, then C (+)= bf16(A)·W for any number of rows M.
#include <cstdint>

namespace levanter::bf16w {

// op(B) [K, N] as bf16 pairs along k in panels of 64 columns (native/gemv-bf16.cc); Kp = ⌈K/2⌉.
struct Matrix {
  int64_t K, N, Kp, panels;
  uint16_t* data;
};

// op(B)(k, j) = b[k·rs + j·cs], converted; nullptr where memory runs out.
Matrix* pack(const float* b, int64_t rs, int64_t cs, int64_t K, int64_t N);
void release(Matrix* w);
// C (+)= bf16(A)·W for M rows of A (lda floats apart) into C (rows ldc floats apart); false where memory runs out.
bool gemv(const Matrix& w, const float* a, int64_t lda, float* c, int64_t ldc, int64_t M, bool accumulate,
          bool threaded);

}  // namespace levanter::bf16w
