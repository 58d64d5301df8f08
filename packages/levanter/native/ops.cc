// levanter's fused native kernels: the work of a training step outside matrix products, each one
// pass (or two) over memory where tfjs runs several kernels: LayerNorm and GELU (tanh) forward and
// backward, the causal softmax of attention and its backward, causal self-attention straight from
// the fused q/k/v projection (on the native GEMM), cross-entropy with its gradient in
// the same pass, the bias/gain gradient (a column sum), and AdamW. They read and write float32
// typed arrays in place (views of the wasm backend's heap, or the optimizer's own arrays) and run
// on native/pool.h's threads, split by rows: every output element is computed by one thread in one
// fixed order, and sums over rows go through fixed blocks of rows added in order, so the results do
// not depend on the thread count.
//
// Compiled with -ffp-contract=off: AdamW's float64 arithmetic then rounds exactly as levanter's JS
// version does (same operations, same order), so switching between the two changes no bit.
//
// The kernels live by family in native/ops-*.cc (see native/ops.h); this file registers them.
#include "gemv-batch.h"
#include "ops.h"

napi_value RegisterOps(napi_env env, napi_value exports) {
  using namespace levanter::ops;
  const napi_property_descriptor props[] = {
      {"geluForward", nullptr, GeluForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"geluBackward", nullptr, GeluBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"layerNormForward", nullptr, LayerNormForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"layerNormBackward", nullptr, LayerNormBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"columnSum", nullptr, ColumnSum, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxForward", nullptr, SoftmaxForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxBiasForward", nullptr, SoftmaxBiasForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmaxBackward", nullptr, SoftmaxBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"affineForward", nullptr, AffineForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"attentionForward", nullptr, AttentionForward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"attentionBackward", nullptr, AttentionBackward, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"decodeAttention", nullptr, DecodeAttention, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"crossEntropy", nullptr, CrossEntropy, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"adamw", nullptr, AdamW, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"sumSquares", nullptr, SumSquares, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"setSmallM", nullptr, SetSmallM, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"decodeGpt2", nullptr, DecodeGpt2, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"packBf16", nullptr, PackBf16, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"gemvBf16", nullptr, GemvBf16, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"gemmRowsBatch", nullptr, GemmRowsBatch, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"memoryBandwidth", nullptr, MemoryBandwidth, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}
