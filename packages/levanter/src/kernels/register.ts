/** @module Register levanter's gradients over the stock ones (once), and put the stock ones back (tests). */
import * as tf from '@tensorflow/tfjs'
import type { GradConfig } from '@tensorflow/tfjs'
import { batchMatMulGrad } from './batch-matmul-grad.js'
import { gatherGrad } from './gather-grad.js'

let stock: Map<string, GradConfig | undefined> | undefined

// Registering twice under one name makes tfjs warn; silence that one message while we override.
function quietRegister(g: GradConfig): void {
  const warn = console.warn
  console.warn = () => {}
  try {
    tf.registerGradient(g)
  } finally {
    console.warn = warn
  }
}

/** Install the fast/correct gradients. Idempotent; `initBackend` calls it. */
export function registerLevanterKernels(): void {
  if (stock) return
  stock = new Map()
  for (const name of ['BatchMatMul', 'GatherV2']) stock.set(name, tf.getGradient(name))
  quietRegister(batchMatMulGrad)
  quietRegister(gatherGrad(stock.get('GatherV2')?.gradFunc))
}

/** Restore the stock gradients (to compare against them). */
export function unregisterLevanterKernels(): void {
  if (!stock) return
  for (const g of stock.values()) if (g) quietRegister(g)
  stock = undefined
}
