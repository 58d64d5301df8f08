/** @module Moving an object inside a storage, with a fallback for storages that cannot rename. */
import { pipeline } from 'node:stream/promises'
import type { ObjectInfo, Storage, WriteOptions } from '@marin/rigging'

/**
 * `storage.rename(from, to, opts)` where the storage has it; otherwise a copy
 * (server-side where the storage has `copy`, else streamed through this process)
 * under `opts.condition`, then `delete(from)`.
 */
export async function moveObject(
  storage: Storage,
  from: string,
  to: string,
  opts: WriteOptions = {},
): Promise<ObjectInfo | undefined> {
  if (storage.rename) return storage.rename(from, to, opts)
  let info: ObjectInfo | undefined
  if (storage.copy) info = await storage.copy(from, to, opts)
  else await pipeline(await storage.readStream(from), await storage.writeStream(to, opts))
  await storage.delete(from, opts.durable === undefined ? {} : { durable: opts.durable })
  return info
}
