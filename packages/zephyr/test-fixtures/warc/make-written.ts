/**
 * @module Writes `written.warc.gz` (run: `pnpm exec tsx packages/zephyr/test-fixtures/warc/make-written.ts`):
 * three pages we wrote ourselves, as warcio's writer serializes them: a windows-1252 page with its
 * charset in the HTTP header, a Shift_JIS page whose charset only its `<meta>` tag names, a page
 * that is navigation only (no main text), and a PNG response (not HTML: skipped by default).
 */
import { writeFileSync } from 'node:fs'
import { WARCRecord, WARCSerializer } from 'warcio'

// windows-1252 above Latin-1, from the Encoding Standard's index (Node 20's decoder reads these bytes as C1 controls)
const CP1252: Record<string, number> = { '€': 0x80, '’': 0x92, '—': 0x97 }

/** Text → bytes in a legacy encoding: windows-1252 by table, Shift_JIS by inverting the decoder's 1- and 2-byte map. */
function encodeLegacy(text: string, label: string): Uint8Array {
  if (label === 'windows-1252')
    return new Uint8Array([...text].map((ch) => CP1252[ch] ?? (ch.charCodeAt(0) < 256 ? ch.charCodeAt(0) : 0x3f)))
  const dec = new TextDecoder(label)
  const table = new Map<string, number[]>()
  for (let a = 0; a < 256; a++) {
    const one = dec.decode(new Uint8Array([a]))
    if (one.length === 1 && one !== '\uFFFD' && !table.has(one)) table.set(one, [a])
    for (let b = 0x40; b < 256; b++) {
      const two = dec.decode(new Uint8Array([a, b]))
      if (two.length === 1 && two !== '\uFFFD' && !table.has(two)) table.set(two, [a, b])
    }
  }
  const out: number[] = []
  for (const ch of text) {
    const bytes = table.get(ch)
    if (!bytes) throw new Error(`${JSON.stringify(ch)} has no ${label} encoding`)
    out.push(...bytes)
  }
  return new Uint8Array(out)
}

const cp1252 = `<!DOCTYPE html>
<html lang="fr"><head><title>Le café du marché</title></head>
<body><nav><a href="/">Accueil</a> | <a href="/menu">Menu</a></nav>
<article><h1>Le café du marché</h1>
<p>Chaque matin, le café ouvre à sept heures et sert des croissants à la clientèle fidèle du quartier.</p>
<p>Le « petit noir » coûte 1,20 € au comptoir — un prix qui n’a pas changé depuis des années, dit le patron.</p>
<p>Les habitués lisent le journal, discutent de la météo et des élections, puis repartent travailler.</p>
</article><footer>© 2024 Café du marché</footer></body></html>
`
const sjis = `<!DOCTYPE html>
<html lang="ja"><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">
<title>京都の秋</title></head>
<body><div id="menu"><a href="/">ホーム</a> <a href="/about">概要</a></div>
<div class="main"><h1>京都の秋</h1>
<p>京都の秋は紅葉で有名です。毎年十一月になると、多くの観光客が寺や庭園を訪れます。</p>
<p>嵐山や東福寺では、赤や黄色に染まった木々が川や池に映り、とても美しい景色が見られます。</p>
<p>朝早く出かけると、人が少なく、静かな雰囲気の中で紅葉を楽しむことができます。</p>
</div></body></html>
`
const navOnly = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Site map</title></head>
<body><nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li>
<li><a href="/sport">Sport</a></li><li><a href="/contact">Contact</a></li></ul></nav>
<footer><a href="/privacy">Privacy</a> · <a href="/terms">Terms</a></footer></body></html>
`
const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex')

const pages: { url: string; id: string; type: string; body: Uint8Array }[] = [
  {
    url: 'http://cafe.example.fr/',
    id: '1',
    type: 'text/html; charset=windows-1252',
    body: encodeLegacy(cp1252, 'windows-1252'),
  },
  { url: 'http://kyoto.example.jp/aki.html', id: '2', type: 'text/html', body: encodeLegacy(sjis, 'shift_jis') },
  {
    url: 'http://portal.example.com/sitemap',
    id: '3',
    type: 'text/html; charset=utf-8',
    body: new TextEncoder().encode(navOnly),
  },
  { url: 'http://portal.example.com/pixel.png', id: '4', type: 'image/png', body: png },
]
const parts: Uint8Array[] = []
for (const p of pages) {
  const record = WARCRecord.create(
    {
      url: p.url,
      date: '2024-05-01T12:00:00Z',
      type: 'response',
      warcHeaders: { 'WARC-Record-ID': `<urn:uuid:00000000-0000-4000-8000-00000000000${p.id}>` },
      httpHeaders: { 'Content-Type': p.type, 'Content-Length': String(p.body.length) },
    },
    [p.body],
  )
  parts.push(await WARCSerializer.serialize(record, { gzip: true }))
}
writeFileSync(new URL('./written.warc.gz', import.meta.url), Buffer.concat(parts))
