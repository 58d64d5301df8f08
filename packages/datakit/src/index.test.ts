import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "BROWN_HELD_OUT_FILES",
      "BYTE_TO_CHAR",
      "BpeTokenizer",
      "DATAKIT_ERROR_CODES",
      "DatakitError",
      "Dataset",
      "FeistelPermutation",
      "GPT2_PATTERN",
      "INGEST_FORMATS",
      "LLAMA3_PATTERN",
      "TokenCache",
      "brownParagraphs",
      "buildTokenCache",
      "cacheArtifact",
      "contentId",
      "datasetArtifact",
      "dedup",
      "fromDatakit",
      "idUnit",
      "ingest",
      "name",
      "normalizeDocument",
      "openDataset",
      "parseDatasetRef",
      "parseTokenizerJson",
      "readBrown",
      "resolveNormalize",
      "runCli",
      "sample",
      "split",
      "trainBpe",
      "untagBrown",
      "version",
    ]
  `)
})
