/**
 * @module The Marin prefix and the one table of what lives under it.
 *
 * The prefix is where everything Marin writes goes: `--prefix` (an option), else
 * `$MARIN_PREFIX`, else `./.marin`. An empty value counts as unset. Its canonical
 * form is a storage URL, the form `openStorage` takes: a local path becomes
 * `file:///absolute/path`, other URLs (`s3://`, `gs://`, `memory://`) keep their
 * scheme and lose a trailing slash. `prefixDir` gives the local folder of a
 * `file://` prefix; `localMarinPrefix` is for code that needs one (SQLite state,
 * task folders) and says so when the prefix is an object store.
 *
 * ```
 * <prefix>/
 *   store/                          MARIN_LAYOUT.store: the finestore artifact store
 *   <step-name>_<hash8>/            stepDirName(name, hash8): an executor step's output
 *   experiments/<name>/<run>.json   experimentRecordPath(name, run): run records reports read
 *   iris/iris.sqlite                MARIN_LAYOUT.irisState: the local cluster's scheduler state
 *   iris/token                      MARIN_LAYOUT.irisToken: the local cluster's token (0600)
 *   iris/work/                      MARIN_LAYOUT.irisWork: task folders of local workers
 *   datakit-work/                   MARIN_LAYOUT.datakitWork: datakit's resumable intermediate work
 *   datakit-cache/                  MARIN_LAYOUT.datakitCache: datakit's local copies of dataset shards
 * ```
 * Secrets do not live under the prefix: see `defaultSecretsDir` (`$MARIN_SECRETS_DIR`, else `~/.marin/secrets`).
 *
 * @example
 * const store = await openStorage(prefixPath(marinPrefix(), MARIN_LAYOUT.store))
 */
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { RiggingError } from './errors.js'

/** The prefix used when neither an option nor `$MARIN_PREFIX` gives one. */
export const DEFAULT_MARIN_PREFIX = './.marin'

/** Named locations under the prefix, relative to it. */
export const MARIN_LAYOUT = {
  store: 'store',
  experiments: 'experiments',
  iris: 'iris',
  irisState: 'iris/iris.sqlite',
  irisToken: 'iris/token',
  irisWork: 'iris/work',
  datakitWork: 'datakit-work',
  datakitCache: 'datakit-cache',
} as const

/** `experiments/<name>/<run>.json`: the record of one run of an experiment, relative to the prefix. */
export function experimentRecordPath(experiment: string, run: string): string {
  return `${MARIN_LAYOUT.experiments}/${experiment}/${run}.json`
}

/** `<name>_<hash8>`: the output folder of an executor step, relative to the prefix. */
export function stepDirName(name: string, hash: string): string {
  return `${name}_${hash}`
}

export type MarinPrefixOptions = {
  /** An explicit prefix (a `--prefix` flag or an API option); wins when non-empty. */
  readonly prefix?: string | undefined
  /** Where `MARIN_PREFIX` is read. @default process.env */
  readonly env?: NodeJS.ProcessEnv
  /** What a relative local path resolves against. @default process.cwd() */
  readonly cwd?: string
}

const SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//

/** The prefix as a storage URL: option, then `$MARIN_PREFIX`, then `./.marin` (empty strings count as unset). */
export function marinPrefix(opts: MarinPrefixOptions = {}): string {
  return prefixUrl(givenPrefix(opts).value, opts.cwd)
}

/** A prefix given as a local path or a storage URL, in canonical URL form. */
export function prefixUrl(prefix: string, cwd: string = process.cwd()): string {
  if (!SCHEME.test(prefix)) return pathToFileURL(resolve(cwd, prefix)).href.replace(/\/+$/, '')
  return prefix.replace(/(?<!:\/)\/+$/, '')
}

/** The local folder of a prefix (a `file://` URL or a path); `undefined` for an object store or memory. */
export function prefixDir(prefix: string): string | undefined {
  if (!SCHEME.test(prefix)) return resolve(prefix)
  return prefix.startsWith('file://') ? fileURLToPath(prefix).replace(/(.)\/+$/, '$1') : undefined
}

/** The prefix as a local folder, for state that must be on this machine; throws when it names an object store. */
export function localMarinPrefix(opts: MarinPrefixOptions = {}): string {
  const given = givenPrefix(opts)
  const url = prefixUrl(given.value, opts.cwd)
  const dir = prefixDir(url)
  if (dir === undefined) {
    throw new RiggingError(
      'PREFIX_NOT_LOCAL',
      `${given.from} is ${given.value}, not a local folder; this needs ` +
        `a local prefix: pass a path (e.g. ./.marin) or a file:// URL`,
    )
  }
  return dir
}

/** `rel` under `prefix`, in the prefix's own form: a URL under a URL, a path under a path. */
export function prefixPath(prefix: string, rel: string): string {
  if (!SCHEME.test(prefix)) return join(prefix, rel)
  return `${prefix.replace(/\/+$/, '')}/${rel}`
}

function givenPrefix(opts: MarinPrefixOptions): { value: string; from: string } {
  if (opts.prefix) return { value: opts.prefix, from: '--prefix' }
  const env = (opts.env ?? process.env).MARIN_PREFIX
  if (env) return { value: env, from: 'MARIN_PREFIX' }
  return { value: DEFAULT_MARIN_PREFIX, from: 'the default prefix' }
}
