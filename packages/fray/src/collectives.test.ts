import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { actorClass } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import { testData as makeTestData } from './fixtures/data.js'
import type { Reducer } from './fixtures/reducer.js'
import type { Client } from './client.js'
import { openClient, type Opened } from './fixtures/backends.js'
import { LocalClient } from './local-client.js'
import { Mesh } from './mesh.js'

const ReducerClass = actorClass<typeof Reducer>(new URL('./fixtures/reducer.ts', import.meta.url), 'Reducer')
const seed = (i: number) => 1000 + i
// The same members' data recurs across tests (and 1e7 floats take a while to generate): made once.
const made = new Map<string, Float32Array>()
function testData(s: number, n: number, kind: 'ints' | 'random'): Float32Array {
  const key = `${s}/${n}/${kind}`
  let x = made.get(key)
  if (!x) made.set(key, (x = makeTestData(s, n, kind)))
  return x
}
const digest = (x: Float32Array) =>
  createHash('sha256')
    .update(new Uint8Array(x.buffer, x.byteOffset, x.byteLength))
    .digest('hex')

/** The float32 sum in rank order: what the all-reduce promises to equal bit for bit. */
function f32RankOrderSum(parts: Float32Array[]): Float32Array {
  const acc = parts[0]!.slice()
  for (const p of parts.slice(1)) for (let i = 0; i < acc.length; i++) acc[i]! += p[i]!
  return acc
}

/** Float64 sums and sums of magnitudes, element by element (tight loops: these run on 1e7 floats). */
function f64Sums(parts: Float32Array[]): { exact: Float64Array; scale: Float64Array } {
  const n = parts[0]!.length
  const exact = new Float64Array(n)
  const scale = new Float64Array(n)
  for (const p of parts) {
    for (let i = 0; i < n; i++) {
      exact[i]! += p[i]!
      scale[i]! += Math.abs(p[i]!)
    }
  }
  return { exact, scale }
}

/** Shard `s` of `length` elements over `n` members: the first `length mod n` shards get one element more. */
function shardOf(length: number, n: number, s: number): [number, number] {
  const base = Math.floor(length / n)
  const lo = s * base + Math.min(s, length % n)
  return [lo, lo + base + (s < length % n ? 1 : 0)]
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** Polls until `cond` holds (the driver learns of a death asynchronously). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10))
}

const MODES = [
  { mode: 'process' as const, sizes: [1e3, 1e5 + 3, 1e6, 1e7] },
  { mode: 'inline' as const, sizes: [3, 1e3, 1e5 + 3] },
  { mode: 'iris' as const, sizes: [1e3, 1e6] },
]

describe.each(MODES)('collectives, $mode mode', ({ mode, sizes }) => {
  let opened: Opened
  let client: Client
  const groups = new Map<number, ActorGroup<Reducer>>()
  beforeAll(async () => {
    opened = await openClient(mode)
    client = opened.client
    for (const n of [2, 4]) {
      // One restart allowed: the last test kills a member to see it rejoin.
      const g = await client.createActorGroup(ReducerClass, n, (i) => [seed(i)], { maxRestarts: 1 })
      await Mesh.create(g, { data: -1 })
      groups.set(n, g)
    }
  }, 60_000)
  afterAll(() => opened.close())

  // Integer data is checked up to 1e6 floats, random data up to 1e7 (the suite must stay fast on 2 cores).
  const cases = [2, 4].flatMap((members) =>
    sizes.flatMap((size) =>
      (['ints', 'random'] as const)
        .filter((kind) => kind === 'random' || size < 1e7)
        .map((kind) => ({ members, size, kind })),
    ),
  )
  test.each(cases)('allReduce sum of $size $kind floats over $members members', async ({ members, size, kind }) => {
    const results = await groups.get(members)!.broadcast.allReduce(size, kind, 'sum')
    const parts = Array.from({ length: members }, (_, i) => testData(seed(i), size, kind))
    const ours = results[0]!.full!
    expect(ours.length).toBe(size)
    // Identical on every member, bit for bit.
    expect(new Set(results.map((r) => r.digest)).size).toBe(1)
    // Equal to the sequential float32 sum in rank order, bit for bit.
    expect(results[0]!.digest).toBe(digest(f32RankOrderSum(parts)))
    const { exact, scale } = f64Sums(parts)
    let wrong = 0
    let worst = 0
    for (let i = 0; i < size; i++) {
      if (ours[i] !== exact[i]) wrong++
      worst = Math.max(worst, Math.abs(ours[i]! - exact[i]!) / Math.max(scale[i]!, 1e-30))
    }
    // Integers this small add exactly in float32; random data is within 1e-6 of the float64 sum,
    // relative to the sum of magnitudes (the bound float32 summation can promise).
    if (kind === 'ints') expect(wrong).toBe(0)
    else expect(worst).toBeLessThanOrEqual(1e-6)
  })

  test('in place gives the same bits as out of place', async () => {
    const g = groups.get(4)!
    const plain = await g.broadcast.allReduce(100_003, 'random', 'sum')
    const inPlace = await g.broadcast.allReduceInPlace(100_003, 'random', 'sum')
    expect(inPlace).toEqual(plain.map((r) => r.digest))
    const mean = await g.broadcast.allReduce(1000, 'random', 'mean')
    expect(await g.broadcast.allReduceInPlace(1000, 'random', 'mean')).toEqual(mean.map((r) => r.digest))
  })

  test('mean and max', async () => {
    const g = groups.get(4)!
    const parts = Array.from({ length: 4 }, (_, i) => testData(seed(i), 1000, 'ints'))
    const [mean] = await g.broadcast.allReduce(1000, 'ints', 'mean')
    const [max] = await g.broadcast.allReduce(1000, 'ints', 'max')
    for (let i = 0; i < 1000; i++) {
      expect(mean!.full![i]).toBe(Math.fround(parts.reduce((s, p) => s + p[i]!, 0) / 4))
      expect(max!.full![i]).toBe(Math.max(...parts.map((p) => p[i]!)))
    }
  })

  test.each([
    { members: 4, size: 100_003, op: 'sum' as const },
    { members: 4, size: 3, op: 'sum' as const },
    { members: 2, size: 1001, op: 'mean' as const },
  ])(
    'reduceScatter of $size floats ($op) over $members members, then allGather, equals allReduce bit for bit',
    async ({ members, size, op }) => {
      const res = await groups.get(members)!.broadcast.scatterGather(size, 'random', op)
      const parts = Array.from({ length: members }, (_, i) => testData(seed(i), size, 'random'))
      const sum = f32RankOrderSum(parts)
      const reduced = op === 'sum' ? sum : sum.map((x) => Math.fround(x / members))
      res.forEach((r, i) => {
        // Each member's shard: its slice of the reduced array, the first size mod n shards one longer.
        const [lo, hi] = shardOf(size, members, i)
        expect(r.shard.length).toBe(hi - lo)
        expect(digest(r.shard)).toBe(digest(reduced.subarray(lo, hi)))
      })
      // Gathered: identical on every member, and the all-reduce's bits.
      expect(new Set(res.map((r) => r.gathered)).size).toBe(1)
      expect(res[0]!.gathered).toBe(res[0]!.reduced)
      expect(new Set(res.map((r) => r.reduced))).toEqual(new Set([digest(reduced)]))
    },
  )

  test('two collectives in flight at once do not mix', async () => {
    expect(await groups.get(4)!.broadcast.twoAtOnce(300_000)).toEqual([
      [4, 8],
      [4, 8],
      [4, 8],
      [4, 8],
    ])
  })

  test('broadcast gives every member the root bytes', async () => {
    const g = groups.get(4)!
    const got = await g.broadcast.broadcast(250_001, 2)
    expect(got).toEqual(Array(4).fill(digest(testData(seed(2), 250_001, 'random'))))
  })

  test('barrier: nobody leaves before the last one arrives', async () => {
    const g = groups.get(4)!
    const times = await Promise.all(g.members.map((m, i) => m.barrier(i * 60)))
    const lastArrival = Math.max(...times.map((t) => t.arrived))
    for (const t of times) expect(t.left).toBeGreaterThanOrEqual(lastArrival)
    // The staggered sleeps (0 to 180 ms) really staggered the arrivals (by how much depends on the machine's load).
    expect(lastArrival).toBeGreaterThan(Math.min(...times.map((t) => t.arrived)))
  })

  // Last: it uses up the pair's restart.
  test(
    'a member dying mid-collective fails the others with ' + 'COLLECTIVE_PEER_LOST; restarted, it rejoins the mesh',
    async () => {
      const g = groups.get(2)!
      const waiting = g.member(0).reduceGiven(new Float32Array(100), 'sum')
      g.member(1).$actor.kill('SIGKILL')
      await expect(waiting).rejects.toMatchObject({
        code: 'COLLECTIVE_PEER_LOST',
        message: expect.stringMatching(/member 1/),
      })
      await until(() => g.member(1).$actor.restarts() === 1)
      // Calls made while it restarts wait for it and for the new links, on both members.
      const res = await g.broadcast.allReduce(1000, 'ints', 'sum')
      expect(res.map((r) => r.digest)).toEqual(
        Array(2).fill(digest(f32RankOrderSum([testData(seed(0), 1000, 'ints'), testData(seed(1), 1000, 'ints')]))),
      )
      expect(await g.member(1).coords()).toEqual({ data: 1 })
      // No restart left: it stays gone, and the survivor's collectives say so.
      g.member(1).$actor.kill('SIGKILL')
      await expect(g.member(0).reduceGiven(new Float32Array(100), 'sum')).rejects.toMatchObject({
        code: 'COLLECTIVE_PEER_LOST',
        message: expect.stringMatching(/member 1 disconnected/),
      })
    },
  )
})

type Call = Parameters<Reducer['collective']>[0]
const sum10: Call = { name: 'allReduce', op: 'sum', n: 10 }
const scatter10: Call = { name: 'reduceScatter', op: 'sum', n: 10 }

describe('mesh axes and failures', () => {
  let client: LocalClient
  /** Two members in a mesh of their own (`pairMesh`); the last test kills one. */
  let pair: ActorGroup<Reducer>
  let pairMesh: Mesh<Reducer>
  /** Four members, for the 2×2 meshes: each test makes its mesh over them and closes it. */
  let four: ActorGroup<Reducer>
  beforeAll(async () => {
    client = new LocalClient()
    ;[pair, four] = await Promise.all([
      client.createActorGroup(ReducerClass, 2, (i) => [seed(i)]),
      client.createActorGroup(ReducerClass, 4, (i) => [seed(i)]),
    ])
    pairMesh = await Mesh.create(pair)
  }, 60_000)
  afterAll(() => client.shutdown())

  test('collectives over one axis of a 2×2 mesh stay within their sub-groups', async () => {
    const g = four
    const mesh = await Mesh.create(g, { data: -1, model: 2 })
    expect(mesh.shape()).toEqual({ data: 2, model: 2 })
    expect(await g.broadcast.coords()).toEqual([
      { data: 0, model: 0 },
      { data: 0, model: 1 },
      { data: 1, model: 0 },
      { data: 1, model: 1 },
    ])
    const parts = Array.from({ length: 4 }, (_, i) => testData(seed(i), 5000, 'ints'))
    const res = await g.broadcast.allReduce(5000, 'ints', 'sum', 'data')
    // Over `data`: ranks {0, 2} (model 0) and {1, 3} (model 1).
    expect(res[0]!.digest).toBe(digest(f32RankOrderSum([parts[0]!, parts[2]!])))
    expect(res[1]!.digest).toBe(digest(f32RankOrderSum([parts[1]!, parts[3]!])))
    expect(res[0]!.full![0]).toBe(parts[0]![0]! + parts[2]![0]!)
    expect(res[2]!.digest).toBe(res[0]!.digest)
    expect(res[3]!.digest).toBe(res[1]!.digest)
    // Broadcast over `model` from position 0: ranks 0→1 and 2→3.
    const b = await g.broadcast.broadcast(1000, 0, 'model')
    const d0 = digest(testData(seed(0), 1000, 'random'))
    const d2 = digest(testData(seed(2), 1000, 'random'))
    expect(b).toEqual([d0, d0, d2, d2])
    await mesh.close()
    await expect(g.member(0).coords()).rejects.toMatchObject({ code: 'NOT_IN_MESH' })
  })

  test('reduceScatter and allGather over one axis of a 2×2 mesh stay within their sub-groups', async () => {
    // The same four members in a new mesh (the last one closed).
    const g = four
    const mesh = await Mesh.create(g, { data: -1, model: 2 })
    const parts = Array.from({ length: 4 }, (_, i) => testData(seed(i), 5001, 'ints'))
    // Over `data`: ranks {0, 2} (model 0) and {1, 3} (model 1); the data coordinate picks the shard.
    const res = await g.broadcast.scatterGather(5001, 'ints', 'sum', 'data')
    const sums = [f32RankOrderSum([parts[0]!, parts[2]!]), f32RankOrderSum([parts[1]!, parts[3]!])]
    for (const [rank, sum, pos] of [
      [0, 0, 0],
      [1, 1, 0],
      [2, 0, 1],
      [3, 1, 1],
    ] as const) {
      const [lo, hi] = shardOf(5001, 2, pos)
      expect(digest(res[rank]!.shard)).toBe(digest(sums[sum]!.subarray(lo, hi)))
      expect(res[rank]!.gathered).toBe(digest(sums[sum]!))
      expect(res[rank]!.reduced).toBe(digest(sums[sum]!))
    }
    // Gather over `model` with a length per member: ranks 0+1 and 2+3, in rank order.
    const lengths = [3, 5, 0, 7]
    const got = await Promise.all(g.members.map((m, r) => m.allGather(lengths[r]!, 'model')))
    const piece = (r: number) => testData(seed(r), lengths[r]!, 'random')
    const d01 = digest(concat([piece(0), piece(1)]))
    const d23 = digest(concat([piece(2), piece(3)]))
    expect(got).toEqual([
      { digest: d01, length: 8 },
      { digest: d01, length: 8 },
      { digest: d23, length: 7 },
      { digest: d23, length: 7 },
    ])
    await mesh.close()
  })

  test('allGather concatenates shards of different lengths, empty ones included, in rank order', async () => {
    for (const lengths of [
      [0, 4],
      [1000, 1],
      [0, 0],
      [300_001, 2_000_000],
    ]) {
      const got = await Promise.all(pair.members.map((m, r) => m.allGather(lengths[r]!)))
      const want = digest(concat(lengths.map((n, r) => testData(seed(r), n, 'random'))))
      expect(got).toEqual(Array(2).fill({ digest: want, length: lengths[0]! + lengths[1]! }))
    }
  })

  test.each([
    {
      what: 'allReduce against broadcast',
      calls: [sum10, { name: 'broadcast', root: 0, n: 10 }],
      says: 'member 0 called allReduce(op sum, 40 bytes), member 1 called broadcast(root 0, 40 bytes)',
    },
    {
      what: 'different ops',
      calls: [sum10, { name: 'allReduce', op: 'max', n: 10 }],
      says: 'member 0 called allReduce(op sum, 40 bytes), member 1 called allReduce(op max, 40 bytes)',
    },
    {
      what: 'different lengths',
      calls: [sum10, { name: 'allReduce', op: 'sum', n: 12 }],
      says: 'member 0 called allReduce(op sum, 40 bytes), member 1 called allReduce(op sum, 48 bytes)',
    },
    {
      what: 'barrier against allReduce',
      calls: [{ name: 'barrier' }, sum10],
      says: 'member 0 called barrier(), member 1 called allReduce(op sum, 40 bytes)',
    },
    {
      what: 'different broadcast roots',
      calls: [
        { name: 'broadcast', root: 0, n: 10 },
        { name: 'broadcast', root: 1, n: 10 },
      ],
      says: 'member 0 called broadcast(root 0, 40 bytes), member 1 called broadcast(root 1, 40 bytes)',
    },
    {
      what: 'reduceScatter with different ops',
      calls: [scatter10, { name: 'reduceScatter', op: 'mean', n: 10 }],
      says: 'member 0 called reduceScatter(op sum, 40 bytes), member 1 called reduceScatter(op mean, 40 bytes)',
    },
    {
      what: 'reduceScatter with different lengths',
      calls: [scatter10, { name: 'reduceScatter', op: 'sum', n: 11 }],
      says: 'member 0 called reduceScatter(op sum, 40 bytes), member 1 called reduceScatter(op sum, 44 bytes)',
    },
    {
      what: 'reduceScatter against allReduce',
      calls: [scatter10, sum10],
      says: 'member 0 called reduceScatter(op sum, 40 bytes), member 1 called allReduce(op sum, 40 bytes)',
    },
    {
      what: 'allGather against reduceScatter',
      calls: [{ name: 'allGather', n: 5 }, scatter10],
      says: 'member 0 called allGather(20 bytes), member 1 called reduceScatter(op sum, 40 bytes)',
    },
  ] as { what: string; calls: Call[]; says: string }[])(
    'mismatched calls ($what) fail on every member, naming the calls',
    async ({ calls, says }) => {
      const r = await Promise.allSettled(calls.map((c, i) => pair.member(i).collective(c)))
      for (const x of r) {
        expect(x).toMatchObject({ status: 'rejected', reason: { code: 'COLLECTIVE_MISMATCH' } })
        const message = ((x as PromiseRejectedResult).reason as Error).message
        expect(message).toMatch(/collective #\d+ over members \[0, 1\] does not match/)
        expect(message).toContain(says)
      }
      // Both members counted the failed collective: the next one lines up again.
      const after = await pair.broadcast.allReduce(1000, 'ints', 'sum')
      expect(after[0]!.digest).toBe(
        digest(f32RankOrderSum([testData(seed(0), 1000, 'ints'), testData(seed(1), 1000, 'ints')])),
      )
    },
  )

  test('axes that do not fit the group are refused', async () => {
    await expect(Mesh.create(pair, { data: 3 })).rejects.toThrow(/do not fit 2 members/)
  })

  // Last: it kills a member of the pair (no restarts).
  test('a member dying fails reduceScatter and allGather on the others with COLLECTIVE_PEER_LOST', async () => {
    const [g, mesh] = [pair, pairMesh]
    const waiting = g.member(0).scatterGiven(new Float32Array(100), 'sum')
    g.member(1).$actor.kill('SIGKILL')
    await expect(waiting).rejects.toMatchObject({
      code: 'COLLECTIVE_PEER_LOST',
      message: expect.stringMatching(/member 1/),
    })
    await expect(g.member(0).gatherGiven(new Float32Array(100))).rejects.toMatchObject({
      code: 'COLLECTIVE_PEER_LOST',
      message: expect.stringMatching(/member 1 disconnected/),
    })
    // The survivor is still up: the failed collectives left no unhandled rejection behind.
    expect(await g.member(0).coords()).toEqual({ data: 0 })
    await mesh.close()
  })
})
