/** @module When and how long a client waits before retrying an idempotent call. */
import type { RpcCode } from './errors.js'

export type RetryOptions = {
  /** Attempts in all, the first included; 1 disables retries. @default 6 */
  maxAttempts?: number
  /** Delay cap before the first retry, in ms. @default 100 */
  initialMs?: number
  /** Upper bound of any delay, in ms. @default 2000 */
  maxMs?: number
  /** Growth of the delay cap per retry. @default 2 */
  multiplier?: number
  /** Status codes worth retrying. @default ['UNAVAILABLE', 'DEADLINE_EXCEEDED'] */
  codes?: readonly RpcCode[]
}

export type RetryPolicy = Required<RetryOptions>

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 6,
  initialMs: 100,
  maxMs: 2000,
  multiplier: 2,
  codes: Object.freeze(['UNAVAILABLE', 'DEADLINE_EXCEEDED'] as RpcCode[]),
})

export function retryPolicy(opts: RetryOptions = {}): RetryPolicy {
  return { ...DEFAULT_RETRY, ...opts }
}

/**
 * The delay before retry number `retry` (0 for the first retry): exponential growth capped at
 * `maxMs`, with "equal jitter" (half fixed, half random) so that many clients that failed
 * together do not come back together, while each still waits a predictable minimum.
 */
export function backoffMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const cap = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** retry)
  return cap / 2 + random() * (cap / 2)
}
