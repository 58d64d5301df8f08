{
  "variables": { "avx512%": 1 },
  "targets": [
    {
      "target_name": "levanter_gemm",
      "sources": ["gemm.cc", "gemv.cc", "stream.cc", "ops.cc", "ops-norm.cc", "ops-softmax.cc", "ops-attention.cc", "ops-loss.cc"],
      "cflags_cc": ["-O3", "-mavx2", "-mfma", "-std=c++17", "-ffp-contract=off", "-pthread"],
      "cflags_cc!": ["-fno-exceptions"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["avx512==1", { "dependencies": ["levanter_gemm512"], "defines": ["LEVANTER_AVX512"] }]
      ]
    },
    {
      "target_name": "levanter_gemm512",
      "type": "static_library",
      "sources": ["gemm512.cc"],
      "cflags_cc": ["-O3", "-mavx512f", "-mfma", "-std=c++17", "-ffp-contract=off", "-fPIC"]
    }
  ]
}
