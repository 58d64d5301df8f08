{
  "variables": { "avx512%": 1, "bf16%": 1 },
  "targets": [
    {
      "target_name": "levanter_gemm",
      "sources": ["gemm.cc", "gemm-bf16-emu.cc", "gemv.cc", "decode.cc", "stream.cc", "ops.cc", "ops-norm.cc", "ops-softmax.cc", "ops-attention.cc", "ops-loss.cc"],
      "cflags_cc": ["-O3", "-mavx2", "-mfma", "-std=c++17", "-ffp-contract=off", "-pthread"],
      "cflags_cc!": ["-fno-exceptions"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["avx512==1", { "dependencies": ["levanter_gemm512"], "defines": ["LEVANTER_AVX512"] }],
        ["avx512==1 and bf16==1", { "dependencies": ["levanter_gemm_bf16"], "defines": ["LEVANTER_BF16"] }]
      ]
    },
    {
      "target_name": "levanter_gemm512",
      "type": "static_library",
      "sources": ["gemm512.cc", "gemv-batch512.cc"],
      "cflags_cc": ["-O3", "-mavx512f", "-mfma", "-std=c++17", "-ffp-contract=off", "-fPIC"]
    },
    {
      "target_name": "levanter_gemm_bf16",
      "type": "static_library",
      "sources": ["gemm-bf16.cc", "gemv-bf16.cc"],
      "cflags_cc": ["-O3", "-mavx512f", "-mavx512bf16", "-std=c++17", "-ffp-contract=off", "-fPIC"]
    }
  ]
}
