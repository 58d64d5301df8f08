/** @module What a service implementation looks like: one handler per method, typed from the schemas. */
import type { Metadata } from '@grpc/grpc-js'
import type { z } from 'zod'
import type { MethodDef, ServiceDef } from './service.js'

/** What a handler knows about its call. */
export type CallContext = {
  /** The method path, e.g. `/marin.iris.Controller/submit`. */
  readonly method: string
  /** Aborted when the client cancels, the deadline passes or the server is forced down; stop work then. */
  readonly signal: AbortSignal
  /** The request metadata (headers). */
  readonly metadata: Metadata
  /** The client's address as grpc-js reports it. */
  readonly peer: string
  /** When the client stops waiting, if it set a deadline. */
  readonly deadline: Date | undefined
}

export type UnaryHandler<Req, Res> = (request: Req, ctx: CallContext) => Res | Promise<Res>
export type ServerStreamHandler<Req, Res> = (request: Req, ctx: CallContext) => AsyncIterable<Res> | Iterable<Res>
export type BidiHandler<Req, Res> = (
  requests: AsyncIterable<Req>,
  ctx: CallContext,
) => AsyncIterable<Res> | Iterable<Res>

/** The handler type of one method: requests arrive parsed (`z.output`), responses are checked (`z.input`). */
export type HandlerOf<D> =
  D extends MethodDef<'unary', infer Q, infer S>
    ? UnaryHandler<z.output<Q>, z.input<S>>
    : D extends MethodDef<'serverStream', infer Q, infer S>
      ? ServerStreamHandler<z.output<Q>, z.input<S>>
      : D extends MethodDef<'bidi', infer Q, infer S>
        ? BidiHandler<z.output<Q>, z.input<S>>
        : never

/** An implementation of every method of a service. */
export type ServiceImpl<S extends ServiceDef> = { [K in keyof S['methods']]: HandlerOf<S['methods'][K]> }

/** Any handler function; the server calls each with the arguments its kind of method takes. */
type AnyHandler = (...args: never[]) => unknown

/** A definition with its implementation, ready to add to a server. */
export type ServiceBinding = { readonly def: ServiceDef; readonly impl: Readonly<Record<string, AnyHandler>> }

/** Pairs a definition with its implementation, checked against each other. */
export function bind<S extends ServiceDef>(def: S, impl: ServiceImpl<S>): ServiceBinding {
  return { def, impl: impl as unknown as Record<string, AnyHandler> }
}
