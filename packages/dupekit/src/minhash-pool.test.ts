import { afterAll, expect, test } from 'vitest'
import { makeCorpus } from '../bench/corpus.js'
import { MinHasher } from './minhash.js'
import { MinHashPool } from './minhash-pool.js'

const pools: MinHashPool[] = []
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()))
})

test('worker threads give exactly the single-thread signatures, in order', async () => {
  const texts = makeCorpus(700, 21)
  const pool = new MinHashPool({ threads: 2, batchSize: 64, shingle: 'word' })
  pools.push(pool)
  const [a, b] = await Promise.all([pool.signatures(texts), pool.signatures(texts.slice(0, 100))])
  const want = new MinHasher({ shingle: 'word' }).signatures(texts)
  expect(a).toEqual(want)
  expect(b).toEqual(want.subarray(0, 100 * 286))
  // The pool is reusable.
  expect(await pool.signatures(['x y z'])).toEqual(new MinHasher({ shingle: 'word' }).signature('x y z'))
  expect(await pool.signatures([])).toHaveLength(0)
})

test('a closed pool refuses work', async () => {
  const pool = new MinHashPool({ threads: 1 })
  await pool.signatures(['warm up'])
  await pool.close()
  await expect(pool.signatures(['a'])).rejects.toMatchObject({ code: 'POOL_FAILED' })
  expect(() => new MinHashPool({ threads: 0 })).toThrow(/threads must be a positive integer, got 0/)
})

test('a batch that fails in a worker rejects with POOL_FAILED; the pool keeps working', async () => {
  const pool = new MinHashPool({ threads: 1 })
  pools.push(pool)
  await expect(pool.signatures([42 as unknown as string])).rejects.toMatchObject({ code: 'POOL_FAILED' })
  await expect(pool.signatures([42 as unknown as string])).rejects.toThrow(/MinHashPool worker failed on a batch/)
  expect(await pool.signatures(['still fine'])).toEqual(new MinHasher().signature('still fine'))
})
