/**
 * @module The files the executor keeps in each step's output folder
 * (`.executor_status`, `.executor_status.lock`, `.executor_info`, `logs/`, and
 * `.staging/` while a step runs: see `step-output.ts`) and the per-name version
 * history under `.executor_history/` that `explain` reads.
 */
import {
  isRiggingError,
  type ObjectInfo,
  type SecretFingerprints,
  type Storage,
  type WriteCondition,
} from '@marin/rigging'

export const STEP_STATUSES = ['SUCCESS', 'FAILED', 'RUNNING', 'DEP_FAILED'] as const
export type StepStatus = (typeof STEP_STATUSES)[number]

export const statusPath = (nameHash: string) => `${nameHash}/.executor_status`
export const lockPath = (nameHash: string) => `${nameHash}/.executor_status.lock`
export const infoPath = (nameHash: string) => `${nameHash}/.executor_info`
export const historyPath = (name: string) => `.executor_history/${name}.json`

/**
 * A status as read: the word, when it was written, and the file's generation
 * (a runner writes its final status only at the generation of its own RUNNING).
 */
export type StatusRecord = { readonly status: StepStatus; readonly at: number; readonly generation: string }

export async function readStatus(storage: Storage, nameHash: string): Promise<StatusRecord | undefined> {
  const path = statusPath(nameHash)
  const st = await storage.stat(path)
  if (!st) return undefined
  let text: string
  try {
    text = (await storage.readText(path)).trim()
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND')) return undefined
    throw err
  }
  const word = text.split('\n')[0] as StepStatus
  // An unreadable status file is treated like a failure: the step re-runs.
  return { status: STEP_STATUSES.includes(word) ? word : 'FAILED', at: st.mtimeMs, generation: st.generation }
}

export type WriteStatusOptions = {
  /** Written on a second line (RUNNING names its lease owner, so that each run's RUNNING has bytes, and a generation,
   * of its own). */
  readonly owner?: string
  /** E.g. `{ ifGeneration }` of the status this run read or wrote: STORAGE_CONDITION_FAILED if anyone wrote it since.
   * */
  readonly condition?: WriteCondition
}

export async function writeStatus(
  storage: Storage,
  nameHash: string,
  status: StepStatus,
  opts: WriteStatusOptions = {},
): Promise<ObjectInfo> {
  return storage.write(
    statusPath(nameHash),
    `${status}\n${opts.owner ? `${opts.owner}\n` : ''}`,
    opts.condition ? { condition: opts.condition } : {},
  )
}

/** For a conditional status write that lost to another writer: their status stands. */
export function ignoreLostRace(err: unknown): void {
  if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) throw err
}

/** What `.executor_info` holds. */
export type StepInfo = {
  readonly name: string
  readonly version: string
  readonly nameHash: string
  readonly outputPath: string
  readonly versionedConfig: unknown
  readonly config: unknown
  readonly dependencies: readonly string[]
  readonly status: StepStatus
  readonly startedAt: string
  readonly finishedAt?: string
  readonly error?: string
  readonly owner: string
  readonly provenance: unknown
  /**
   * Fingerprints (salted hashes, never values) of the secrets the step's process registered, so that a report
   * published by another process can scrub them from the data the step wrote (see `secretFingerprints`).
   */
  readonly secrets?: SecretFingerprints
}

export async function writeInfo(storage: Storage, info: StepInfo, condition?: WriteCondition): Promise<ObjectInfo> {
  return storage.write(infoPath(info.nameHash), `${JSON.stringify(info, null, 2)}\n`, condition ? { condition } : {})
}

export async function readInfo(storage: Storage, nameHash: string): Promise<StepInfo | undefined> {
  try {
    return JSON.parse(await storage.readText(infoPath(nameHash))) as StepInfo
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND')) return undefined
    if (err instanceof SyntaxError) return undefined
    throw err
  }
}

/** One version of a step name, as remembered for `explain`. */
export type HistoryEntry = {
  readonly nameHash: string
  readonly hash: string
  readonly fields: Readonly<Record<string, string>>
  readonly dependencies: readonly string[]
  /** Last status seen for this version. */
  readonly status: StepStatus | 'PLANNED'
  /** ISO time of the last update. */
  readonly at: string
}

const HISTORY_LIMIT = 20

export async function readHistory(storage: Storage, name: string): Promise<HistoryEntry[]> {
  try {
    const h = JSON.parse(await storage.readText(historyPath(name))) as { entries?: HistoryEntry[] }
    return Array.isArray(h.entries) ? h.entries : []
  } catch (err) {
    if (isRiggingError(err, 'STORAGE_NOT_FOUND') || err instanceof SyntaxError) return []
    throw err
  }
}

/**
 * Records `entry` as the newest version of its step name (replacing an older
 * entry of the same version). A compare-and-swap loop, so concurrent runs never lose an entry.
 */
export async function recordHistory(storage: Storage, name: string, entry: HistoryEntry): Promise<void> {
  const path = historyPath(name)
  for (;;) {
    const st = await storage.stat(path)
    let entries: HistoryEntry[] = []
    if (st) {
      try {
        const parsed = JSON.parse(await storage.readText(path)) as { entries?: HistoryEntry[] }
        entries = Array.isArray(parsed.entries) ? parsed.entries : []
      } catch (err) {
        if (!(err instanceof SyntaxError) && !isRiggingError(err, 'STORAGE_NOT_FOUND')) throw err
      }
    }
    const prev = entries.find((e) => e.nameHash === entry.nameHash)
    // A PLANNED mark never hides a known outcome of the same version.
    const merged = entry.status === 'PLANNED' && prev ? { ...prev, at: entry.at } : entry
    const next = [...entries.filter((e) => e.nameHash !== entry.nameHash), merged].slice(-HISTORY_LIMIT)
    try {
      await storage.write(path, `${JSON.stringify({ name, entries: next }, null, 2)}\n`, {
        condition: st ? { ifGeneration: st.generation } : { ifAbsent: true },
      })
      return
    } catch (err) {
      if (!isRiggingError(err, 'STORAGE_CONDITION_FAILED')) throw err
    }
  }
}

/** Every step name that has a history, sorted. */
export async function historyNames(storage: Storage): Promise<string[]> {
  const names: string[] = []
  for await (const o of storage.list('.executor_history/')) {
    if (o.path.endsWith('.json')) names.push(o.path.slice('.executor_history/'.length, -'.json'.length))
  }
  return names.sort()
}
