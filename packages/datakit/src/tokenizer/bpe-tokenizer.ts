/**
 * @module A byte-level BPE tokenizer: encode, decode, and the Hugging Face
 * `tokenizer.json` format (load and save), compatible with GPT-2-style files.
 *
 * @example
 * const tok = await BpeTokenizer.load('tokenizer.json')
 * const ids = tok.encode('Hello world')
 * tok.decode(ids) // 'Hello world'
 */
import { readFile } from 'node:fs/promises'
import { DatakitError } from '../errors.js'
import { BYTE_TO_CHAR, symbolsToBytes } from './byte-level.js'
import { GPT2_PATTERN, compilePattern, pretokenize } from './pretokenize.js'

/** A merge key: two token ids packed in one number (ids stay below 2^21). */
const PAIR = 2 ** 21
export const pairKey = (a: number, b: number): number => a * PAIR + b

export type SpecialToken = { id: number; content: string }

export type BpeTokenizerSpec = {
  /** Byte-level token string → id. Must hold all 256 single-byte tokens. */
  vocab: ReadonlyMap<string, number>
  /** Merges in priority order: `[left, right]` token strings. */
  merges: ReadonlyArray<readonly [string, string]>
  /** Special tokens; they are never produced by merges. */
  specialTokens?: ReadonlyArray<SpecialToken>
  /** Pre-tokenization regex source. @default GPT2_PATTERN */
  pattern?: string
}

export type EncodeOptions = {
  /**
   * `'ignore'` encodes special-token strings found in the text as ordinary text;
   * `'match'` turns them into their special ids. @default 'ignore'
   */
  specials?: 'ignore' | 'match'
}

const utf8 = new TextEncoder()
const CACHE_LIMIT = 200_000

export class BpeTokenizer {
  readonly pattern: string
  readonly specialTokens: ReadonlyArray<SpecialToken>
  /** id → token string (special tokens by their content). */
  private readonly tokens: string[]
  private readonly vocab: Map<string, number>
  private readonly tokenBytes: Uint8Array[]
  /** pair key → merge rank */
  private readonly ranks = new Map<number, number>()
  /** merge rank → id of the merged token */
  private readonly mergedIds: Int32Array
  private readonly byteIds = new Int32Array(256)
  private readonly re: RegExp
  private readonly specialRe: RegExp | undefined
  private readonly cache = new Map<string, readonly number[]>()
  readonly mergeList: ReadonlyArray<readonly [string, string]>

  constructor(spec: BpeTokenizerSpec) {
    this.pattern = spec.pattern ?? GPT2_PATTERN
    try {
      this.re = compilePattern(this.pattern)
    } catch (err) {
      throw new DatakitError(
        'TOKENIZER_INVALID',
        `pre-tokenization pattern ${JSON.stringify(this.pattern)} is not ` +
          `a valid JavaScript regular expression; rewrite it without ` +
          `inline flags or possessive quantifiers`,
        { cause: err },
      )
    }
    this.specialTokens = [...(spec.specialTokens ?? [])]
    this.vocab = new Map(spec.vocab)
    const size = Math.max(-1, ...this.vocab.values(), ...this.specialTokens.map((t) => t.id)) + 1
    if (size >= PAIR)
      throw new DatakitError('TOKENIZER_INVALID', `vocabulary of ${size} tokens is larger than the ${PAIR} supported`)
    this.tokens = new Array<string>(size).fill('')
    this.tokenBytes = new Array<Uint8Array>(size).fill(new Uint8Array(0))
    for (const [tok, id] of this.vocab) {
      const bytes = symbolsToBytes(tok)
      if (!bytes)
        throw new DatakitError(
          'TOKENIZER_INVALID',
          `vocabulary token ${JSON.stringify(tok)} (id ${id}) is not ` +
            `byte-level; only byte-level BPE vocabularies are supported`,
        )
      this.tokens[id] = tok
      this.tokenBytes[id] = bytes
    }
    for (const sp of this.specialTokens) {
      this.tokens[sp.id] = sp.content
      this.tokenBytes[sp.id] = utf8.encode(sp.content)
    }
    for (let b = 0; b < 256; b++) {
      const id = this.vocab.get(BYTE_TO_CHAR[b]!)
      if (id === undefined)
        throw new DatakitError(
          'TOKENIZER_INVALID',
          `vocabulary lacks the single-byte token for byte ${b} (` +
            `${JSON.stringify(BYTE_TO_CHAR[b])}); a byte-level vocabulary ` +
            `needs all 256`,
        )
      this.byteIds[b] = id
    }
    this.mergeList = spec.merges
    this.mergedIds = new Int32Array(spec.merges.length)
    spec.merges.forEach(([l, r], rank) => {
      const a = this.vocab.get(l)
      const b = this.vocab.get(r)
      const c = this.vocab.get(l + r)
      if (a === undefined || b === undefined || c === undefined) {
        throw new DatakitError(
          'TOKENIZER_INVALID',
          `merge ${rank} (${JSON.stringify(l)} ${JSON.stringify(r)}) uses a token missing from the vocabulary`,
        )
      }
      const key = pairKey(a, b)
      if (!this.ranks.has(key)) this.ranks.set(key, rank)
      this.mergedIds[rank] = c
    })
    const specials = this.specialTokens.map((t) => t.content.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    this.specialRe = specials.length
      ? new RegExp(`(${specials.sort((x, y) => y.length - x.length).join('|')})`)
      : undefined
  }

  /** Number of ids, special tokens included. */
  get vocabSize(): number {
    return this.tokens.length
  }

  /** The id of a token string or special token; `undefined` when absent. */
  tokenToId(token: string): number | undefined {
    return this.vocab.get(token) ?? this.specialTokens.find((t) => t.content === token)?.id
  }

  idToToken(id: number): string | undefined {
    return this.tokens[id]
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const out: number[] = []
    if (options.specials === 'match' && this.specialRe) {
      text.split(this.specialRe).forEach((part, i) => {
        if (i % 2 === 1) out.push(this.tokenToId(part)!)
        else if (part) this.encodeOrdinary(part, out)
      })
    } else {
      this.encodeOrdinary(text, out)
    }
    return out
  }

  /** Encodes many texts; the same as mapping `encode`, sharing the piece cache. */
  encodeBatch(texts: readonly string[], options: EncodeOptions = {}): number[][] {
    return texts.map((t) => this.encode(t, options))
  }

  decode(ids: Iterable<number>): string {
    return new TextDecoder().decode(this.decodeBytes(ids))
  }

  /** The bytes the ids stand for (decoding is exact at the byte level). */
  decodeBytes(ids: Iterable<number>): Uint8Array {
    const parts: Uint8Array[] = []
    let n = 0
    for (const id of ids) {
      const b = this.tokenBytes[id]
      if (b === undefined)
        throw new DatakitError(
          'TOKENIZER_UNKNOWN_TOKEN',
          `token id ${id} is outside the vocabulary (size ${this.vocabSize})`,
        )
      parts.push(b)
      n += b.length
    }
    const out = new Uint8Array(n)
    let off = 0
    for (const p of parts) {
      out.set(p, off)
      off += p.length
    }
    return out
  }

  private encodeOrdinary(text: string, out: number[]): void {
    for (const piece of pretokenize(text, this.re)) {
      let ids = this.cache.get(piece)
      if (ids === undefined) {
        ids = this.bpe(piece)
        if (this.cache.size >= CACHE_LIMIT) this.cache.clear()
        this.cache.set(piece, ids)
      }
      for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
    }
  }

  /** Applies merges to one piece's bytes, lowest rank first, until none applies. */
  private bpe(piece: string): number[] {
    const word: number[] = []
    for (let i = 0; i < piece.length; i++) {
      const c = piece.charCodeAt(i)
      if (c >= 0x80) {
        // Not ASCII: start over from the UTF-8 bytes.
        word.length = 0
        for (const b of utf8.encode(piece)) word.push(this.byteIds[b]!)
        break
      }
      word.push(this.byteIds[c]!)
    }
    while (word.length > 1) {
      let best = -1
      let bestRank = Infinity
      for (let i = 0; i < word.length - 1; i++) {
        const r = this.ranks.get(pairKey(word[i]!, word[i + 1]!))
        if (r !== undefined && r < bestRank) {
          bestRank = r
          best = i
        }
      }
      if (best < 0) break
      const a = word[best]!
      const b = word[best + 1]!
      const merged = this.mergedIds[bestRank]!
      // Merge every occurrence of the pair, left to right, like the reference implementation.
      let w = 0
      for (let i = 0; i < word.length; i++) {
        if (i < word.length - 1 && word[i] === a && word[i + 1] === b) {
          word[w++] = merged
          i++
        } else {
          word[w++] = word[i]!
        }
      }
      word.length = w
    }
    return word
  }

  /** The Hugging Face `tokenizer.json` object for this tokenizer. */
  toJSON(): TokenizerJson {
    const byteLevel = {
      type: 'ByteLevel',
      add_prefix_space: false,
      trim_offsets: true,
      use_regex: this.pattern === GPT2_PATTERN,
    }
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: this.specialTokens.map((t) => ({
        id: t.id,
        content: t.content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer:
        this.pattern === GPT2_PATTERN
          ? byteLevel
          : {
              type: 'Sequence',
              pretokenizers: [
                { type: 'Split', pattern: { Regex: this.pattern }, behavior: 'Isolated', invert: false },
                byteLevel,
              ],
            },
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: '',
        end_of_word_suffix: '',
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: false,
        vocab: Object.fromEntries([...this.vocab].sort((x, y) => x[1] - y[1])),
        merges: this.mergeList.map(([l, r]) => [l, r]),
      },
    }
  }

  /** Builds a tokenizer from a parsed `tokenizer.json`; `source` names it in errors. */
  static fromJSON(json: unknown, source = 'tokenizer.json'): BpeTokenizer {
    return new BpeTokenizer(parseTokenizerJson(json, source))
  }

  static async load(path: string): Promise<BpeTokenizer> {
    const text = await readFile(path, 'utf8')
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (err) {
      throw new DatakitError(
        'TOKENIZER_INVALID',
        `${path}: not valid JSON (${(err as Error).message}); expected a Hugging Face tokenizer.json`,
        { cause: err },
      )
    }
    return BpeTokenizer.fromJSON(json, path)
  }

  /** The original GPT-2 release files: `encoder.json` (token → id) and `vocab.bpe` (merges). */
  static fromGpt2Files(encoderJson: string, vocabBpe: string): BpeTokenizer {
    const encoder = JSON.parse(encoderJson) as Record<string, number>
    const specials = Object.entries(encoder).filter(([t]) => t === '<|endoftext|>')
    const vocab = new Map(Object.entries(encoder).filter(([t]) => t !== '<|endoftext|>'))
    const merges = vocabBpe
      .split('\n')
      .filter((l) => l && !l.startsWith('#version'))
      .map((l) => l.split(' ') as [string, string])
    return new BpeTokenizer({ vocab, merges, specialTokens: specials.map(([content, id]) => ({ id, content })) })
  }
}

export type TokenizerJson = {
  version: string
  truncation: null
  padding: null
  added_tokens: Array<{
    id: number
    content: string
    single_word: boolean
    lstrip: boolean
    rstrip: boolean
    normalized: boolean
    special: boolean
  }>
  normalizer: null
  pre_tokenizer: Record<string, unknown>
  post_processor: null
  decoder: Record<string, unknown>
  model: {
    type: 'BPE'
    dropout: null
    unk_token: null
    continuing_subword_prefix: string
    end_of_word_suffix: string
    fuse_unk: boolean
    byte_fallback: boolean
    ignore_merges: boolean
    vocab: Record<string, number>
    merges: Array<[string, string]>
  }
}

function invalid(source: string, what: string): never {
  throw new DatakitError('TOKENIZER_INVALID', `${source}: ${what}`)
}

/** Reads the parts of a `tokenizer.json` a byte-level BPE needs, refusing what it cannot honour. */
export function parseTokenizerJson(json: unknown, source: string): BpeTokenizerSpec {
  const j = json as Record<string, any>
  if (typeof j !== 'object' || j === null) invalid(source, 'expected a JSON object')
  const model = j.model
  if (model?.type !== 'BPE')
    invalid(source, `model.type is ${JSON.stringify(model?.type)}; only "BPE" tokenizers are supported`)
  if (typeof model.vocab !== 'object' || model.vocab === null) invalid(source, 'model.vocab is missing')
  if (!Array.isArray(model.merges)) invalid(source, 'model.merges must be an array')
  if (model.continuing_subword_prefix || model.end_of_word_suffix)
    invalid(source, 'subword prefixes/suffixes are not byte-level BPE')
  const merges = (model.merges as unknown[]).map((m, i): [string, string] => {
    if (typeof m === 'string') {
      const sp = m.indexOf(' ')
      if (sp <= 0) invalid(source, `model.merges[${i}] ${JSON.stringify(m)} is not "left right"`)
      return [m.slice(0, sp), m.slice(sp + 1)]
    }
    if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') return [m[0], m[1]]
    return invalid(source, `model.merges[${i}] must be "left right" or [left, right]`)
  })
  const specialTokens: SpecialToken[] = (Array.isArray(j.added_tokens) ? j.added_tokens : []).map(
    (t: any, i: number) => {
      if (typeof t?.id !== 'number' || typeof t?.content !== 'string')
        invalid(source, `added_tokens[${i}] needs a numeric id and a string content`)
      return { id: t.id, content: t.content }
    },
  )
  const specialContents = new Set(specialTokens.map((t) => t.content))
  const vocab = new Map(Object.entries(model.vocab as Record<string, number>).filter(([t]) => !specialContents.has(t)))
  return { vocab, merges, specialTokens, pattern: patternOf(j.pre_tokenizer, source) }
}

function patternOf(pre: any, source: string): string {
  if (pre?.type === 'ByteLevel') {
    if (pre.add_prefix_space) invalid(source, 'pre_tokenizer.add_prefix_space = true is not supported; set it to false')
    return GPT2_PATTERN
  }
  if (pre?.type === 'Sequence' && Array.isArray(pre.pretokenizers)) {
    const split = pre.pretokenizers.find((p: any) => p?.type === 'Split')
    const byteLevel = pre.pretokenizers.find((p: any) => p?.type === 'ByteLevel')
    if (split?.pattern?.Regex && byteLevel && !byteLevel.add_prefix_space) return split.pattern.Regex as string
  }
  return invalid(
    source,
    `pre_tokenizer ${JSON.stringify(pre?.type)} is not supported; ` +
      `expected ByteLevel, or a Sequence of a Split regex and ByteLevel`,
  )
}
