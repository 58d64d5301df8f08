/** @module The calls an actor has not answered yet, with their timeouts. */
import { FrayError } from '../errors.js'

type Entry = {
  method: string
  resolve: (v: unknown) => void
  reject: (e: Error) => void
  timer: NodeJS.Timeout | undefined
}

export class PendingCalls {
  private readonly calls = new Map<number, Entry>()
  private next = 1

  /** `onIdle` runs when a timeout empties the table (answers and rejections are the owner's to see). */
  constructor(private readonly onIdle?: () => void) {}

  /** Registers a call; the returned promise settles through `resolve`/`reject`/`rejectAll` or the timeout. */
  add(actor: string, method: string, timeoutMs: number | undefined): { id: number; promise: Promise<unknown> } {
    const id = this.next++
    const promise = new Promise<unknown>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      if (timeoutMs !== undefined && timeoutMs > 0) {
        timer = setTimeout(() => {
          this.calls.delete(id)
          if (this.calls.size === 0) this.onIdle?.()
          reject(
            new FrayError(
              'CALL_TIMEOUT',
              `actor ${actor}.${method} did not answer within ${timeoutMs} ms; ` +
                `raise timeoutMs or check the actor (it keeps running the call)`,
            ),
          )
        }, timeoutMs)
      }
      this.calls.set(id, { method, resolve, reject, timer })
    })
    return { id, promise }
  }

  resolve(id: number, value: unknown): void {
    const e = this.calls.get(id)
    if (!e) return // timed out already
    this.calls.delete(id)
    if (e.timer) clearTimeout(e.timer)
    e.resolve(value)
  }

  reject(id: number, err: Error): void {
    const e = this.calls.get(id)
    if (!e) return
    this.calls.delete(id)
    if (e.timer) clearTimeout(e.timer)
    e.reject(err)
  }

  rejectAll(err: Error): void {
    for (const [id, e] of this.calls) {
      this.calls.delete(id)
      if (e.timer) clearTimeout(e.timer)
      e.reject(err)
    }
  }

  methodOf(id: number): string {
    return this.calls.get(id)?.method ?? 'call'
  }

  get size(): number {
    return this.calls.size
  }
}
