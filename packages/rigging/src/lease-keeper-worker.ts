/**
 * @module The lease keep-alive thread's side (see `lease-keeper.ts`): renews each
 * lease it is handed with `Lease.keepAlive` on this thread's event loop.
 */
import { parentPort } from 'node:worker_threads'
import { Lease } from './lease.js'
import { errorData, type KeeperEvent, type KeeperRequest } from './lease-keeper.js'
import { openStorage } from './storage/open-storage.js'
import type { Storage } from './storage/types.js'

const port = parentPort
if (port !== null) {
  const post = (m: KeeperEvent) => port.postMessage(m)
  const storages = new Map<string, Promise<Storage>>()
  const leases = new Map<number, Lease>()
  const stateOf = (l: Lease) => ({ record: l.record, generation: l.generation })

  const handle = async (m: KeeperRequest): Promise<void> => {
    if (m.op === 'hold') {
      const key = JSON.stringify([m.url, m.storageOptions])
      let storage = storages.get(key)
      if (!storage) storages.set(key, (storage = openStorage(m.url, m.storageOptions)))
      const lease = Lease.adopt(await storage, m.path, m)
      await lease.renew()
      leases.set(m.id, lease)
      lease.keepAlive({
        intervalMs: m.intervalMs,
        onRenewed: () => post({ op: 'renewed', id: m.id, state: stateOf(lease) }),
        // Kept until dropped: a `fence` sent before the main thread saw this news gets the same LEASE_LOST.
        onLost: (err) => post({ op: 'lost', id: m.id, error: errorData(err) }),
      })
      post({ op: 'reply', seq: m.seq, state: stateOf(lease) })
      return
    }
    const lease = leases.get(m.id)
    if (!lease) throw new Error(`lease #${m.id} is not held by the keep-alive thread`)
    if (m.op === 'fence') {
      await lease.fence()
    } else {
      leases.delete(m.id)
      await lease.stopKeepAlive()
    }
    post({ op: 'reply', seq: m.seq, state: stateOf(lease) })
  }

  port.on('message', (m: KeeperRequest) => {
    handle(m).catch((err: unknown) => post({ op: 'reply', seq: m.seq, error: errorData(err) }))
  })
  post({ op: 'ready' })
}
