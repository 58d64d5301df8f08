import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import {
  MARIN_LAYOUT,
  experimentRecordPath,
  localMarinPrefix,
  marinPrefix,
  prefixDir,
  prefixPath,
  stepDirName,
} from './prefix.js'

describe('marinPrefix', () => {
  test('option, then $MARIN_PREFIX, then ./.marin; an empty value counts as unset', () => {
    expect(marinPrefix({ env: {} })).toBe(pathToFileURL(resolve('.marin')).href)
    expect(marinPrefix({ env: { MARIN_PREFIX: '' } })).toBe(pathToFileURL(resolve('.marin')).href)
    expect(marinPrefix({ env: { MARIN_PREFIX: '/data/m' } })).toBe('file:///data/m')
    expect(marinPrefix({ prefix: '/opt/x', env: { MARIN_PREFIX: '/data/m' } })).toBe('file:///opt/x')
    expect(marinPrefix({ prefix: '', env: { MARIN_PREFIX: '/data/m' } })).toBe('file:///data/m')
  })

  test(
    'always a storage URL: local paths resolve against cwd, URLs ' + 'keep their scheme and lose trailing slashes',
    () => {
      expect(marinPrefix({ prefix: 'rel/p', cwd: '/work' })).toBe('file:///work/rel/p')
      expect(marinPrefix({ prefix: 's3://bucket/marin/' })).toBe('s3://bucket/marin')
      expect(marinPrefix({ prefix: 'memory://t' })).toBe('memory://t')
      expect(marinPrefix({ prefix: 'file:///data/m/' })).toBe('file:///data/m')
    },
  )

  test('the local folder of a prefix, and a clear error when it has none', () => {
    expect(prefixDir('file:///data/m')).toBe('/data/m')
    expect(prefixDir('/data/m')).toBe('/data/m')
    expect(prefixDir('gs://b/m')).toBeUndefined()
    expect(localMarinPrefix({ env: { MARIN_PREFIX: '/data/m' } })).toBe('/data/m')
    expect(() => localMarinPrefix({ env: { MARIN_PREFIX: 'gs://b/m' } })).toThrow(
      /MARIN_PREFIX is gs:\/\/b\/m, not a local folder/,
    )
    expect(() => localMarinPrefix({ prefix: 's3://b' })).toThrow(/--prefix is s3:\/\/b, not a local folder/)
  })
})

describe('layout', () => {
  test('names every location under the prefix, as a URL or a path like the prefix', () => {
    expect(prefixPath('file:///data/m', MARIN_LAYOUT.store)).toBe('file:///data/m/store')
    expect(prefixPath('s3://b/m/', MARIN_LAYOUT.irisState)).toBe('s3://b/m/iris/iris.sqlite')
    expect(prefixPath('/data/m', MARIN_LAYOUT.irisToken)).toBe(join('/data/m', 'iris', 'token'))
    expect(prefixPath('/data/m', MARIN_LAYOUT.irisWork)).toBe('/data/m/iris/work')
    expect(experimentRecordPath('quickstart', 'run-1')).toBe('experiments/quickstart/run-1.json')
    expect(stepDirName('tokenize', 'abcdef12')).toBe('tokenize_abcdef12')
  })
})
