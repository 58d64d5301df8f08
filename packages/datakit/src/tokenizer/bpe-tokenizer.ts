/**
 * @module A BPE tokenizer: encode, decode, and the Hugging Face `tokenizer.json` format (load and
 * save). Two vocabularies: byte-level (GPT-2, Llama 3: every byte a printable character, text
 * split by a regex first, `ignore_merges` taking whole words found in the vocabulary) and
 * SentencePiece-style (Llama 2, Mistral: spaces as `▁`, prepended to the text, characters outside
 * the vocabulary as their UTF-8 byte tokens `<0xE6>`…). Added tokens marked special are matched
 * when asked; the others always are. Their `single_word`, `lstrip`, `rstrip` and `normalized` flags act
 * as in Hugging Face `tokenizers` (its AddedVocabulary): see {@link SpecialToken}.
 *
 * @example
 * const tok = await BpeTokenizer.load('tokenizer.json')
 * const ids = tok.encode('Hello world')
 * tok.decode(ids) // 'Hello world'
 */
import { readFile } from 'node:fs/promises'
import { DatakitError } from '../errors.js'
import { type AddedPasses, type SpecialToken, addedMatcher, splitOnAdded } from './added-tokens.js'
import { BYTE_TO_CHAR, symbolsToBytes } from './byte-level.js'
import { GPT2_PATTERN, compilePattern, pretokenize } from './pretokenize.js'
import { type TokenizerJson, parseTokenizerJson } from './tokenizer-json.js'

export type { SpecialToken } from './added-tokens.js'
export { parseTokenizerJson, type TokenizerJson } from './tokenizer-json.js'

/** A merge key: two token ids packed in one number (ids stay below 2^21). */
const PAIR = 2 ** 21
export const pairKey = (a: number, b: number): number => a * PAIR + b

/**
 * How a SentencePiece-style vocabulary puts `▁` in front of text: `legacy` before every piece of
 * text between added tokens (a Prepend normalizer, Llama 2), `first` before the text's start only
 * and `always` before every piece (Metaspace), unless it starts with `▁` already; `never`.
 */
export type MetaspacePrepend = 'legacy' | 'first' | 'always' | 'never'

export type BpeTokenizerSpec = {
  /** Byte-level token string → id. Must hold all 256 single-byte tokens. */
  vocab: ReadonlyMap<string, number>
  /** Merges in priority order: `[left, right]` token strings. */
  merges: ReadonlyArray<readonly [string, string]>
  /** Added tokens, cut out of the text before the model sees it (see {@link SpecialToken}). */
  specialTokens?: ReadonlyArray<SpecialToken>
  /** Pre-tokenization regex source (byte-level). @default GPT2_PATTERN */
  pattern?: string
  /** Ids a post-processor puts around a single text (`TemplateProcessing`: Llama's BOS), added on request. */
  template?: { readonly before: readonly number[]; readonly after: readonly number[] }
  /** Byte-level: after `pattern`, split each piece again with GPT-2's pattern (a ByteLevel step with use_regex). */
  byteLevelRegex?: boolean
  /** Byte-level: the Unicode normal form text is put in first (a `normalizer` such as Qwen2's NFC). */
  unicodeNormal?: 'NFC' | 'NFKC' | 'NFD' | 'NFKD'
  /** Byte-level: a piece found whole in the vocabulary is that token, merges aside. @default false */
  ignoreMerges?: boolean
  /**
   * `metaspace`: a SentencePiece-style vocabulary (`▁` for spaces, `<0xNN>` byte tokens); the text
   * is one piece (or one per `▁` with `splitOnMetaspace`). @default byte-level
   */
  metaspace?: {
    prepend: MetaspacePrepend
    /** characters outside the vocabulary become their UTF-8 byte tokens */
    byteFallback: boolean
    /** the token for what neither the vocabulary nor byte fallback covers */
    unkToken?: string
    splitOnMetaspace?: boolean
  }
}

export type EncodeOptions = {
  /**
   * `'ignore'` encodes special-token strings found in the text as ordinary text;
   * `'match'` turns them into their special ids. @default 'ignore'
   */
  specials?: 'ignore' | 'match'
  /** Put the post-processor's special tokens (such as BOS) around the ids, as Hugging Face's
   * `add_special_tokens`. @default false */
  addSpecialTokens?: boolean
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
  private readonly re2: RegExp | undefined
  private readonly ignoreMerges: boolean
  private readonly unicodeNormal: BpeTokenizerSpec['unicodeNormal']
  private readonly metaspace: BpeTokenizerSpec['metaspace']
  readonly template: BpeTokenizerSpec['template']
  private readonly unkId: number | undefined
  /** added tokens matched in `'match'` mode (all) and always (the non-special ones) */
  private readonly allAdded: AddedPasses
  private readonly nonSpecialAdded: AddedPasses
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
    this.re2 = spec.byteLevelRegex ? compilePattern(GPT2_PATTERN) : undefined
    this.ignoreMerges = spec.ignoreMerges ?? false
    this.unicodeNormal = spec.unicodeNormal
    this.metaspace = spec.metaspace
    this.template = spec.template
    this.specialTokens = [...(spec.specialTokens ?? [])]
    this.vocab = new Map(spec.vocab)
    const size = Math.max(-1, ...this.vocab.values(), ...this.specialTokens.map((t) => t.id)) + 1
    if (size >= PAIR)
      throw new DatakitError('TOKENIZER_INVALID', `vocabulary of ${size} tokens is larger than the ${PAIR} supported`)
    this.tokens = new Array<string>(size).fill('')
    this.tokenBytes = new Array<Uint8Array>(size).fill(new Uint8Array(0))
    for (const [tok, id] of this.vocab) {
      const bytes = this.metaspace ? metaspaceBytes(tok) : symbolsToBytes(tok)
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
    const unk = this.metaspace?.unkToken
    this.unkId = unk === undefined ? undefined : this.tokenToId(unk)
    if (unk !== undefined && this.unkId === undefined)
      throw new DatakitError('TOKENIZER_INVALID', `unk_token ${JSON.stringify(unk)} is not in the vocabulary`)
    for (let b = 0; b < 256; b++) {
      if (this.metaspace) {
        this.byteIds[b] = this.vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`) ?? -1
        continue
      }
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
    this.allAdded = this.addedPasses(this.specialTokens)
    this.nonSpecialAdded = this.addedPasses(this.specialTokens.filter((t) => t.special === false))
  }

  /** Matchers for added tokens: the non-normalized ones by their content, the normalized ones by its normal form. */
  private addedPasses(tokens: readonly SpecialToken[]): AddedPasses {
    const isNormalized = (t: SpecialToken) => t.normalized ?? t.special === false
    const original = addedMatcher(tokens.filter((t) => !isNormalized(t)).map((t) => [t.content, t] as const))
    const normalized = addedMatcher(tokens.filter(isNormalized).map((t) => [this.normalize(t.content), t] as const))
    return { ...(original ? { original } : {}), ...(normalized ? { normalized } : {}) }
  }

  /** The normalizer: a Unicode normal form, or SentencePiece's Prepend "▁" and Replace " " → "▁" (Llama 2). */
  private normalize(text: string): string {
    if (this.metaspace?.prepend === 'legacy') return text ? '▁' + text.replaceAll(' ', '▁') : ''
    return this.unicodeNormal ? text.normalize(this.unicodeNormal) : text
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
    const out: number[] = options.addSpecialTokens && this.template ? [...this.template.before] : []
    this.encodeText(text, options, out)
    if (options.addSpecialTokens && this.template) out.push(...this.template.after)
    return out
  }

  /**
   * As `tokenizers` does: added tokens matched in the original text first; each piece between them is
   * normalized, then split on the normalized added tokens; what remains goes to the pre-tokenizer and model.
   */
  private encodeText(text: string, options: EncodeOptions, out: number[]): void {
    const passes = options.specials === 'match' ? this.allAdded : this.nonSpecialAdded
    for (const a of splitOnAdded(text, passes.original)) {
      if (a.token) {
        out.push(a.token.id)
        continue
      }
      for (const b of splitOnAdded(this.normalize(a.text), passes.normalized)) {
        if (b.token) out.push(b.token.id)
        else this.encodeOrdinary(b.text, a.start === 0 && b.start === 0, out)
      }
    }
  }

  /** Encodes many texts; the same as mapping `encode`, sharing the piece cache. */
  encodeBatch(texts: readonly string[], options: EncodeOptions = {}): number[][] {
    return texts.map((t) => this.encode(t, options))
  }

  /** The text of `ids`; a SentencePiece-style vocabulary drops the one space it put in front of the text. */
  decode(ids: Iterable<number>): string {
    const text = new TextDecoder().decode(this.decodeBytes(ids))
    return this.metaspace && this.metaspace.prepend !== 'never' && text.startsWith(' ') ? text.slice(1) : text
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

  /** Encodes normalized text between added tokens; `atStart`: it begins the whole text. */
  private encodeOrdinary(text: string, atStart: boolean, out: number[]): void {
    if (this.metaspace) return this.encodeMetaspace(text, atStart, out)
    let pieces = pretokenize(text, this.re)
    if (this.re2) pieces = pieces.flatMap((p) => pretokenize(p, this.re2!))
    for (const piece of pieces) {
      let ids = this.cache.get(piece)
      if (ids === undefined) {
        ids = this.bpe(piece)
        if (this.cache.size >= CACHE_LIMIT) this.cache.clear()
        this.cache.set(piece, ids)
      }
      for (let i = 0; i < ids.length; i++) out.push(ids[i]!)
    }
  }

  /** SentencePiece-style: spaces as ▁ (prepended as configured; `legacy`: by the normalizer already), characters
   * as tokens or their bytes, then merges. */
  private encodeMetaspace(text: string, atStart: boolean, out: number[]): void {
    const ms = this.metaspace!
    let s = text
    if (ms.prepend !== 'legacy') {
      s = s.replaceAll(' ', '▁')
      const wanted = ms.prepend === 'always' || (ms.prepend === 'first' && atStart)
      if (s && wanted && !s.startsWith('▁')) s = '▁' + s
    }
    const pieces = ms.splitOnMetaspace ? (s.match(/▁[^▁]*|[^▁]+/gu) ?? []) : s ? [s] : []
    for (const piece of pieces) {
      const word: number[] = []
      let unk = false
      for (const ch of piece) {
        const id = this.vocab.get(ch)
        if (id !== undefined) {
          word.push(id)
          unk = false
          continue
        }
        const bytes = ms.byteFallback ? [...utf8.encode(ch)].map((b) => this.byteIds[b]!) : [-1]
        if (bytes.every((b) => b >= 0)) {
          word.push(...bytes)
          unk = false
        } else if (this.unkId === undefined)
          throw new DatakitError(
            'TOKENIZER_UNKNOWN_TOKEN',
            `character ${JSON.stringify(ch)} is not in the vocabulary, which has no unk_token nor its bytes`,
          )
        else if (!unk) {
          word.push(this.unkId) // consecutive unknown characters fuse into one
          unk = true
        }
      }
      const merged = this.mergeWord(word)
      for (let i = 0; i < merged.length; i++) out.push(merged[i]!)
    }
  }

  /** Applies merges to one piece's bytes, lowest rank first, until none applies. */
  private bpe(piece: string): number[] {
    if (this.ignoreMerges) {
      let chars = ''
      for (const b of utf8.encode(piece)) chars += BYTE_TO_CHAR[b]!
      const whole = this.vocab.get(chars)
      if (whole !== undefined) return [whole]
    }
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
    return this.mergeWord(word)
  }

  /** Applies merges to a word's ids, lowest rank first, until none applies (in place). */
  private mergeWord(word: number[]): number[] {
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
      use_regex: this.pattern === GPT2_PATTERN || this.re2 !== undefined,
    }
    const ms = this.metaspace
    const metaspace = (prepend: MetaspacePrepend) => ({
      type: 'Metaspace',
      replacement: '▁',
      prepend_scheme: prepend,
      split: ms?.splitOnMetaspace ?? false,
    })
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: this.specialTokens.map((t) => ({
        id: t.id,
        content: t.content,
        single_word: t.singleWord ?? false,
        lstrip: t.lstrip ?? false,
        rstrip: t.rstrip ?? false,
        normalized: t.normalized ?? t.special === false,
        special: t.special !== false,
      })),
      normalizer: this.unicodeNormal
        ? { type: this.unicodeNormal }
        : ms?.prepend === 'legacy'
          ? {
              type: 'Sequence',
              normalizers: [
                { type: 'Prepend', prepend: '▁' },
                { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
              ],
            }
          : null,
      pre_tokenizer: ms
        ? ms.prepend === 'legacy'
          ? null
          : metaspace(ms.prepend)
        : this.pattern === GPT2_PATTERN
          ? byteLevel
          : {
              type: 'Sequence',
              pretokenizers: [
                { type: 'Split', pattern: { Regex: this.pattern }, behavior: 'Isolated', invert: false },
                byteLevel,
              ],
            },
      post_processor: this.template ? this.templateJson(this.template) : null,
      decoder: ms
        ? ms.prepend === 'legacy'
          ? {
              type: 'Sequence',
              decoders: [
                { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
                { type: 'ByteFallback' },
                { type: 'Fuse' },
                { type: 'Strip', content: ' ', start: 1, stop: 0 },
              ],
            }
          : metaspace(ms.prepend)
        : { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: ms?.unkToken ?? null,
        continuing_subword_prefix: '',
        end_of_word_suffix: '',
        fuse_unk: ms !== undefined,
        byte_fallback: ms?.byteFallback ?? false,
        ignore_merges: this.ignoreMerges,
        vocab: Object.fromEntries([...this.vocab].sort((x, y) => x[1] - y[1])),
        merges: this.mergeList.map(([l, r]) => [l, r]),
      },
    }
  }

  private templateJson(t: NonNullable<BpeTokenizerSpec['template']>): Record<string, unknown> {
    const item = (id: number) => ({ SpecialToken: { id: this.tokens[id]!, type_id: 0 } })
    const ids = [...new Set([...t.before, ...t.after])]
    return {
      type: 'TemplateProcessing',
      single: [...t.before.map(item), { Sequence: { id: 'A', type_id: 0 } }, ...t.after.map(item)],
      pair: [],
      special_tokens: Object.fromEntries(
        ids.map((id) => [this.tokens[id]!, { id: this.tokens[id]!, ids: [id], tokens: [this.tokens[id]!] }]),
      ),
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

/** The bytes of a SentencePiece-style token: `<0xNN>` is that byte, `▁` a space, the rest UTF-8. */
function metaspaceBytes(token: string): Uint8Array {
  const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(token)
  return m ? Uint8Array.of(parseInt(m[1]!, 16)) : utf8.encode(token.replaceAll('▁', ' '))
}
