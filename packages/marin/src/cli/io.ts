/** @module What the `marin` CLI commands share: I/O, usage errors, argument parsers. */
import { InvalidArgumentError } from 'commander'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
}

/** Bad usage: the CLI prints the message and exits 2. */
export class UsageError extends Error {}

export const intArg = (what: string, min = 1) => (v: string) => {
  if (!/^\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`expected ${what} (a whole number >= ${min})`)
  return Number(v)
}

export const regexArg = (v: string) => {
  try {
    return new RegExp(v)
  } catch (err) {
    throw new InvalidArgumentError(`not a regular expression (${(err as Error).message})`)
  }
}

/** The prefix from MARIN_PREFIX, default ./.marin. */
export const prefixOf = (io: CliIo) => io.env.MARIN_PREFIX || './.marin'
