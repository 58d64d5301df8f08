{
  "targets": [
    {
      "target_name": "levanter_gemm",
      "sources": ["gemm.cc", "ops.cc"],
      "cflags_cc": ["-O3", "-mavx2", "-mfma", "-std=c++17", "-ffp-contract=off", "-pthread"],
      "cflags_cc!": ["-fno-exceptions"],
      "ldflags": ["-pthread"]
    }
  ]
}
