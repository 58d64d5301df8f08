/** @module `versioned(value)`: marks a config field as part of a step's version. */

const VERSIONED = Symbol.for('marin.versioned')

/** A config value that counts toward the step's version. */
export class Versioned<T = unknown> {
  readonly [VERSIONED] = true
  constructor(readonly value: T) {}
  toJSON(): T {
    return this.value
  }
}

/**
 * Marks `value` as versioned: changing it changes the step's hash and output path.
 * Fields not marked (paths to scratch space, worker counts, log levels) can change freely.
 *
 * @example
 * step({ name: 'train', config: { lr: versioned(3e-4), logEvery: 10 }, fn })
 */
export function versioned<T>(value: T): Versioned<T> {
  return new Versioned(value)
}

export function isVersioned(x: unknown): x is Versioned {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[VERSIONED] === true
}
