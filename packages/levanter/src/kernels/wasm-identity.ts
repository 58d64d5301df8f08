/**
 * @module Identity (and same-dtype Cast) kernels for the wasm backend that share the input's
 * buffer instead of copying it. tfjs clones every tensor it saves for the backward pass through
 * Identity, and turns the gradient of that clone into a Cast; on wasm both copy, which made
 * ~200 full-activation copies per training step. tfjs never writes into a tensor's buffer
 * (variables take a new buffer on assign), so sharing is safe; the cpu backend does the same.
 */
import type { KernelConfig, KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs'

type RefCounting = { incRef(dataId: object): void }

function share(args: Parameters<KernelFunc>[0]): TensorInfo {
  const { x } = args.inputs as { x: TensorInfo }
  ;(args.backend as unknown as RefCounting).incRef(x.dataId)
  return { dataId: x.dataId, shape: x.shape, dtype: x.dtype }
}

export function wasmIdentity(stock: KernelFunc): KernelConfig {
  return {
    kernelName: 'Identity',
    backendName: 'wasm',
    kernelFunc: (args) => ((args.inputs as { x: TensorInfo }).x.dtype === 'string' ? stock(args) : share(args)),
  }
}

export function wasmCast(stock: KernelFunc): KernelConfig {
  const kernelFunc: KernelFunc = (args) => {
    const { x } = args.inputs as { x: TensorInfo }
    return (args.attrs as NamedAttrMap).dtype === x.dtype && x.dtype !== 'string' ? share(args) : stock(args)
  }
  return { kernelName: 'Cast', backendName: 'wasm', kernelFunc }
}
