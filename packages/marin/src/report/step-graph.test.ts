/** The step graph's layout on the shapes experiments have: within its width, boxes apart, dependencies first. */
import { describe, expect, it } from 'vitest'
import { GRAPH_MAX_WIDTH, stepGraphLayout } from './step-graph.js'
import type { ReportStep } from './types.js'

describe('the step graph layout', () => {
  const stepsOf = (deps: number[][]): ReportStep[] =>
    deps.map((d, i) => ({
      name: `step-number-${i}-with-a-long-name`,
      version: 'v',
      nameHash: `step-number-${i}-with-a-long-name_0000000${i % 10}`,
      outputPath: '',
      dependencies: d.map((j) => `step-number-${j}-with-a-long-name_0000000${j % 10}`),
      action: 'run',
      reason: '',
      status: 'SUCCESS',
      logs: [],
    }))
  const shapes: Record<string, number[][]> = {
    chain: Array.from({ length: 20 }, (_, i) => (i ? [i - 1] : [])),
    fan: Array.from({ length: 20 }, (_, i) => (i ? [0] : [])),
    diamonds: Array.from({ length: 20 }, (_, i) =>
      i === 0 ? [] : i % 3 === 0 ? [i - 1, i - 2] : [i - 1 - (i % 3 === 2 ? 1 : 0)],
    ),
    ladder: Array.from({ length: 20 }, (_, i) => (i < 2 ? [] : [i - 2, i - 1])),
  }
  for (const [shape, deps] of Object.entries(shapes))
    for (const n of [1, 2, 5, 8, 13, 20]) {
      it(`${shape} of ${n}: fits ${GRAPH_MAX_WIDTH} px, boxes apart, every dependency drawn above or before`, () => {
        const steps = stepsOf(deps.slice(0, n))
        const g = stepGraphLayout(steps)
        expect(g.width).toBeLessThanOrEqual(GRAPH_MAX_WIDTH)
        const boxes = [...g.boxes.values()]
        expect(boxes).toHaveLength(n)
        for (const b of boxes) expect(b.x + b.w).toBeLessThanOrEqual(g.width)
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++) {
            const [a, b] = [boxes[i]!, boxes[j]!]
            const apart = a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y
            expect(apart, `${i} and ${j} overlap`).toBe(true)
          }
        // Reading order follows the dependencies: a dependency is in an earlier band, or left of it in the same one.
        for (const s of steps)
          for (const d of s.dependencies) {
            const [from, to] = [g.boxes.get(d)!, g.boxes.get(s.nameHash)!]
            expect(from.band < to.band || (from.band === to.band && from.x < to.x)).toBe(true)
          }
      })
    }
})
