/**
 * @module Reusable receive buffers. Fresh buffers cost page faults and garbage collection on
 * every collective; a member that reduces the same sizes step after step reuses them instead.
 */
const MAX_POOLED_BYTES = 256 * 1024 * 1024

export class ScratchPool {
  private readonly free = new Map<number, Uint8Array[]>()
  private pooled = 0

  take(bytes: number): Uint8Array {
    const b = this.free.get(bytes)?.pop()
    if (b) {
      this.pooled -= bytes
      return b
    }
    return new Uint8Array(bytes)
  }

  give(b: Uint8Array): void {
    if (b.byteOffset !== 0 || b.byteLength !== b.buffer.byteLength || this.pooled + b.byteLength > MAX_POOLED_BYTES)
      return
    let list = this.free.get(b.byteLength)
    if (!list) this.free.set(b.byteLength, (list = []))
    list.push(b)
    this.pooled += b.byteLength
  }
}
