/**
 * @module Finding the experiment record a report is built from: a record file, a folder of
 * runs (`experiments/<name>/`), a prefix holding one experiment, or an experiment name under the prefix.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { MARIN_LAYOUT, experimentRecordPath, openStorage, prefixDir, prefixUrl, type Storage } from '@marin/rigging'
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
  return { record: relocated(r as ExperimentRecord, url), recordUrl: url }
}

/** A record as the report reads it: `movedFrom` is the prefix it names, when it was found under another. */
export type LocatedRecord = ExperimentRecord & { readonly movedFrom?: string }

/**
 * The record as seen from where it was found: a prefix that was moved or copied (a folder renamed, a bucket
 * synced) keeps the absolute paths of the place it was written in its records, so when the record sits at
 * `<here>/experiments/<name>/<run>.json` and names another prefix, the prefix and every step output under it
 * are read as `<here>`'s (`movePaths` moves the paths in the steps' resolved configs too). A record found
 * outside any prefix is left as it is.
 */
export function relocated(record: ExperimentRecord, recordUrl: string): LocatedRecord {
  const tail = `/${experimentRecordPath(record.experiment, record.run)}`
  if (!recordUrl.endsWith(tail)) return record
  const here = prefixUrl(recordUrl.slice(0, -tail.length))
  const was = prefixUrl(record.prefix)
  if (here === was) return record
  const moved = { ...record, prefix: here, movedFrom: was }
  return {
    ...moved,
    steps: record.steps.map((st) =>
      typeof st?.outputPath === 'string' ? { ...st, outputPath: movePaths(st.outputPath, moved) as string } : st,
    ),
  }
}

/** `value` (any JSON) with every string that is a path or URL under `movedFrom` moved under the record's prefix. */
export function movePaths(value: unknown, record: LocatedRecord): unknown {
  const from = record.movedFrom
  if (from === undefined) return value
  const pairs: [string, string][] = [[from, record.prefix]]
  const [oldDir, newDir] = [prefixDir(from), prefixDir(record.prefix)]
  if (oldDir !== undefined && newDir !== undefined) pairs.unshift([oldDir, newDir])
  const move = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') {
      for (const [a, b] of pairs) if (v === a || v.startsWith(`${a}/`)) return b + v.slice(a.length)
      return v
    }
    if (depth > 64 || typeof v !== 'object' || v === null) return v
    if (Array.isArray(v)) return v.map((x) => move(x, depth + 1))
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, move(x, depth + 1)]))
  }
  return move(value, 0)
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
