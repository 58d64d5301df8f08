import { createHash } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { Dataset } from './dataset.js'
import type { Doc } from './fixtures/user-fns.js'
import type { countWith, lengthKey, tag } from './fixtures/user-fns.js'
import { fnRef } from './user-fn.js'

const ctx = new ZephyrContext({ inProcess: true, progress: 'off' })
const docs: Doc[] = Array.from({ length: 30 }, (_, i) => ({ id: i, text: 'x'.repeat(i) }))
const fns = new URL('./fixtures/user-fns.ts', import.meta.url)

describe('functions with context: bound args and module references', () => {
  test('args are passed as the last argument of map, filter, flatMap, mapShard and the groupBy reducer', async () => {
    const cfg = { factor: 3, min: 20, copies: 2, label: 'n' }
    const ds = Dataset.fromList(docs, { numShards: 3 })
      .map((d, a) => ({ ...d, score: d.id * a.factor }), { args: cfg })
      .filter((d, a) => d.score >= a.min, { args: cfg })
      .flatMap((d, a) => Array.from({ length: a.copies }, () => d), { args: cfg })
      .mapShard(
        async function* (rs, shard, a) {
          for await (const r of rs) yield { ...r, shard: shard.shard, label: a.label }
        },
        { args: cfg },
      )
      .groupBy(
        'label',
        (label: string, rs: unknown[], a: { copies: number }) => ({ label, docs: rs.length / a.copies }),
        { numShards: 1, args: cfg },
      )
    const { results } = await ctx.execute(ds)
    expect(results).toEqual([{ label: 'n', docs: docs.filter((d) => d.id * 3 >= 20).length }])
  })

  test('args are a snapshot taken when the plan is built', async () => {
    const cfg = { add: 1 }
    const ds = Dataset.fromList([1, 2]).map((x, a) => x + a.add, { args: cfg })
    cfg.add = 100
    expect((await ctx.execute(ds)).results).toEqual([2, 3])
  })

  test('a module reference runs the exported function, which may use its imports', async () => {
    const ds = Dataset.fromList(docs.slice(0, 6))
      .map(fnRef<typeof tag>(fns, 'tag'), { args: { salt: 's' } })
      .groupBy(fnRef<typeof lengthKey>(fns, 'lengthKey'), fnRef<typeof countWith>(fns, 'countWith'), {
        numShards: 1,
        args: { label: 'by length' },
      })
    const { results } = await ctx.execute(ds)
    expect(results.map((r) => r.n).sort()).toEqual([2, 2, 2])
    expect(results.every((r) => r.label === 'by length' && /^[nj]/.test(r.key))).toBe(true)
    const tagged = await ctx.execute(
      Dataset.fromList(docs.slice(0, 1)).map(fnRef<typeof tag>(fns.href, 'tag'), { args: { salt: 's' } }),
    )
    expect(tagged.results[0]!.digest).toBe(createHash('sha256').update('s').digest('hex').slice(0, 8))
  })

  test('bad references and args are INVALID_PLAN errors that say what to pass', async () => {
    expect(() => fnRef('./relative.js', 'f')).toThrow(
      /must be a file: URL or an absolute path \(pass import.meta.url\)/,
    )
    expect(() => fnRef(fns, 'not a name')).toThrow(/is not an identifier/)
    expect(() => Dataset.fromList([1]).map((x, _a) => x, { args: { f: () => 1 } })).toThrow(
      /map: args cannot be sent to a worker/,
    )
    expect(() => Dataset.fromList([1]).map({ module: 1 } as never)).toThrow(
      /map needs a function or a module reference/,
    )
    await expect(ctx.execute(Dataset.fromList([1]).map(fnRef(fns, 'missing')))).rejects.toMatchObject({
      code: 'INVALID_PLAN',
      message: expect.stringMatching(
        /stage 0 map: .*user-fns.ts has no exported function "missing" \(its functions: .*countWith.*tag/,
      ),
    })
    await expect(ctx.execute(Dataset.fromList([1]).map(fnRef(fns, 'notAFunction')))).rejects.toMatchObject({
      code: 'INVALID_PLAN',
    })
    await expect(
      ctx.execute(Dataset.fromList([1]).map(fnRef(new URL('./fixtures/none.ts', import.meta.url), 'f'))),
    ).rejects.toMatchObject({
      code: 'INVALID_PLAN',
      message: expect.stringMatching(/cannot import .*none.ts/),
    })
  })

  test('a context is either in process or on a client', () => {
    expect(() => new ZephyrContext({ inProcess: true, client: { createActorGroup() {} } as never })).toThrow(
      /pass one or the other/,
    )
  })
})
