/** @module Fray's metrics in the process-wide rigging registry: actor deaths and restarts, collective volume. */
import { metrics } from '@marin/rigging'

// Looked up on use: importing fray registers nothing.
export const actorDeaths = { inc: () => metrics().counter('fray_actor_deaths_total', { help: 'actor host processes that died while not being stopped' }).inc() }
export const actorRestarts = { inc: () => metrics().counter('fray_actor_restarts_total', { help: 'actors brought back by maxRestarts' }).inc() }
export const collectiveBytes = {
  inc: (bytes: number, labels: { op: string }) =>
    metrics().counter('fray_collective_bytes_total', { help: 'bytes all-reduced by this member', labelNames: ['op'] }).inc(bytes, labels),
}
