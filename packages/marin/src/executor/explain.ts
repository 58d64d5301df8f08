/** @module `marin explain STEP`: why a step's version differs from its last completed one, field by field. */
import type { Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { readHistory, type HistoryEntry } from './status-files.js'
import type { StepVersion } from './version.js'

export type FieldChange = {
  readonly field: string
  readonly kind: 'changed' | 'added' | 'removed'
  readonly before?: string
  readonly after?: string
}

export type Explanation = {
  readonly name: string
  readonly current: Pick<HistoryEntry, 'nameHash' | 'fields' | 'dependencies'> & {
    readonly status?: string
    readonly at?: string
  }
  /** The last completed version other than the current one; undefined when there is none. */
  readonly lastDone?: HistoryEntry
  /** True when the current version is itself done. */
  readonly currentDone: boolean
  readonly fields: readonly FieldChange[]
  readonly dependencies: { readonly removed: readonly string[]; readonly added: readonly string[] }
}

function diffFields(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): FieldChange[] {
  const out: FieldChange[] = []
  for (const k of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
    const b = before[k]
    const a = after[k]
    if (b === a) continue
    if (b === undefined) out.push({ field: k, kind: 'added', after: a! })
    else if (a === undefined) out.push({ field: k, kind: 'removed', before: b })
    else out.push({ field: k, kind: 'changed', before: b, after: a })
  }
  return out
}

/**
 * Compares `current` (from the script; default: the newest version of `name`
 * that any run planned) with the last completed version of the same name.
 * `name` may also be a `name_hash8` folder name.
 */
export async function explainStep(storage: Storage, nameOrHash: string, current?: StepVersion): Promise<Explanation> {
  const m = /^(.*)_([0-9a-f]{8})$/.exec(nameOrHash)
  let name = current?.name ?? nameOrHash
  let entries = await readHistory(storage, name)
  if (!current && entries.length === 0 && m) {
    name = m[1]!
    entries = await readHistory(storage, name)
  }
  if (entries.length === 0 && !current) {
    throw new MarinError(
      'STEP_NOT_FOUND',
      `no step named "${nameOrHash}" has run under ${storage.url}; see \`marin ls\` for the steps there`,
    )
  }
  const cur =
    current ??
    (m && entries.find((e) => e.nameHash === nameOrHash)) ??
    [...entries].sort((a, b) => a.at.localeCompare(b.at))[entries.length - 1]!
  const curEntry = entries.find((e) => e.nameHash === cur.nameHash)
  const lastDone = entries
    .filter((e) => e.status === 'SUCCESS' && e.nameHash !== cur.nameHash)
    .sort((a, b) => a.at.localeCompare(b.at))
    .pop()
  const before = lastDone ?? { fields: {}, dependencies: [] as string[] }
  return {
    name,
    current: {
      nameHash: cur.nameHash,
      fields: cur.fields,
      dependencies: cur.dependencies,
      ...(curEntry ? { status: curEntry.status, at: curEntry.at } : {}),
    },
    ...(lastDone ? { lastDone } : {}),
    currentDone: curEntry?.status === 'SUCCESS',
    fields: lastDone ? diffFields(before.fields, cur.fields) : [],
    dependencies: lastDone
      ? {
          removed: before.dependencies.filter((d) => !cur.dependencies.includes(d)),
          added: cur.dependencies.filter((d) => !before.dependencies.includes(d)),
        }
      : { removed: [], added: [] },
  }
}

/** The text `marin explain` prints. */
export function formatExplanation(x: Explanation): string[] {
  const lines = [
    `${x.name}: current version ${x.current.nameHash}` +
      `${x.current.status ? ` (${x.current.status} at ${x.current.at})` : ' (not run yet)'}`,
  ]
  if (!x.lastDone) {
    lines.push(
      x.currentDone
        ? '  this is the only completed version; nothing to compare'
        : '  no other version has completed; nothing to compare',
    )
    return lines
  }
  lines.push(`  last completed other version: ${x.lastDone.nameHash} (done at ${x.lastDone.at})`)
  if (x.fields.length === 0 && x.dependencies.added.length === 0)
    lines.push(
      '  versioned fields and dependencies are the same (the hash ' +
        'covers only the name, versioned fields and dependencies)',
    )
  for (const f of x.fields) {
    if (f.kind === 'changed') lines.push(`  changed  ${f.field}: ${f.before} -> ${f.after}`)
    else if (f.kind === 'added') lines.push(`  added    ${f.field}: ${f.after}`)
    else lines.push(`  removed  ${f.field}: ${f.before}`)
  }
  const stem = (nh: string) => nh.replace(/_[0-9a-f]{8}$/, '')
  const added = [...x.dependencies.added]
  for (const r of x.dependencies.removed) {
    const i = added.findIndex((a) => stem(a) === stem(r))
    lines.push(`  dependency ${r} -> ${i >= 0 ? added.splice(i, 1)[0] : '(none)'}`)
  }
  for (const a of added) lines.push(`  dependency (none) -> ${a}`)
  return lines
}
