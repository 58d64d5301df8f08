/**
 * @module The node flags of a process that runs an actor (a forked worker or an actor host): the
 * TypeScript loader, for when fray or the actor runs from source, and, for an actor that holds at
 * most one core, V8's garbage collector on the actor's own thread. Otherwise every such process
 * also runs GC helper threads, and N one-core actors on N cores compete for them (one
 * allocation-heavy worker used about 1.2 cores); Ray keeps one-CPU workers to one thread with
 * `OMP_NUM_THREADS=1` for the same reason.
 */
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

export function actorNodeArgs(cores: number): string[] {
  const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  return ['--import', loader, ...(cores <= 1 ? ['--single-threaded-gc'] : [])]
}
