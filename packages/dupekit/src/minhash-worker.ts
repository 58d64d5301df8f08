/**
 * @module Worker thread of a MinHashPool: computes signatures for batches of texts
 * with the pool's MinHash parameters and sends them back as transferred buffers.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { MinHasher, type MinHashParams } from './minhash.js'

/** A batch to hash. */
export type WorkerRequest = { id: number; texts: string[] }
/** Signatures of a batch (flat, numPerm per text), or why it failed. */
export type WorkerReply = { id: number; signatures?: Uint32Array; error?: string }

const port = parentPort
if (port !== null) {
  const hasher = new MinHasher((workerData as { params: MinHashParams }).params)
  port.on('message', (req: WorkerRequest) => {
    try {
      const signatures = hasher.signatures(req.texts)
      port.postMessage({ id: req.id, signatures } satisfies WorkerReply, [signatures.buffer as ArrayBuffer])
    } catch (err) {
      port.postMessage({ id: req.id, error: (err as Error).stack ?? String(err) } satisfies WorkerReply)
    }
  })
}
