/**
 * @module The `finestore` CLI: `ls`, `show`, `lineage`, `gc`, `verify`, `rebuild-catalog`.
 * The store is `<prefix>/store`, the prefix from `--prefix`, else `$MARIN_PREFIX`, else `./.marin`
 * (rigging's `marinPrefix`). Runs on rigging's CLI runner: exit 0 ok, 1 failure (not found,
 * corrupt data), 2 bad usage; a command's module loads when it runs.
 */
import { STDIO as PROCESS_STDIO, textCli } from '@marin/rigging/cli'
import pkg from '../package.json' with { type: 'json' }
import { FinestoreError } from './errors.js'

export { parseDuration, storeLocation } from './cli-args.js'

export type CliIo = {
  readonly out: (s: string) => void
  readonly err: (s: string) => void
  /** Where `MARIN_PREFIX` is read. @default process.env */
  readonly env?: NodeJS.ProcessEnv
  /** stderr is a terminal: progress is a bar redrawn in place instead of lines. @default false */
  readonly errIsTty?: boolean
}

const STDIO: CliIo = { ...PROCESS_STDIO, errIsTty: process.stderr.isTTY === true }

const USAGE_CODES: ReadonlySet<string> = new Set([
  'INVALID_NAME',
  'INVALID_REF',
  'INVALID_PATH',
  'INVALID_HASH',
  'INVALID_INPUT',
])

const commands = () => import('./cli-commands.js')

/** Runs the CLI on `argv` (without `node` and the script) and returns the exit code. */
export const runCli = textCli(
  (io: CliIo) => ({
    package: pkg,
    prefix: true,
    commands: [
      {
        name: 'ls',
        description: 'list artifacts (HEAD version, number of versions, kind)',
        load: async () => (await commands()).defineLs(io),
      },
      {
        name: 'show',
        description: 'show one version: metadata, config, lineage, files',
        load: async () => (await commands()).defineShow(io),
      },
      {
        name: 'lineage',
        description: 'what a version was derived from (ancestors) and what was derived from it (descendants)',
        load: async () => (await commands()).defineLineage(io),
      },
      {
        name: 'gc',
        description: 'remove blobs no version references (safe while others commit); report what is kept and why',
        load: async () => (await commands()).defineGc(io),
      },
      {
        name: 'verify',
        description:
          'rehash every blob; list damaged (corrupt or missing) blobs and ' +
          'the versions they break; exit 1 if any (or if a manifest is unreadable)',
        load: async () => (await commands()).defineVerify(io),
      },
      {
        name: 'rebuild-catalog',
        description: 'recreate catalog.sqlite from storage',
        load: async () => (await commands()).defineRebuildCatalog(io),
      },
    ],
    isUsageError: (err) => err instanceof FinestoreError && USAGE_CODES.has(err.code),
  }),
  STDIO,
)
