/** @module How the `finestore` CLI prints tables, manifests and gc and verify reports. */
import type { GcReport } from './gc.js'
import type { Manifest } from './manifest.js'
import { formatRef } from './names.js'
import { formatBytes as human } from './progress.js'
import type { VerifyReport } from './verify.js'

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)))
  return rows
    .map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  '))
    .join('\n')
}

export function showManifest(m: Manifest, tags: Record<string, number>): string {
  const files = Object.entries(m.files)
  const lines = [
    `${formatRef(m.artifact, m.version)}`,
    `  kind:     ${m.kind}`,
    `  created:  ${m.createdAt}`,
    `  parent:   ${m.parent ?? '(none)'}`,
    ...(m.message ? [`  message:  ${m.message}`] : []),
    `  tags:     ${
      Object.entries(tags)
        .filter(([, v]) => v === m.version)
        .map(([t]) => t)
        .join(', ') || '(none)'
    }`,
    `  lineage:  ${m.lineage.map((l) => formatRef(l.artifact, l.version)).join(', ') || '(none)'}`,
    `  metadata: ${JSON.stringify(m.metadata)}`,
    `  config:   ${JSON.stringify(m.config)}`,
    `  files:    ${files.length} (${human(files.reduce((s, [, f]) => s + f.size, 0))})`,
  ]
  for (const [path, f] of files) lines.push(`    ${path}  ${human(f.size)}  sha256:${f.blob.slice(0, 12)}`)
  return lines.join('\n')
}

export function showGc(r: GcReport): string {
  const verb = r.dryRun ? 'would remove' : 'removed'
  const tmpBytes = r.tmpsRemoved.reduce((s, t) => s + t.size, 0)
  const lines = [
    `${verb} ${r.deleted.length} blobs (${human(r.bytesDeleted)}) ` +
      `and ${r.tmpsDeleted} temp uploads (${human(tmpBytes)}): ` +
      `${r.dryRun ? 'would free' : 'freed'} ${human(r.bytesFreed)}; ` +
      `scanned ${r.blobsScanned} blobs: ${r.referenced} referenced, ` +
      `${r.pinned} pinned by open transactions, ${r.young} younger ` +
      `than the grace period`,
  ]
  for (const d of r.deleted) lines.push(`  ${d.hash}  ${human(d.size)}`)
  const who = (p: GcReport['pinsHeld'][number]) =>
    `txn ${p.id}  ${p.artifact ?? '(unreadable record)'}  pid ` +
    `${p.pid ?? '?'} on ${p.host ?? '?'}` +
    `${p.writerGone === true ? ' (gone)' : p.writerGone === false ? ' (running)' : ''}`
  if (r.pinsHeld.length > 0) {
    lines.push(`pins held (${r.pinsHeld.length}):`)
    for (const p of r.pinsHeld)
      lines.push(
        `  ${who(p)}  since ${p.startedAt ?? '?'}  until ${p.expiresAt} ` +
          `(last heartbeat ${p.heartbeatAt})  pins ${p.blobs} blobs, ` +
          `${p.tmps} temp uploads`,
      )
  }
  if (r.pinsExpired.length > 0) {
    lines.push(`pins ${r.dryRun ? 'that would expire' : 'expired'} (${r.pinsExpired.length}):`)
    for (const p of r.pinsExpired) lines.push(`  ${who(p)}: ${p.reason}`)
  }
  if (r.tmpsKept.length > 0) {
    lines.push(`temp uploads kept (${r.tmpsKept.length}):`)
    for (const t of r.tmpsKept) lines.push(`  ${t.path}  ${human(t.size)}  ${t.reason}`)
  }
  if (r.tmpsRemoved.length > 0) {
    lines.push(`temp uploads ${r.dryRun ? 'that would be removed' : 'removed'} (${r.tmpsRemoved.length}):`)
    for (const t of r.tmpsRemoved) lines.push(`  ${t.path}  ${human(t.size)}`)
  }
  if (r.pinsHeld.some((p) => p.writerGone !== false)) {
    lines.push(
      'pins of writers that are gone expire now with `finestore gc ' +
        '--expire-pins`; add `--older-than 10m` for pins without a ' +
        'recent heartbeat from other hosts',
    )
  }
  if (r.skipped) lines.push(`skipped: ${r.skipped}`)
  return lines.join('\n')
}

export function showVerify(r: VerifyReport, from: string | undefined): string {
  const lines: string[] = []
  for (const d of r.repaired) lines.push(`repaired ${d.hash} from ${d.from}`)
  for (const d of r.damaged) {
    lines.push(
      d.problem === 'corrupt'
        ? `${d.hash}  corrupt: its ${d.storedSize} bytes hash to ` +
            `${d.actualHash}` +
            `${d.expectedSize !== undefined ? ` (expected ${d.expectedSize} bytes)` : ''}`
        : `${d.hash}  missing${d.expectedSize !== undefined ? ` (${d.expectedSize} bytes)` : ''}`,
    )
    for (const u of d.usedBy) lines.push(`    ${u.ref}  ${u.file}`)
    if (d.usedBy.length === 0) lines.push('    (no version uses it)')
  }
  for (const u of r.unreadableManifests) lines.push(`unreadable manifest: ${u.error}`)
  if (r.damaged.length === 0) {
    lines.push(
      `all ` +
        `${r.blobsChecked + r.repaired.filter((d) => d.problem === 'missing').length}` +
        ` blobs intact (${human(r.bytesChecked)} rehashed)`,
    )
    if (r.unreadableManifests.length > 0)
      lines.push(`but ${r.unreadableManifests.length} manifests are unreadable: restore them from a copy of the store`)
    return lines.join('\n')
  }
  if (from !== undefined)
    lines.push(`not repaired: no file under ${from} has the right bytes of ${r.damaged.length} damaged blobs`)
  lines.push(
    `${r.damaged.length} damaged blobs break ` +
      `${r.brokenVersions.length} versions` +
      `${r.brokenVersions.length ? `: ${r.brokenVersions.join(', ')}` : ''}. ` +
      'Restore them with `finestore verify --repair-from <folder with good copies>`, or commit the same files again',
  )
  return lines.join('\n')
}
