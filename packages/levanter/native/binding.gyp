{
  "targets": [
    {
      "target_name": "levanter_gemm",
      "sources": ["gemm.cc"],
      "cflags_cc": ["-O3", "-mavx2", "-mfma", "-std=c++17"],
      "cflags_cc!": ["-fno-exceptions"]
    }
  ]
}
