import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "ArtifactView",
      "BlobCache",
      "BlobStore",
      "Catalog",
      "ConflictError",
      "FINESTORE_ERROR_CODES",
      "FileEntry",
      "FinestoreError",
      "GC_DEFAULTS",
      "IntegrityError",
      "LATEST",
      "LineageEntry",
      "Manifest",
      "SchemaRegistry",
      "Store",
      "Transaction",
      "checkArtifactName",
      "checkFilePath",
      "checkHash",
      "checkTagName",
      "collectGarbage",
      "defaultKind",
      "formatBytes",
      "formatRef",
      "formatTable",
      "isFinestoreError",
      "name",
      "openStore",
      "parseManifest",
      "parseRef",
      "serializeManifest",
      "storeUrl",
      "version",
    ]
  `)
})
