import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '@marin/finestore'
import { openStorage } from '@marin/rigging'
import { afterAll, describe, expect, test } from 'vitest'
import { DatakitError } from '../errors.js'
import { defaultContext } from '../zephyr-context.js'
import { Dataset } from './from-datakit.js'
import { ingest } from './ingest.js'
import { openDataset } from './open-dataset.js'
import { contentId } from './record.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-ingest-'))
const prefix = join(root, 'marin')
afterAll(() => rmSync(root, { recursive: true, force: true }))

function file(name: string, data: string | Uint8Array): string {
  const p = join(root, 'src', name)
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(p, data)
  return p
}

async function texts(name: string, version?: number): Promise<string[]> {
  const { results } = await defaultContext().execute(
    Dataset.fromDatakit(name, { prefix, ...(version ? { version } : {}) }).map((r) => r.text),
  )
  return results
}

describe('sources and formats', () => {
  test('plain text by line and by file, with normalization', async () => {
    const p = file('lines.txt', 'first line  \n\n  second line\ncafe\u0301\n')
    expect((await ingest({ name: 'lines', source: p, format: 'text', textUnit: 'line', prefix })).records).toBe(3)
    expect(await texts('lines')).toEqual(['first line', 'second line', 'caf\u00e9'])
    const whole = await ingest({ name: 'whole', source: p, format: 'text', prefix })
    expect(whole.records).toBe(1)
  })

  test('MediaWiki XML pages keep title and page id in meta', async () => {
    const xml =
      `<mediawiki><page><title>Cat</title><ns>0</ns><id>7</id><revision><text>The ` +
      `'''cat''' is a [[mammal|small ` +
      `mammal]].</text></revision></page></mediawiki>`
    await ingest({ name: 'wiki', source: file('dump.xml', xml), format: 'wiki-xml', prefix })
    const v = await openDataset('wiki', { prefix })
    const { results } = await defaultContext().execute(Dataset.fromDatakit('wiki', { prefix }))
    expect(results[0]!.text).toContain('small mammal')
    expect(JSON.parse(results[0]!.meta)).toEqual({ title: 'Cat', pageId: 7 })
    expect(results[0]!.id).toBe(contentId(results[0]!.text))
    expect(v.metadata).toMatchObject({ records: 1, format: 'wiki-xml', shards: 1 })
  })

  test('Parquet written by datakit ingests again, with other columns in meta', async () => {
    const v = await openDataset('lines', { prefix })
    await ingest({ name: 'from-parquet', source: v.shards[0]!, format: 'parquet', prefix })
    const again = await openDataset('from-parquet', { prefix })
    expect(again.metadata.datasetHash).toBe(v.metadata.datasetHash)
  })

  test('any rigging storage URL is a source (memory://)', async () => {
    const s = await openStorage('memory://datakit-test')
    await s.write('in/a.jsonl', '{"text":"from memory"}\n')
    await s.write('in/b.jsonl', '{"text":"also from memory"}\n')
    const r = await ingest({ name: 'mem', source: 'memory://datakit-test/in/*.jsonl', format: 'jsonl', prefix })
    expect(r.records).toBe(2)
    expect(await texts('mem')).toEqual(['from memory', 'also from memory'])
  })
})

describe('bad input', () => {
  test('invalid UTF-8 is replaced and counted, or refused by policy', async () => {
    const bad = new Uint8Array([
      ...Buffer.from('{"text":"ok \u00ef\u00bf\u00bd? '),
      0xff,
      0xfe,
      ...Buffer.from(' end"}\n'),
    ])
    const p = file('bad.jsonl', bad)
    const r = await ingest({ name: 'bad', source: p, format: 'jsonl', prefix })
    expect(r.invalidUtf8).toBe(2)
    expect((await openDataset('bad', { prefix })).metadata.invalidUtf8).toBe(2)
    const err = await ingest({ name: 'bad2', source: p, format: 'jsonl', invalidUtf8: 'refuse', prefix }).catch(
      (e: unknown) => e,
    )
    expect(err).toMatchObject({
      code: 'INVALID_UTF8',
      message: expect.stringContaining('bad.jsonl holds 2 invalid UTF-8'),
    })
  })

  test('an empty source is a clear error', async () => {
    const e1 = await ingest({ name: 'empty', source: file('empty.jsonl', ''), format: 'jsonl', prefix }).catch(
      (e: unknown) => e,
    )
    expect(e1).toMatchObject({ code: 'SOURCE_EMPTY', message: expect.stringContaining('every source file is empty') })
    const e2 = await ingest({
      name: 'empty',
      source: file('blank.txt', '\n\n  \n'),
      format: 'text',
      textUnit: 'line',
      prefix,
    }).catch((e: unknown) => e)
    expect(e2).toMatchObject({ code: 'SOURCE_EMPTY', message: expect.stringContaining('no documents left') })
    const e3 = await ingest({ name: 'empty', source: join(root, 'nothing-*.jsonl'), format: 'jsonl', prefix }).catch(
      (e: unknown) => e,
    )
    expect(e3).toMatchObject({ code: 'SOURCE_NOT_FOUND' })
    const e4 = await ingest({ name: 'empty', source: [], format: 'jsonl', prefix }).catch((e: unknown) => e)
    expect(e4).toMatchObject({ code: 'SOURCE_EMPTY' })
  })

  test(
    'a record without the text field is INVALID_ARGUMENT naming the ' + 'file and field (raised on a worker)',
    async () => {
      const p = file('notext.jsonl', '{"body":"no text here"}\n')
      await expect(ingest({ name: 'notext', source: p, format: 'jsonl', prefix })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/ingest notext: .*notext.jsonl has no string field "text"; set textField/),
      })
      expect((await ingest({ name: 'notext', source: p, format: 'jsonl', textField: 'body', prefix })).records).toBe(1)
    },
  )

  test("the exported Dataset is zephyr's, with fromDatakit added", async () => {
    const { results } = await defaultContext().execute(Dataset.fromList([1, 2, 3], { numShards: 2 }).map((x) => x * 2))
    expect(results.sort()).toEqual([2, 4, 6])
    expect(typeof Dataset.fromDatakit).toBe('function')
  })

  test('unknown dataset names and versions list what exists', async () => {
    expect(() => Dataset.fromDatakit('nope', { prefix })).toThrow(
      /no dataset "datasets\/nope".*existing: .*datasets\/lines/,
    )
    expect(() => Dataset.fromDatakit('lines', { prefix, version: 9 })).toThrow(
      /"datasets\/lines" has no version 9; existing versions: 1/,
    )
    const err = await openDataset('nope', { prefix }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DatakitError)
    expect(err).toMatchObject({ code: 'DATASET_NOT_FOUND', message: expect.stringMatching(/existing: .*lines/) })
    await expect(openDataset('lines', { prefix, version: 4 })).rejects.toMatchObject({ code: 'VERSION_NOT_FOUND' })
  })
})

test('a crashed ingest resumes with the shards it finished', async () => {
  const small = file('r-0.jsonl', '{"text":"small shard"}\n')
  const doc = JSON.stringify({ text: 'x '.repeat(2000) })
  const lines: string[] = []
  for (let i = 0; i < 6000; i++) lines.push(doc.replace('x ', `${i} `))
  const big = file('r-1.jsonl', `${lines.join('\n')}\n`)
  const script = file(
    'crash.mts',
    `import { ingest } from ` +
      `${JSON.stringify(new URL('./ingest.ts', import.meta.url).pathname)}` +
      `\nawait ingest({ name: 'resume', source: ` +
      `${JSON.stringify([small, big])}, format: 'jsonl', prefix: ` +
      `${JSON.stringify(prefix)} })\n`,
  )
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    stdio: 'ignore',
    cwd: new URL('../..', import.meta.url).pathname,
  })
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)))
  const work = join(prefix, 'datakit-work', 'ingest', 'resume')
  const first = (): string | undefined => {
    if (!existsSync(work)) return undefined
    const d = readdirSync(work)[0]
    const p = d && join(work, d, 'part-00000-of-00002.parquet')
    return p && existsSync(p) ? p : undefined
  }
  const deadline = Date.now() + 120_000
  while (!first() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  child.kill('SIGKILL')
  await exited
  const shard0 = first()!
  expect(shard0).toBeDefined()
  expect(existsSync(join(prefix, 'store', 'artifacts', 'datasets', 'resume'))).toBe(false) // killed before the commit
  const before = statSync(shard0).mtimeMs
  const r = await ingest({ name: 'resume', source: [small, big], format: 'jsonl', prefix })
  expect(r).toMatchObject({ version: 1, records: 6001, reused: false })
  expect(statSync(shard0).mtimeMs).toBe(before)
}, 180_000)

describe('the dataset hash', () => {
  // Three shards, one dropped record, text with non-ASCII bytes: the numbers ingest has always given.
  const fixed = () => [
    file('h-0.jsonl', '{"text":"alpha"}\n{"text":"beta gamma"}\n'),
    file('h-1.jsonl', '{"text":"   "}\n{"text":"caf\u00e9 \u2014 d\u00e9j\u00e0 vu","lang":"fr"}\n'),
    file('h-2.jsonl', '{"text":"the last one"}\n'),
  ]

  test('is the same as before for a fixed input', async () => {
    const r = await ingest({ name: 'hash-fixed', source: fixed(), format: 'jsonl', prefix })
    expect(r).toMatchObject({
      records: 4,
      bytes: 46,
      datasetHash: 'f558ccada6b5d8aa128fc726191f958f726170b1438225789b02f78d73c8052f',
    })
  })

  test('is tallied as each shard is written, not read back; a shard without its tally is read instead', async () => {
    const r = await ingest({ name: 'hash-tally', source: fixed(), format: 'jsonl', prefix })
    const base = join(prefix, 'datakit-work', 'ingest', 'hash-tally')
    const work = join(base, readdirSync(base)[0]!)
    const tallies = readdirSync(work)
      .filter((f) => f.endsWith('.tally.json'))
      .sort()
    expect(tallies).toEqual([
      'part-00000-of-00003.parquet.tally.json',
      'part-00001-of-00003.parquet.tally.json',
      'part-00002-of-00003.parquet.tally.json',
    ])
    // The same work folder, another store: the finished shards are reused, one of them without its tally.
    rmSync(join(work, tallies[1]!))
    const store = await openStore({ url: join(root, 'other-store') })
    try {
      const again = await ingest({ name: 'hash-tally', source: fixed(), format: 'jsonl', prefix, store })
      expect(again).toMatchObject({ reused: false, records: r.records, bytes: r.bytes, datasetHash: r.datasetHash })
    } finally {
      store.close()
    }
  })
})
