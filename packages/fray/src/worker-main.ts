/**
 * @module Entry point of an actor's worker process: receives its spec, builds the actor,
 * and serves calls until the driver says stop or goes away.
 */
import { ActorRuntime } from './actor-runtime.js'
import { cleanUpOnSigterm } from './collective/socket-files.js'
import { FrayError } from './errors.js'
import { errorPayload, type FromWorker, MSG, type ToWorker } from './internal/wire.js'

cleanUpOnSigterm()

let runtime: ActorRuntime | null = null
function send(m: FromWorker): void {
  try {
    process.send!(m)
  } catch (err) {
    // A result that structured clone cannot carry (a function, a class instance with methods…).
    if (m[0] !== MSG.ok) throw err
    const e = new FrayError(
      'NOT_SERIALIZABLE',
      `actor ${runtime?.spec.name}: a method returned a value that ` +
        `cannot be sent to the driver (${(err as Error).message}); ` +
        `return plain data or typed arrays`,
    )
    process.send!([MSG.err, m[1], errorPayload(e)])
  }
}

process.on('message', (raw) => {
  const m = raw as ToWorker
  switch (m[0]) {
    case MSG.call: {
      const id = m[1]
      runtime!.call(m[2], m[3]).then(
        (v) => send([MSG.ok, id, v]),
        (e) => send([MSG.err, id, errorPayload(e)]),
      )
      return
    }
    case MSG.control: {
      const id = m[1]
      runtime!.control(m[2], m[3]).then(
        (v) => send([MSG.ok, id, v]),
        (e) => send([MSG.err, id, errorPayload(e)]),
      )
      return
    }
    case MSG.init:
      ActorRuntime.create(m[1]).then(
        (rt) => {
          runtime = rt
          send([MSG.ready])
        },
        (e) => {
          send([MSG.initFailed, errorPayload(e)])
          process.disconnect()
        },
      )
      return
    case MSG.stop:
      void (runtime?.close() ?? Promise.resolve()).finally(() => process.exit(0))
      return
  }
})

// The driver is gone: nobody can call this actor any more.
process.on('disconnect', () => process.exit(0))
