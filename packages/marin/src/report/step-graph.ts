/**
 * @module The step graph as an SVG laid out here: steps in columns by depth (longest
 * path from a root), edges as curves from each dependency, boxes coloured by status
 * and labelled with name, hash and duration.
 */
import { escapeXml, formatSeconds } from './format.js'
import type { ReportStep } from './types.js'

const BOX_W = 190
const BOX_H = 54
const COL_GAP = 70
const ROW_GAP = 18
const PAD = 12

/** Fill colours by status; the legend in the page uses the same. */
export const STATUS_COLORS: Readonly<Record<string, string>> = {
  SUCCESS: '#d4f4dd',
  SKIPPED: '#e4ecf7',
  FAILED: '#f9d0d0',
  DEP_FAILED: '#f6e3c6',
  RUNNING: '#fff6c2',
  PLANNED: '#eeeeee',
}

/** Column (depth) of each step by nameHash; dependencies outside the record are ignored. */
export function layers(steps: readonly ReportStep[]): Map<string, number> {
  const byHash = new Map(steps.map((s) => [s.nameHash, s]))
  const depth = new Map<string, number>()
  const visit = (h: string, seen: Set<string>): number => {
    const known = depth.get(h)
    if (known !== undefined) return known
    if (seen.has(h)) return 0
    seen.add(h)
    const s = byHash.get(h)
    const d = s ? Math.max(-1, ...s.dependencies.filter((x) => byHash.has(x)).map((x) => visit(x, seen))) + 1 : 0
    depth.set(h, d)
    return d
  }
  for (const s of steps) visit(s.nameHash, new Set())
  return depth
}

/** The graph as standalone SVG text (no fonts or scripts referenced). */
export function stepGraphSvg(steps: readonly ReportStep[]): string {
  const depth = layers(steps)
  const cols: ReportStep[][] = []
  for (const s of steps) (cols[depth.get(s.nameHash) ?? 0] ??= []).push(s)
  const pos = new Map<string, { x: number; y: number }>()
  cols.forEach((col, c) =>
    col.forEach((s, r) => pos.set(s.nameHash, { x: PAD + c * (BOX_W + COL_GAP), y: PAD + r * (BOX_H + ROW_GAP) })),
  )
  const width = PAD * 2 + Math.max(1, cols.length) * BOX_W + Math.max(0, cols.length - 1) * COL_GAP
  const height = PAD * 2 + Math.max(1, ...cols.map((c) => c?.length ?? 0)) * (BOX_H + ROW_GAP) - ROW_GAP
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="step-graph" ` +
      `width="${width}" height="${height}" viewBox="0 0 ${width} ` +
      `${height}" font-family="sans-serif" font-size="12">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" ' +
      'markerWidth="7" markerHeight="7" orient="auto"><path ' +
      'd="M0,0L10,5L0,10z" fill="#777"/></marker></defs>',
  ]
  for (const s of steps) {
    const to = pos.get(s.nameHash)!
    for (const d of s.dependencies) {
      const from = pos.get(d)
      if (!from) continue
      const x1 = from.x + BOX_W
      const y1 = from.y + BOX_H / 2
      const x2 = to.x
      const y2 = to.y + BOX_H / 2
      const mx = (x1 + x2) / 2
      parts.push(
        `<path class="edge" d="M${x1},${y1}C${mx},${y1} ${mx},${y2} ${x2}` +
          `,${y2}" fill="none" stroke="#777" stroke-width="1.5" ` +
          `marker-end="url(#arrow)"/>`,
      )
    }
  }
  for (const s of steps) {
    const { x, y } = pos.get(s.nameHash)!
    const fill = STATUS_COLORS[s.status] ?? '#eeeeee'
    const hash = s.nameHash.slice(s.name.length + 1)
    const time = s.seconds !== undefined ? formatSeconds(s.seconds) : ''
    parts.push(
      `<g class="step" data-status="${escapeXml(s.status)}"><title>` +
        `${escapeXml(`${s.nameHash}: ${s.status}${s.reason ? ` (${s.reason})` : ''}`)}</title>`,
      `<rect x="${x}" y="${y}" width="${BOX_W}" height="${BOX_H}" rx="6" fill="${fill}" stroke="#555"/>`,
      `<text x="${x + 8}" y="${y + 18}" font-weight="bold">${escapeXml(truncate(s.name, 24))}</text>`,
      `<text x="${x + 8}" y="${y + 33}" fill="#444">` +
        `${escapeXml(s.status)}${time ? ` · ${escapeXml(time)}` : ''}</text>`,
      `<text x="${x + 8}" y="${y + 47}" fill="#777" font-family="monospace" font-size="10">${escapeXml(hash)}</text>`,
      '</g>',
    )
  }
  parts.push('</svg>')
  return parts.join('\n')
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s
}
