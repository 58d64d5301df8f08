/**
 * @module The ducky services of hosted actors. `marin.fray.Actor` is what an actor's host
 * process serves (calls, fray's control requests, a liveness stream); `marin.fray.Driver` is
 * what the driver serves so that a freshly started host can say where it listens and fetch the
 * actor it should build. Arguments and results travel in ducky's wire format: JSON structure
 * plus typed arrays as raw binary segments.
 */
import { defineService, serverStream, unary } from '@marin/ducky'
import { z } from 'zod'

/** Actor arguments and results (and constructor arguments) carry tensors: up to 256 MiB a message, where the rest keep
 * ducky's 4 MiB. */
const BULK_BYTES = 256 * 1024 * 1024

const ErrorPayload = z.object({
  name: z.string(),
  message: z.string(),
  stack: z.string().optional(),
  code: z.string().optional(),
})

/** A result or the error the actor threw. */
const Outcome = z.object({ value: z.unknown().optional(), error: ErrorPayload.optional() })

export const ActorService = defineService({
  name: 'marin.fray.Actor',
  methods: {
    call: unary(z.object({ method: z.string(), args: z.array(z.unknown()) }), Outcome, {
      maxRequestBytes: BULK_BYTES,
      maxResponseBytes: BULK_BYTES,
    }),
    control: unary(z.object({ op: z.string(), arg: z.unknown() }), Outcome),
    /** Sends the host's pid, then stays open for as long as the host lives: its end is the death notice. */
    watch: serverStream(z.object({}), z.object({ pid: z.number() })),
    stop: unary(z.object({}), z.object({})),
  },
})

const ActorClassRef = z.object({ module: z.string(), export: z.string() })
export const ActorSpecSchema = z.object({
  name: z.string(),
  cls: ActorClassRef,
  args: z.array(z.unknown()),
  index: z.number().int(),
  groupSize: z.number().int(),
})

export const DriverService = defineService({
  name: 'marin.fray.Driver',
  methods: {
    /** A host announces itself and gets the spec of the actor to build. */
    register: unary(
      z.object({ name: z.string(), address: z.string(), pid: z.number() }),
      z.object({ spec: ActorSpecSchema }),
      { maxResponseBytes: BULK_BYTES },
    ),
    /** The host built the actor (or failed to). */
    built: unary(z.object({ name: z.string(), error: ErrorPayload.optional() }), z.object({})),
  },
})
