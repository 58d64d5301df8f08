/** @module Recognising rigging storage failures by their stable code. */

// Compared by code rather than by class so that a storage adapter from another copy of rigging still matches.
const codeOf = (err: unknown): unknown =>
  typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined

export const isConditionFailed = (err: unknown): boolean => codeOf(err) === 'STORAGE_CONDITION_FAILED'
export const isNotFound = (err: unknown): boolean => codeOf(err) === 'STORAGE_NOT_FOUND'
