import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "BLOOM_FORMAT_VERSION",
      "BLOOM_MAGIC",
      "BLOOM_MAX_BITS",
      "BloomFilter",
      "DUPEKIT_ERROR_CODES",
      "DupekitError",
      "LshIndex",
      "MINHASH_DEFAULTS",
      "MinHashPool",
      "MinHasher",
      "UnionFind",
      "bloomFromBytes",
      "bloomSize",
      "bloomToBytes",
      "estimateJaccard",
      "exactKey",
      "exactKeys",
      "findDuplicateClusters",
      "hashHex",
      "isDupekitError",
      "loadBloom",
      "lshProbability",
      "lshThreshold",
      "minhashSignature",
      "name",
      "normalizeText",
      "resolveMinHashParams",
      "saveBloom",
      "version",
      "xxh128",
      "xxh128Batch",
      "xxh3",
      "xxh3Batch",
      "xxh64",
      "xxh64Batch",
    ]
  `)
})
