/**
 * @module The classifier's file format (`.mqc`), little-endian:
 *
 * ```
 * "marin-qc" (8 bytes) | format version u32 (1) | header length u32 | header JSON
 * | vocabulary: words then labels, UTF-8, joined by "\n" | zero padding to 4 bytes
 * | stored row indices u32 × storedRows | stored input rows f32 × storedRows × dim
 * | output rows f32 × nlabels × dim | SHA-256 of everything before it (32 bytes)
 * ```
 *
 * The header holds the hyper-parameters, `nwords`, `nlabels`, `storedRows` and `vocabBytes`.
 * Stored row indices are strictly ascending. Input rows training never changed are not stored:
 * they are drawn from the seed when read (`init-values.ts`, `input-rows.ts`), so a model with 2M
 * hash buckets is as small as what it learnt and loading it draws nothing; `loadClassifier`
 * keeps views of the file's bytes rather than copies. A model file may be someone else's: every
 * size is checked against the file's length and against limits before anything is allocated,
 * the checksum before anything is used, and each stored row's index before it is placed.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { DatakitError } from '../errors.js'
import { atomicWrite } from '../internal/atomic-write.js'
import { type ClassifierArgs, Classifier, resolveArgs } from './classifier.js'
import { InputRows } from './input-rows.js'

const MAGIC = Buffer.from('marin-qc', 'latin1')
export const MODEL_FORMAT_VERSION = 1
const MAX_HEADER = 1 << 20
/** Most stored input elements a loaded model may have: 2^30 floats (4 GiB). */
export const MAX_INPUT_FLOATS = 2 ** 30

type Header = {
  args: ClassifierArgs
  nwords: number
  nlabels: number
  storedRows: number
  vocabBytes: number
}

/** The bytes of `classifier`'s model file: its stored input rows (those training changed) and the rest. */
export function encodeClassifier(classifier: Classifier): Buffer {
  const { args, words, labels, input, output } = classifier
  const rows = input.ids
  const vocab = Buffer.from([...words, ...labels].join('\n'), 'utf8')
  const header: Header = {
    args,
    nwords: words.length,
    nlabels: labels.length,
    storedRows: rows.length,
    vocabBytes: vocab.length,
  }
  const head = Buffer.from(JSON.stringify(header), 'utf8')
  const pad = (4 - ((16 + head.length + vocab.length) % 4)) % 4
  const dim = args.dim
  const body = Buffer.alloc(rows.length * 4 + rows.length * dim * 4 + labels.length * dim * 4)
  const idx = new Uint32Array(body.buffer, body.byteOffset, rows.length)
  idx.set(rows)
  new Float32Array(body.buffer, body.byteOffset + rows.length * 4, rows.length * dim).set(input.values)
  new Float32Array(body.buffer, body.byteOffset + rows.length * 4 * (1 + dim), labels.length * dim).set(output)
  const fixed = Buffer.alloc(16)
  MAGIC.copy(fixed, 0)
  fixed.writeUInt32LE(MODEL_FORMAT_VERSION, 8)
  fixed.writeUInt32LE(head.length, 12)
  const parts = [fixed, head, vocab, Buffer.alloc(pad), body]
  const sum = createHash('sha256')
  for (const p of parts) sum.update(p)
  return Buffer.concat([...parts, sum.digest()])
}

/** Writes `classifier` to `path` atomically (a reader never sees half a file). */
export async function saveClassifier(path: string, classifier: Classifier): Promise<void> {
  await atomicWrite(path, encodeClassifier(classifier))
}

/** Reads a model file written by `saveClassifier`; a damaged or foreign file is an error naming `path`. */
export async function loadClassifier(path: string): Promise<Classifier> {
  let bytes: Buffer
  try {
    bytes = await readFile(path)
  } catch (err) {
    throw new DatakitError('SOURCE_NOT_FOUND', `classifier model ${path}: cannot be read (${(err as Error).message})`, {
      cause: err,
    })
  }
  // the bytes are this call's own: the model views them instead of copying
  return decode(bytes, path, true)
}

/** Parses model-file bytes (copied: `bytes` may change afterwards); `name` (a path or ref) is what errors name. */
export function decodeClassifier(bytes: Uint8Array, name: string): Classifier {
  return decode(bytes, name, false)
}

function decode(bytes: Uint8Array, name: string, view: boolean): Classifier {
  const bad = (what: string): never => {
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `classifier model ${name}: ${what}; it is not a whole model file written by saveClassifier, train it again`,
    )
  }
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (buf.length < 16 + 32 || !buf.subarray(0, 8).equals(MAGIC)) bad('no "marin-qc" header (wrong file type)')
  const version = buf.readUInt32LE(8)
  if (version !== MODEL_FORMAT_VERSION) bad(`format version ${version}, this code reads ${MODEL_FORMAT_VERSION}`)
  const headLen = buf.readUInt32LE(12)
  if (headLen > MAX_HEADER || 16 + headLen + 32 > buf.length) bad(`header length ${headLen} runs past the file`)
  let h: Header
  try {
    h = JSON.parse(buf.toString('utf8', 16, 16 + headLen)) as Header
  } catch {
    return bad('header is not JSON')
  }
  let args: ClassifierArgs
  try {
    args = resolveArgs(h.args)
  } catch (err) {
    return bad(`bad hyper-parameters (${(err as Error).message})`)
  }
  const count = (v: unknown, what: string, max: number): number =>
    Number.isInteger(v) && (v as number) >= 0 && (v as number) <= max ? (v as number) : bad(`${what} is ${v}`)
  const vocabBytes = count(h.vocabBytes, 'vocabBytes', buf.length)
  // every vocabulary entry takes at least one byte and a separator: this bounds nwords by the file
  const nwords = count(h.nwords, 'nwords', vocabBytes + 1)
  const nlabels = count(h.nlabels, 'nlabels', vocabBytes + 1 - nwords)
  if (nlabels === 0) bad('it has no label')
  const nin = nwords + args.bucket
  const dim = args.dim
  const storedRows = count(h.storedRows, 'storedRows', nin)
  if (storedRows * dim > MAX_INPUT_FLOATS)
    bad(`${storedRows} × ${dim} stored input vectors exceed ${MAX_INPUT_FLOATS} floats`)
  const vocabAt = 16 + headLen
  const rowsAt = vocabAt + vocabBytes + ((4 - ((vocabAt + vocabBytes) % 4)) % 4)
  const end = rowsAt + storedRows * 4 * (1 + dim) + nlabels * dim * 4
  if (end + 32 !== buf.length) bad(`it is ${buf.length} bytes where its header says ${end + 32} (truncated?)`)
  const sum = createHash('sha256').update(buf.subarray(0, end)).digest()
  if (!sum.equals(buf.subarray(end))) bad('checksum mismatch (the file is damaged)')

  const vocab = buf.toString('utf8', vocabAt, vocabAt + vocabBytes).split('\n')
  if (vocab.length !== nwords + nlabels) bad(`vocabulary has ${vocab.length} entries, header says ${nwords + nlabels}`)
  // a view where the bytes allow one (rows start 4-byte aligned in the file), else a copy
  const floats = (at: number, n: number): Float32Array =>
    view && (buf.byteOffset + at) % 4 === 0
      ? new Float32Array(buf.buffer, buf.byteOffset + at, n)
      : new Float32Array(buf.buffer.slice(buf.byteOffset + at, buf.byteOffset + at + n * 4))
  const idx =
    view && (buf.byteOffset + rowsAt) % 4 === 0
      ? new Uint32Array(buf.buffer, buf.byteOffset + rowsAt, storedRows)
      : new Uint32Array(buf.buffer.slice(buf.byteOffset + rowsAt, buf.byteOffset + rowsAt + storedRows * 4))
  for (let k = 0; k < storedRows; k++) {
    const r = idx[k]!
    if (r >= nin) bad(`stored row ${r} is past the ${nin} input rows`)
    if (k > 0 && r <= idx[k - 1]!) bad(`stored row ${r} follows row ${idx[k - 1]} (rows must ascend)`)
  }
  const vecAt = rowsAt + storedRows * 4
  const input = new InputRows(nin, dim, args.seed, idx, floats(vecAt, storedRows * dim))
  const output = floats(vecAt + storedRows * dim * 4, nlabels * dim)
  return new Classifier(args, vocab.slice(0, nwords), vocab.slice(nwords), input, output)
}
