/** @module Who wants to know when an actor restarts (a mesh relinks its members then). */

export class RestartListeners {
  private readonly fns = new Set<() => void>()

  /** Adds a listener; returns its removal. */
  add(fn: () => void): () => void {
    this.fns.add(fn)
    return () => this.fns.delete(fn)
  }

  /**
   * Called synchronously when a restart has begun, before the caller's code sees the death,
   * so that a listener's requests to the actor queue ahead of any the caller makes next.
   */
  emit(): void {
    for (const fn of this.fns) {
      try {
        fn()
      } catch {
        /* one listener's failure is not the actor's */
      }
    }
  }
}
