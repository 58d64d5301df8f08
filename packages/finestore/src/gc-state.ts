/**
 * @module The collector's epoch: the advertise half of the garbage-collection protocol.
 *
 * `gc/state.json` holds a counter that a collector makes odd (compare-and-swap)
 * before it lists anything and even again when it is done. A transaction reads
 * the epoch when it begins and again just before it commits: if it was odd, or
 * changed, a collector may have removed a blob the transaction found by dedup
 * before the transaction's pin was visible, so the transaction waits for the
 * collector to finish and re-checks (and restores) its blobs before it writes
 * its manifest. A crashed collector's lease expires, so nobody waits forever.
 */
import type { Storage } from '@marin/rigging'
import { z } from 'zod'
import { isNotFound } from './internal/storage-errors.js'
import { GC_STATE_PATH } from './layout.js'

export const GcState = z.object({
  epoch: z.number().int().nonnegative(),
  owner: z.string().optional(),
  startedAt: z.number().optional(),
  expiresAt: z.number().optional(),
})
export type GcState = z.output<typeof GcState>

export type GcStateRead = { readonly state: GcState; readonly generation: string | undefined }

export async function readGcState(storage: Storage): Promise<GcStateRead> {
  const info = await storage.stat(GC_STATE_PATH)
  if (!info) return { state: { epoch: 0 }, generation: undefined }
  try {
    const text = await storage.readText(GC_STATE_PATH)
    // Generation of the bytes we read: re-stat, and retry on the rare race with a writer.
    const after = await storage.stat(GC_STATE_PATH)
    if (!after || after.generation !== info.generation) return readGcState(storage)
    return { state: GcState.parse(JSON.parse(text)), generation: info.generation }
  } catch (err) {
    if (isNotFound(err)) return readGcState(storage)
    throw err
  }
}

/** A collector holds the store now (odd epoch, lease not expired). */
export const gcRunning = (s: GcState, now = Date.now()): boolean => s.epoch % 2 === 1 && (s.expiresAt ?? 0) > now

/** Waits until no collector holds the store; returns the epoch seen then. */
export async function waitForGc(storage: Storage, pollMs = 25): Promise<GcState> {
  for (;;) {
    const { state } = await readGcState(storage)
    if (!gcRunning(state)) return state
    await new Promise((r) => setTimeout(r, pollMs))
  }
}
