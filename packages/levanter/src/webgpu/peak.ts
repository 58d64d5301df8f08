/** @module FP32 peak throughput of GPUs by name (dense, no tensor cores), the denominator of MFU on webgpu. */

/** TFLOP/s at fp32 by a pattern on the adapter's description or device name, as the vendors' data sheets give them. */
const FP32_TFLOPS: readonly [RegExp, number][] = [
  [/H200/i, 67],
  [/H100.*PCIe/i, 51],
  [/H100/i, 67],
  [/A100/i, 19.5],
  [/L40S/i, 91.6],
  [/L4\b/i, 30.3],
  [/A10G/i, 31.2],
  [/A10\b/i, 31.2],
  [/T4\b/i, 8.1],
  [/RTX 4090/i, 82.6],
  [/RTX 3090/i, 35.6],
]

/** FP32 peak in FLOP/s for an adapter description, or undefined when the GPU is not in the table. */
export function fp32PeakFlops(description: string): number | undefined {
  for (const [re, tflops] of FP32_TFLOPS) if (re.test(description)) return tflops * 1e12
  return undefined
}
