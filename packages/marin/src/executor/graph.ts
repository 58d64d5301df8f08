/** @module The step DAG: every step an experiment reaches, in dependency order, with cycles named. */
import { MarinError } from '../errors.js'
import { isOutputRef, type Step } from './step.js'
import { isVersioned } from './versioned.js'

/** The steps a config refers to through `output()`, in order of first appearance. */
export function dependenciesOf(config: unknown): Step[] {
  const found: Step[] = []
  const seen = new Set<unknown>()
  const walk = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || seen.has(v)) return
    seen.add(v)
    if (isOutputRef(v)) {
      if (!found.includes(v.step)) found.push(v.step)
      return
    }
    if (isVersioned(v)) return walk(v.value)
    if (Array.isArray(v)) return v.forEach(walk)
    if (isConfigLike(v)) return walk(v.values)
    for (const x of Object.values(v)) walk(x)
  }
  walk(config)
  return found
}

/** A `Config` (from experiment.ts), recognized by its marker so this file needs no import of it. */
export function isConfigLike(v: unknown): v is { values: Record<string, unknown> } {
  return typeof v === 'object' && v !== null && (v as { __marinConfig?: unknown }).__marinConfig === true
}

/**
 * All steps reachable from `roots` (their dependencies included), dependencies first.
 * Throws CYCLE naming the cycle, DUPLICATE_STEP when two different steps share a name.
 */
export function topoSort(roots: readonly Step[]): Step[] {
  const order: Step[] = []
  const state = new Map<Step, 'visiting' | 'done'>()
  const byName = new Map<string, Step>()
  const stack: Step[] = []
  const visit = (s: Step): void => {
    const st = state.get(s)
    if (st === 'done') return
    if (st === 'visiting') {
      const cycle = [...stack.slice(stack.indexOf(s)), s].map((x) => x.name)
      throw new MarinError(
        'CYCLE',
        `steps depend on each other in a cycle: ${cycle.join(' -> ')}; remove one of these output() references`,
      )
    }
    const other = byName.get(s.name)
    if (other && other !== s)
      throw new MarinError('DUPLICATE_STEP', `two different steps are named "${s.name}"; give each step its own name`)
    byName.set(s.name, s)
    state.set(s, 'visiting')
    stack.push(s)
    for (const d of dependenciesOf(s.config)) visit(d)
    stack.pop()
    state.set(s, 'done')
    order.push(s)
  }
  for (const r of roots) visit(r)
  return order
}
