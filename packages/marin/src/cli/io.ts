/** @module What the `marin` CLI commands share: I/O, argument parsers, the prefix. Usage errors are rigging's
 * `UsageError`. */
import { marinPrefix } from '@marin/rigging'
import { InvalidArgumentError } from 'commander'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
}

/** Runs a command's body; the number it resolves with is the CLI's exit code. */
export type Run = (fn: () => Promise<number>) => Promise<void>

export const intArg =
  (what: string, min = 1) =>
  (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min)
      throw new InvalidArgumentError(`expected ${what} (a whole number >= ${min})`)
    return Number(v)
  }

export const regexArg = (v: string) => {
  try {
    return new RegExp(v)
  } catch (err) {
    throw new InvalidArgumentError(`not a regular expression (${(err as Error).message})`)
  }
}

/** The prefix as a storage URL: `$MARIN_PREFIX` of the CLI's environment, else ./.marin. */
export const prefixOf = (io: CliIo) => marinPrefix({ env: io.env })
