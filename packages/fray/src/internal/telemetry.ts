/**
 * @module Fray's metrics in the process-wide rigging registry: actor deaths and restarts, collective volume.
 * Rigging is loaded on first use: an actor's process imports this through the collectives and
 * should not pay for loading rigging (a quarter of a second of CPU) when it starts.
 */
import type * as Rigging from '@marin/rigging'

let rigging: typeof Rigging | null = null
let loading: Promise<typeof Rigging> | null = null

/** Runs `fn` with rigging, now if it is loaded, else once it is. */
function withRigging(fn: (r: typeof Rigging) => void): void {
  if (rigging) return fn(rigging)
  loading ??= import('@marin/rigging').then((r) => (rigging = r))
  loading.then(fn, () => {})
}

// Looked up on use: importing fray registers nothing.
export const actorDeaths = {
  inc: () =>
    withRigging((r) =>
      r
        .metrics()
        .counter('fray_actor_deaths_total', { help: 'actor host processes that died while not being stopped' })
        .inc(),
    ),
}
export const actorRestarts = {
  inc: () =>
    withRigging((r) =>
      r.metrics().counter('fray_actor_restarts_total', { help: 'actors brought back by maxRestarts' }).inc(),
    ),
}
export const collectiveBytes = {
  inc: (bytes: number, labels: { op: string }) =>
    withRigging((r) =>
      r
        .metrics()
        .counter('fray_collective_bytes_total', { help: 'bytes all-reduced by this member', labelNames: ['op'] })
        .inc(bytes, labels),
    ),
}
