/** @module The plan of a run: for each step, what the executor will do and why (what `--dry-run` prints). */
import { readLease, type Storage } from '@marin/rigging'
import { lockPath, readHistory, readStatus } from './status-files.js'
import type { Step } from './step.js'
import type { StepVersion } from './version.js'

export type PlannedAction = 'run' | 'skip' | 'wait'

export type PlanEntry = {
  readonly step: Step
  readonly version: StepVersion
  readonly action: PlannedAction
  /** Why, e.g. `done at 2026-…`, `never ran`, `failed at …`, `config changed (last done: train_1a2b3c4d at …)`. */
  readonly reason: string
  /** Selected by `--run-only` (or no filter given), or needed by a selected step. */
  readonly selected: boolean
}

const iso = (ms: number) => new Date(ms).toISOString()

/** The steps `--run-only` selects: matches and everything they depend on. */
export function selectSteps(
  order: readonly Step[],
  deps: Map<Step, readonly Step[]>,
  runOnly: RegExp | undefined,
): { selected: Set<Step>; matched: Set<Step> } {
  if (!runOnly) return { selected: new Set(order), matched: new Set(order) }
  const matched = new Set(order.filter((s) => runOnly.test(s.name)))
  const selected = new Set<Step>()
  const add = (s: Step): void => {
    if (selected.has(s)) return
    selected.add(s)
    for (const d of deps.get(s) ?? []) add(d)
  }
  for (const s of matched) add(s)
  return { selected, matched }
}

/** Why a step with no status at its current version has to run: new, or its config changed since the last completed
 * version. */
async function neverRanReason(storage: Storage, v: StepVersion): Promise<string> {
  const done = (await readHistory(storage, v.name)).filter((e) => e.status === 'SUCCESS' && e.nameHash !== v.nameHash)
  const last = done[done.length - 1]
  return last
    ? `config changed (last done: ${last.nameHash} at ${last.at}; see \`marin explain ${v.name}\`)`
    : 'never ran'
}

/** Plans one step from its status files. */
export async function planStep(
  storage: Storage,
  step: Step,
  version: StepVersion,
  selected: boolean,
  forced: boolean,
): Promise<PlanEntry> {
  const base = { step, version, selected }
  const st = await readStatus(storage, version.nameHash)
  if (!selected) {
    return {
      ...base,
      action: 'skip',
      reason:
        st?.status === 'SUCCESS' ? `done at ${iso(st.at)}; not selected by --run-only` : 'not selected by --run-only',
    }
  }
  if (!st) return { ...base, action: 'run', reason: await neverRanReason(storage, version) }
  if (st.status === 'RUNNING') {
    const lease = await readLease(storage, lockPath(version.nameHash))
    if (lease?.record && lease.record.expiresAt > Date.now()) {
      return {
        ...base,
        action: 'wait',
        reason: `running elsewhere (${lease.record.owner}, lease until ${iso(lease.record.expiresAt)})`,
      }
    }
    const why = lease?.record ? `its lease expired at ${iso(lease.record.expiresAt)}` : 'it holds no lease'
    return { ...base, action: 'run', reason: `take over: RUNNING since ${iso(st.at)} but ${why}` }
  }
  if (st.status === 'SUCCESS')
    return forced
      ? { ...base, action: 'run', reason: `forced (done at ${iso(st.at)})` }
      : { ...base, action: 'skip', reason: `done at ${iso(st.at)}` }
  if (st.status === 'FAILED') return { ...base, action: 'run', reason: `failed at ${iso(st.at)}` }
  return { ...base, action: 'run', reason: `a dependency failed at ${iso(st.at)}` }
}

/** One line per step: `run   tokenize_1a2b3c4d  never ran`. */
export function formatPlan(entries: readonly PlanEntry[]): string[] {
  const w = Math.max(...entries.map((e) => e.version.nameHash.length), 4)
  return entries.map((e) => `${e.action.padEnd(5)} ${e.version.nameHash.padEnd(w)}  ${e.reason}`)
}
