import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "Dataset",
      "ParquetReader",
      "ZEPHYR_ERROR_CODES",
      "ZephyrContext",
      "ZephyrError",
      "col",
      "evaluate",
      "fnRef",
      "formatPattern",
      "isZephyrError",
      "mayMatch",
      "name",
      "readWikiXml",
      "version",
      "wikitextToText",
    ]
  `)
})
