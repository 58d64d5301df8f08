/**
 * @module The manifest of one artifact version: its files, metadata, config and
 * lineage. Written once at `artifacts/<name>/versions/<n>.json` and never modified.
 */
import { z } from 'zod'
import { FinestoreError } from './errors.js'
import { checkFilePath, formatRef } from './names.js'

const HASH = /^[0-9a-f]{64}$/

/** One file of a version: the blob holding its bytes and their count. */
export const FileEntry = z.strictObject({
  blob: z.string().regex(HASH, 'a 64-digit lowercase hex sha256'),
  size: z.number().int().nonnegative(),
})
export type FileEntry = z.output<typeof FileEntry>

/** An artifact version this one was derived from. */
export const LineageEntry = z.strictObject({
  artifact: z.string().min(1),
  version: z.number().int().positive(),
})
export type LineageEntry = z.output<typeof LineageEntry>

/** Free-form JSON object (metadata, config). */
export const JsonObject = z.record(z.string(), z.json())
export type JsonObject = z.output<typeof JsonObject>

export const MANIFEST_FORMAT = 1

export const Manifest = z.strictObject({
  /** Layout version of this file, so that later formats can be told apart. */
  format: z.literal(MANIFEST_FORMAT),
  artifact: z.string().min(1),
  /** Versions count 1, 2, 3, … per artifact; the number is the commit slot. */
  version: z.number().int().positive(),
  /** The version this one was built on (HEAD when its transaction began), or null for the first. */
  parent: z.number().int().positive().nullable(),
  /** Selects the metadata schema; defaults to the artifact name's first segment (`datasets`). */
  kind: z.string().min(1),
  createdAt: z.iso.datetime(),
  files: z.record(z.string(), FileEntry),
  metadata: JsonObject,
  config: JsonObject,
  lineage: z.array(LineageEntry),
  message: z.string().optional(),
})
export type Manifest = z.output<typeof Manifest>

/** Stable text form: keys of `files` sorted so that equal manifests are equal bytes. */
export function serializeManifest(m: Manifest): string {
  const files: Record<string, FileEntry> = {}
  for (const k of Object.keys(m.files).sort()) files[k] = m.files[k]!
  return `${JSON.stringify({ ...m, files }, null, 2)}\n`
}

/**
 * Parses and validates a manifest read from `path`. A broken manifest affects
 * only its own version, so the error names the file and what is wrong with it.
 */
export function parseManifest(text: string, path: string, expect?: { artifact: string; version: number }): Manifest {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (err) {
    throw new FinestoreError(
      'MANIFEST_INVALID',
      `manifest ${path} is not valid JSON (${(err as Error).message}); ` +
        `this version is unreadable, other versions are not affected. ` +
        'Restore the file from a copy of the store or delete it, then run "finestore gc".',
      false,
      { cause: err },
    )
  }
  const parsed = Manifest.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    const field = issue.path.length ? issue.path.join('.') : '(root)'
    throw new FinestoreError(
      'MANIFEST_INVALID',
      `manifest ${path}: field "${field}": ${issue.message}; this ` +
        `version is unreadable, other versions are not affected. ` +
        'Restore the file from a copy of the store or delete it.',
    )
  }
  const m = parsed.data
  if (expect && (m.artifact !== expect.artifact || m.version !== expect.version)) {
    throw new FinestoreError(
      'MANIFEST_INVALID',
      `manifest ${path} says it is ${m.artifact}@${m.version} but sits ` +
        `at the place of ${expect.artifact}@${expect.version}; it was ` +
        `copied or renamed by hand. Move it back or delete it.`,
    )
  }
  // Anyone who can write to the store can write a manifest: its paths pass the rule they passed when staged, before
  // any caller joins one to a folder. The keys of the raw JSON, since zod drops a "__proto__" key without a word.
  for (const file of Object.keys((raw as { files: object }).files)) {
    try {
      checkFilePath(file)
    } catch (err) {
      throw new FinestoreError(
        'MANIFEST_INVALID',
        `manifest ${path} (${formatRef(m.artifact, m.version)}): file entry ${JSON.stringify(file)}: ` +
          `${(err as Error).message}. This version is unreadable, other versions are not affected; ` +
          'restore the file from a copy of the store or delete it.',
        false,
        { cause: err },
      )
    }
  }
  return m
}
