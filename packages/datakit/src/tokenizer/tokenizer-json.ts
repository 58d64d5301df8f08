/**
 * @module The Hugging Face `tokenizer.json` format: what a BPE tokenizer saves, and reading one into a
 * {@link BpeTokenizerSpec}, refusing (with the field named) what the tokenizer cannot honour.
 */
import { DatakitError } from '../errors.js'
import type { SpecialToken } from './added-tokens.js'
import type { BpeTokenizerSpec, MetaspacePrepend } from './bpe-tokenizer.js'
import { GPT2_PATTERN } from './pretokenize.js'

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
  normalizer: Record<string, unknown> | null
  pre_tokenizer: Record<string, unknown> | null
  post_processor: Record<string, unknown> | null
  decoder: Record<string, unknown>
  model: {
    type: 'BPE'
    dropout: null
    unk_token: string | null
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

/** Reads the parts of a `tokenizer.json` a BPE needs (byte-level or SentencePiece-style), refusing what it cannot
 * honour. */
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
      for (const flag of ['special', 'single_word', 'lstrip', 'rstrip', 'normalized'])
        if (t[flag] !== undefined && typeof t[flag] !== 'boolean')
          invalid(
            source,
            `added_tokens[${i}] (${JSON.stringify(t.content)}): ${flag} is ${JSON.stringify(t[flag])}; ` +
              'it must be true or false',
          )
      return {
        id: t.id,
        content: t.content,
        ...(t.special === false ? { special: false } : {}),
        ...(t.single_word ? { singleWord: true } : {}),
        ...(t.lstrip ? { lstrip: true } : {}),
        ...(t.rstrip ? { rstrip: true } : {}),
        ...(t.normalized !== undefined ? { normalized: t.normalized as boolean } : {}),
      }
    },
  )
  // Added tokens stay in the vocabulary when it has them (GPT-2's <|endoftext|>, Llama's <s>), as in `tokenizers`:
  // dropping them would drop a byte's token when an added token is one character such as "Q".
  const vocab = new Map(Object.entries(model.vocab as Record<string, number>))
  const template = templateOf(j.post_processor, source)
  const metaspace = metaspaceOf(j, source)
  if (metaspace) return { vocab, merges, specialTokens, metaspace, ...(template ? { template } : {}) }
  if (model.byte_fallback) invalid(source, 'model.byte_fallback needs a SentencePiece-style (▁) vocabulary')
  return {
    vocab,
    merges,
    specialTokens,
    ...patternOf(j.pre_tokenizer, source),
    ...(model.ignore_merges ? { ignoreMerges: true } : {}),
    ...(template ? { template } : {}),
    ...unicodeNormalOf(j.normalizer),
  }
}

function unicodeNormalOf(norm: any): Pick<BpeTokenizerSpec, 'unicodeNormal'> {
  const n = norm?.type === 'Sequence' ? norm.normalizers?.[0] : norm
  return n ? { unicodeNormal: n.type } : {}
}

/** The ids a TemplateProcessing post-processor (alone or in a Sequence) puts around a single text. */
function templateOf(post: any, source: string): BpeTokenizerSpec['template'] {
  const inSequence = post?.type === 'Sequence' && Array.isArray(post.processors)
  const t = inSequence ? post.processors.find((p: any) => p?.type === 'TemplateProcessing') : post
  if (t?.type !== 'TemplateProcessing') return undefined
  if (!Array.isArray(t.single)) invalid(source, 'post_processor.single must be an array')
  const before: number[] = [],
    after: number[] = []
  let seen = false
  for (const item of t.single) {
    if (item?.Sequence) {
      seen = true
      continue
    }
    const name = item?.SpecialToken?.id
    const ids = t.special_tokens?.[name]?.ids
    if (!Array.isArray(ids) || !ids.every((i: unknown) => typeof i === 'number'))
      invalid(source, `post_processor.special_tokens has no ids for ${JSON.stringify(name)}`)
    ;(seen ? after : before).push(...(ids as number[]))
  }
  return before.length || after.length ? { before, after } : undefined
}

/** The SentencePiece-style settings of a tokenizer.json (Prepend/Replace normalizer or a Metaspace pre-tokenizer). */
function metaspaceOf(j: Record<string, any>, source: string): BpeTokenizerSpec['metaspace'] {
  const pre = j.pre_tokenizer,
    norm = j.normalizer,
    model = j.model
  const normalizers: any[] = norm ? (norm.type === 'Sequence' ? (norm.normalizers ?? []) : [norm]) : []
  const prependN = normalizers.find((n) => n?.type === 'Prepend')
  const common = {
    byteFallback: model.byte_fallback === true,
    ...(model.unk_token ? { unkToken: model.unk_token as string } : {}),
  }
  if (prependN) {
    const replace = normalizers.find((n) => n?.type === 'Replace')
    if (prependN.prepend !== '▁' || replace?.pattern?.String !== ' ' || replace?.content !== '▁' || pre)
      invalid(source, 'normalizer: only Prepend "▁" with Replace " " → "▁" (and no pre_tokenizer) is supported')
    return { prepend: 'legacy', ...common }
  }
  if (pre?.type === 'Metaspace') {
    if (normalizers.length) invalid(source, `normalizer ${JSON.stringify(norm.type)} is not supported with Metaspace`)
    if ((pre.replacement ?? '▁') !== '▁')
      invalid(source, `pre_tokenizer.replacement ${JSON.stringify(pre.replacement)} is not supported; only "▁"`)
    const scheme = pre.prepend_scheme ?? (pre.add_prefix_space === false ? 'never' : 'always')
    if (!['first', 'always', 'never'].includes(scheme))
      invalid(source, `pre_tokenizer.prepend_scheme ${JSON.stringify(scheme)} is not first, always or never`)
    return { prepend: scheme as MetaspacePrepend, splitOnMetaspace: pre.split !== false, ...common }
  }
  const unicode = normalizers.length === 1 && ['NFC', 'NFKC', 'NFD', 'NFKD'].includes(normalizers[0]?.type)
  if (norm && !unicode)
    invalid(source, `normalizer ${JSON.stringify(norm.type)} is not supported (NFC, NFKC, NFD, NFKD, SentencePiece's)`)
  return undefined
}

function patternOf(pre: any, source: string): { pattern: string; byteLevelRegex?: boolean } {
  if (pre?.type === 'ByteLevel') {
    if (pre.add_prefix_space) invalid(source, 'pre_tokenizer.add_prefix_space = true is not supported; set it to false')
    return { pattern: GPT2_PATTERN }
  }
  if (pre?.type === 'Sequence' && Array.isArray(pre.pretokenizers) && pre.pretokenizers.length === 2) {
    const [split, byteLevel] = pre.pretokenizers
    if (split?.type === 'Split' && (split.behavior !== 'Isolated' || split.invert))
      invalid(source, 'pre_tokenizer Split: only behavior "Isolated" without invert is supported')
    const plainByteLevel = byteLevel?.type === 'ByteLevel' && !byteLevel.add_prefix_space
    if (split?.type === 'Split' && split.pattern?.Regex && plainByteLevel)
      return {
        pattern: split.pattern.Regex as string,
        ...(byteLevel.use_regex !== false ? { byteLevelRegex: true } : {}),
      }
  }
  return invalid(
    source,
    `pre_tokenizer ${JSON.stringify(pre?.type)} is not supported; ` +
      `expected ByteLevel, or a Sequence of a Split regex and ByteLevel`,
  )
}
