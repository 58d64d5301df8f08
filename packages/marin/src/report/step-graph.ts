/**
 * @module The step graph as an SVG laid out here, in layers that wrap: a step's layer is its depth
 * (the longest path from a root), layers are columns left to right, and when there are more layers
 * than fit in `GRAPH_MAX_WIDTH` the next ones continue in a band below, so any experiment fits the
 * page's width (at 1280 px) without scrolling or shrinking. Edges are curves from each dependency;
 * boxes are coloured by status and labelled with name, status, duration and hash.
 */
import { escapeXml, formatSeconds } from './format.js'
import type { ReportStep } from './types.js'

/** The widest the graph may be: the page's content box at 1280 px (see html.ts). */
export const GRAPH_MAX_WIDTH = 1040
const BOX_W = 172
const BOX_H = 54
const COL_GAP = 36
const ROW_GAP = 16
const BAND_GAP = 40
const PAD = 12
/** Layers side by side in one band. */
const PER_BAND = Math.max(1, Math.floor((GRAPH_MAX_WIDTH - 2 * PAD + COL_GAP) / (BOX_W + COL_GAP)))
const NAME_CHARS = 22

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

/** Where a step's box is: pixels, plus the band (row of layers) and layer it sits in. */
export type GraphBox = { x: number; y: number; w: number; h: number; band: number; layer: number }

/** The layout: the SVG's size and each step's box by nameHash. */
export type GraphLayout = { width: number; height: number; boxes: Map<string, GraphBox> }

/** Lays the steps out in layers, `PER_BAND` layers to a band, bands one under the other. */
export function stepGraphLayout(steps: readonly ReportStep[]): GraphLayout {
  const depth = layers(steps)
  const cols: ReportStep[][] = []
  for (const s of steps) (cols[depth.get(s.nameHash) ?? 0] ??= []).push(s)
  const bands = Math.max(1, Math.ceil(cols.length / PER_BAND))
  const boxes = new Map<string, GraphBox>()
  let y0 = PAD
  for (let b = 0; b < bands; b++) {
    const inBand = cols.slice(b * PER_BAND, (b + 1) * PER_BAND)
    const rows = Math.max(1, ...inBand.map((c) => c?.length ?? 0))
    inBand.forEach((col, c) =>
      (col ?? []).forEach((s, r) =>
        boxes.set(s.nameHash, {
          x: PAD + c * (BOX_W + COL_GAP),
          y: y0 + r * (BOX_H + ROW_GAP),
          w: BOX_W,
          h: BOX_H,
          band: b,
          layer: b * PER_BAND + c,
        }),
      ),
    )
    y0 += rows * (BOX_H + ROW_GAP) - ROW_GAP + BAND_GAP
  }
  const used = Math.min(PER_BAND, Math.max(1, cols.length))
  return { width: PAD * 2 + used * BOX_W + (used - 1) * COL_GAP, height: y0 - BAND_GAP + PAD, boxes }
}

/** An edge: right side to left side within a band; bottom to top when it wraps to a later band. */
function edgePath(from: GraphBox, to: GraphBox): string {
  if (from.band === to.band) {
    const [x1, y1, x2, y2] = [from.x + from.w, from.y + from.h / 2, to.x, to.y + to.h / 2]
    const mx = (x1 + x2) / 2
    return `M${x1},${y1}C${mx},${y1} ${mx},${y2} ${x2},${y2}`
  }
  const [x1, y1, x2, y2] = [from.x + from.w / 2, from.y + from.h, to.x + to.w / 2, to.y]
  return `M${x1},${y1}C${x1},${y1 + BAND_GAP} ${x2},${y2 - BAND_GAP} ${x2},${y2}`
}

/** The graph as standalone SVG text (no fonts or scripts referenced); it scales down if ever given less room. */
export function stepGraphSvg(steps: readonly ReportStep[]): string {
  const { width, height, boxes } = stepGraphLayout(steps)
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="step-graph" ` +
      `width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `style="max-width:100%;height:auto" font-family="sans-serif" font-size="12">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" ' +
      'markerWidth="7" markerHeight="7" orient="auto"><path ' +
      'd="M0,0L10,5L0,10z" fill="#777"/></marker></defs>',
  ]
  for (const s of steps) {
    const to = boxes.get(s.nameHash)!
    for (const d of s.dependencies) {
      const from = boxes.get(d)
      if (!from) continue
      parts.push(
        `<path class="edge" d="${edgePath(from, to)}" fill="none" stroke="#777" stroke-width="1.5" ` +
          `marker-end="url(#arrow)"/>`,
      )
    }
  }
  for (const s of steps) {
    const { x, y, w, h } = boxes.get(s.nameHash)!
    const fill = STATUS_COLORS[s.status] ?? '#eeeeee'
    const hash = s.nameHash.slice(s.name.length + 1)
    const time = s.seconds !== undefined ? formatSeconds(s.seconds) : ''
    parts.push(
      `<g class="step" data-status="${escapeXml(s.status)}"><title>` +
        `${escapeXml(`${s.nameHash}: ${s.status}${s.reason ? ` (${s.reason})` : ''}`)}</title>`,
      `<rect x="${x}" y="${y}" width="${w}" height="${h}" rx="6" fill="${fill}" stroke="#555"/>`,
      `<text x="${x + 8}" y="${y + 18}" font-weight="bold">${escapeXml(truncate(s.name, NAME_CHARS))}</text>`,
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
