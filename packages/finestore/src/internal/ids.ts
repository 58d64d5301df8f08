/** @module Unique ids for transactions and temporary uploads. */
import { randomBytes } from 'node:crypto'

/** Time-ordered and unique across processes: `<ms base36>-<pid>-<random>`. */
export const newId = (): string => `${Date.now().toString(36)}-${process.pid}-${randomBytes(6).toString('hex')}`
