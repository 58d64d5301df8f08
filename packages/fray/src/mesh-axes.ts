/**
 * @module Named mesh axes: `{ data: -1, model: 2 }` over 8 members is a 4×2 grid.
 * Ranks are laid out row-major (the last axis varies fastest), as in a JAX device mesh.
 */
import { FrayError } from './errors.js'

/** Axis sizes by name; `-1` (at most once) means "whatever is left". @example { data: -1, model: 2 } */
export type MeshAxesInput = Readonly<Record<string, number>>
/** Resolved axes, in declaration order. */
export type MeshAxes = ReadonlyArray<readonly [name: string, size: number]>

/** Resolves `-1` and checks that the axes multiply to `members`. */
export function resolveAxes(input: MeshAxesInput, members: number): MeshAxes {
  const entries = Object.entries(input)
  if (entries.length === 0) throw new FrayError('INVALID_MESH', 'mesh axes: give at least one axis, e.g. { data: -1 }')
  if (entries.length > 15)
    throw new FrayError('INVALID_MESH', `mesh axes: ${entries.length} axes given; at most 15 are supported`)
  let rest: string | null = null
  let fixed = 1
  for (const [name, size] of entries) {
    if (!/^[A-Za-z_][\w]*$/.test(name))
      throw new FrayError('INVALID_MESH', `mesh axis "${name}": names are identifiers such as data or model`)
    if (size === -1) {
      if (rest !== null)
        throw new FrayError(
          'INVALID_MESH',
          `mesh axes "${rest}" and "${name}" are both -1; at most one axis may take the rest`,
        )
      rest = name
    } else if (!Number.isInteger(size) || size < 1) {
      throw new FrayError('INVALID_MESH', `mesh axis "${name}": size ${size} must be a positive integer or -1`)
    } else fixed *= size
  }
  if (members % fixed !== 0 || (rest === null && fixed !== members)) {
    throw new FrayError(
      'INVALID_MESH',
      `mesh axes ${JSON.stringify(input)} do not fit ${members} ` +
        `members; the sizes must multiply to ${members} (use -1 for one axis)`,
    )
  }
  return entries.map(([name, size]) => [name, size === -1 ? members / fixed : size] as const)
}

/** Coordinates of `rank` on each axis. */
export function coordsOf(axes: MeshAxes, rank: number): number[] {
  const out = new Array<number>(axes.length)
  let r = rank
  for (let i = axes.length - 1; i >= 0; i--) {
    const size = axes[i]![1]
    out[i] = r % size
    r = Math.floor(r / size)
  }
  return out
}

/**
 * Coordinates of `rank` by axis name on a mesh of fixed sizes (row-major in the order `shape`
 * names its axes: the last varies fastest). The one rank → coordinates map of the repository:
 * fray's `Mesh.coords` and levanter's layouts both read it.
 * @example coordsByName({ data: 2, model: 3 }, 4) // { data: 1, model: 1 }
 */
export function coordsByName(shape: Readonly<Record<string, number>>, rank: number): Record<string, number> {
  const axes = Object.entries(shape)
  const size = axes.reduce((p, [, s]) => p * s, 1)
  if (!Number.isInteger(rank) || rank < 0 || rank >= size)
    throw new FrayError(
      'INVALID_MESH',
      `mesh ${JSON.stringify(shape)}: rank ${rank} is not a member; ranks are 0 to ${size - 1}`,
    )
  const c = coordsOf(axes, rank)
  return Object.fromEntries(axes.map(([n], i) => [n, c[i]!]))
}

/**
 * The members that share `rank`'s coordinates on every axis not in `over`: the group a
 * collective over those axes runs in. Returns global ranks ascending and a wire id.
 */
export function subgroup(axes: MeshAxes, rank: number, over: readonly string[]): { ranks: number[]; id: number } {
  let mask = 0
  for (const name of over) {
    const i = axes.findIndex(([n]) => n === name)
    if (i < 0) throw new FrayError('INVALID_MESH', `axis "${name}" not in [${axes.map(([n]) => n).join(', ')}]`)
    mask |= 1 << i
  }
  const size = axes.reduce((p, [, s]) => p * s, 1)
  const mine = coordsOf(axes, rank)
  const ranks: number[] = []
  for (let r = 0; r < size; r++) {
    const c = coordsOf(axes, r)
    if (c.every((v, i) => mask & (1 << i) || v === mine[i])) ranks.push(r)
  }
  return { ranks, id: mask * 65536 + ranks[0]! }
}
