/**
 * @module Finding the experiment record a report is built from: a record file, a folder of
 * runs (`experiments/<name>/`), a prefix holding one experiment, or an experiment name under the prefix.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { MARIN_LAYOUT, experimentRecordPath, openStorage, type Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import type { ExperimentRecord } from '../executor/executor.js'

/** A record and where it was read from. */
export type ResolvedSource = { readonly record: ExperimentRecord; readonly recordUrl: string }

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

async function runsIn(storage: Storage, dir: string): Promise<string[]> {
  const runs: string[] = []
  for await (const o of storage.list(dir ? `${dir}/` : '', { recursive: false })) {
    if (o.path.endsWith('.json')) runs.push(o.path)
  }
  // Run ids start with a sortable time stamp; the newest is last.
  return runs.sort()
}

async function experimentsIn(storage: Storage): Promise<string[]> {
  const names = new Set<string>()
  for await (const o of storage.list(`${MARIN_LAYOUT.experiments}/`)) {
    const name = o.path.split('/')[1]
    if (name && o.path.endsWith('.json')) names.add(name)
  }
  return [...names].sort()
}

async function readRecord(storage: Storage, path: string): Promise<ResolvedSource> {
  const url = `${storage.url.replace(/\/+$/, '')}/${path}`
  let parsed: unknown
  try {
    parsed = JSON.parse(await storage.readText(path))
  } catch (err) {
    throw new MarinError(
      'REPORT_SOURCE_INVALID',
      `--source: ${url} is not a readable experiment record (` +
        `${(err as Error).message}); pass a record written by \`marin run\``,
      { cause: err },
    )
  }
  const r = parsed as Partial<ExperimentRecord>
  if (
    typeof r !== 'object' ||
    r === null ||
    typeof r.experiment !== 'string' ||
    typeof r.run !== 'string' ||
    !Array.isArray(r.steps) ||
    typeof r.prefix !== 'string'
  ) {
    throw new MarinError(
      'REPORT_SOURCE_INVALID',
      `--source: ${url} lacks "experiment", "run", "prefix" or ` +
        `"steps"; pass a record written by \`marin run\` ` +
        `(experiments/<name>/<run>.json)`,
    )
  }
  return { record: r as ExperimentRecord, recordUrl: url }
}

async function newestRun(storage: Storage, dir: string, what: string): Promise<ResolvedSource> {
  const runs = await runsIn(storage, dir)
  const last = runs.at(-1)
  if (!last)
    throw new MarinError(
      'EXPERIMENT_NOT_FOUND',
      `--source: ${what} has no runs (no .json records); run the experiment first with \`marin run\``,
    )
  return readRecord(storage, last)
}

/** A prefix holding exactly one experiment (its newest run), or a folder of runs (the newest). */
async function fromFolder(storage: Storage, where: string): Promise<ResolvedSource> {
  if ((await storage.exists('.executor_history')) || (await experimentsIn(storage)).length > 0) {
    const names = await experimentsIn(storage)
    if (names.length === 1)
      return newestRun(
        storage,
        `${MARIN_LAYOUT.experiments}/${names[0]}`,
        `${where}/${MARIN_LAYOUT.experiments}/${names[0]}`,
      )
    if (names.length === 0)
      throw new MarinError(
        'EXPERIMENT_NOT_FOUND',
        `--source: ${where} is a prefix without experiment records; run an experiment first`,
      )
    throw new MarinError(
      'BAD_USAGE',
      `--source: ${where} holds ${names.length} experiments (` +
        `${names.join(', ')}); pass one by name, e.g. --source ${names[0]}`,
    )
  }
  return newestRun(storage, '', where)
}

/**
 * Resolves `--source`: a record file, a folder of records (newest run), a prefix with exactly one
 * experiment (its newest run), or `NAME` / `NAME/RUN` under `prefix`.
 */
export async function resolveSource(source: string, prefix: string): Promise<ResolvedSource> {
  if (!source) throw new MarinError('BAD_USAGE', '--source: expected a folder, a record file or an experiment name')
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(source)
  const local = isUrl ? undefined : resolve(source)
  if (local && existsSync(local)) {
    const st = statSync(local)
    if (st.isFile()) {
      const storage = await openStorage(resolve(local, '..'))
      return readRecord(storage, local.split('/').at(-1)!)
    }
    return fromFolder(await openStorage(local), local)
  }
  if (isUrl) {
    // A storage URL: a record file when it ends in .json, else a prefix or a folder of runs.
    if (source.endsWith('.json')) {
      const cut = source.lastIndexOf('/')
      return readRecord(await openStorage(source.slice(0, cut)), source.slice(cut + 1))
    }
    return fromFolder(await openStorage(source), source)
  }
  const [name, run, ...rest] = source.split('/')
  if (!name || !NAME.test(name) || rest.length > 0 || (run !== undefined && !NAME.test(run.replace(/\.json$/, '')))) {
    throw new MarinError(
      'BAD_USAGE',
      `--source: "${source}" is neither an existing folder or file nor an experiment name (NAME or NAME/RUN)`,
    )
  }
  const storage = await openStorage(prefix)
  if (run !== undefined) {
    const path = experimentRecordPath(name, run.replace(/\.json$/, ''))
    if (!(await storage.exists(path)))
      throw new MarinError(
        'EXPERIMENT_NOT_FOUND',
        `--source: no run "${run}" of experiment "${name}" under ${storage.url} (looked for ${path})`,
      )
    return readRecord(storage, path)
  }
  const runs = await runsIn(storage, `${MARIN_LAYOUT.experiments}/${name}`)
  if (runs.length === 0) {
    const known = await experimentsIn(storage)
    throw new MarinError(
      'EXPERIMENT_NOT_FOUND',
      `--source: no experiment "${name}" under ${storage.url}` +
        `${known.length ? ` (it has: ${known.join(', ')})` : ''}; set ` +
        `MARIN_PREFIX or pass a folder`,
    )
  }
  return readRecord(storage, runs.at(-1)!)
}
