/**
 * @module A zephyr reader for tab-separated `id genre text` files (docs/guides/zephyr-reader.md). A plan reaches
 * it by module reference, so it lives in a module of its own: a worker imports this file, not the experiment.
 */
import { openStorage } from '@marin/rigging'

export type TsvRecord = { id: string; genre: string; text: string }

export const escapeField = (s: string) => s.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n')
const unescapeField = (s: string) => s.replace(/\\(.)/g, (_, c: string) => (c === 't' ? '\t' : c === 'n' ? '\n' : c))

/**
 * The reader: file URLs in (what `Dataset.fromFiles` yields, one shard per file), records out. It reads through
 * rigging's storage, so `s3://` and `gs://` inputs work as `file://` ones do; a bad line fails naming file and line.
 */
export async function* readTsv(urls: AsyncIterable<string>): AsyncGenerator<TsvRecord> {
  for await (const url of urls) {
    const cut = url.lastIndexOf('/')
    const text = await (await openStorage(url.slice(0, cut))).readText(url.slice(cut + 1))
    for (const [i, line] of text.split('\n').entries()) {
      if (line === '') continue
      const fields = line.split('\t')
      if (fields.length !== 3) throw new Error(`${url}:${i + 1}: expected 3 tab-separated fields, got ${fields.length}`)
      const [id, genre, body] = fields.map(unescapeField) as [string, string, string]
      yield { id, genre, text: body }
    }
  }
}
