/**
 * @module HEAD and tags: small `{"version": n}` objects moved by compare-and-swap.
 *
 * The commit point of a version is the conditional create of its manifest
 * (`versions/<n>.json`, `ifAbsent`): of two writers that built on the same
 * HEAD exactly one creates slot n. HEAD is then advanced by compare-and-swap
 * on its generation and only ever forward, so it always names a complete
 * version. If a writer dies between the two steps, HEAD lags by one; every
 * reader that resolves HEAD checks the next slot and rolls HEAD forward.
 */
import type { Storage } from '@marin/rigging'
import { z } from 'zod'
import { ConflictError, FinestoreError } from './errors.js'
import { isConditionFailed, isNotFound } from './internal/storage-errors.js'
import { headPath, manifestPath, tagPath, tagsPrefix } from './layout.js'

const Pointer = z.strictObject({ version: z.number().int().positive() })

export type PointerRead = { readonly version: number; readonly generation: string }

/** Reads a HEAD or tag object; `undefined` when absent. */
export async function readPointer(storage: Storage, path: string): Promise<PointerRead | undefined> {
  for (;;) {
    const info = await storage.stat(path)
    if (!info) return undefined
    let text: string
    try {
      text = await storage.readText(path)
    } catch (err) {
      if (isNotFound(err)) continue
      throw err
    }
    const after = await storage.stat(path)
    // Moved between stat and read: read again so that version and generation belong together.
    if (!after || after.generation !== info.generation) continue
    let parsed: z.output<typeof Pointer>
    try {
      parsed = Pointer.parse(JSON.parse(text))
    } catch (err) {
      throw new FinestoreError(
        'MANIFEST_INVALID',
        `${path} is not {"version": <positive integer>}: ` +
          `${(err as Error).message.split('\n')[0]}; rewrite it or delete ` +
          `it (HEAD is recomputed from versions/)`,
        false,
        { cause: err },
      )
    }
    return { version: parsed.version, generation: info.generation }
  }
}

const pointerText = (version: number): string => `${JSON.stringify({ version })}\n`

/** Moves HEAD to `version` unless it is already there or beyond. */
export async function advanceHead(storage: Storage, artifact: string, version: number): Promise<void> {
  const path = headPath(artifact)
  for (;;) {
    const cur = await readPointer(storage, path)
    if (cur && cur.version >= version) return
    try {
      await storage.write(path, pointerText(version), {
        condition: cur ? { ifGeneration: cur.generation } : { ifAbsent: true },
      })
      return
    } catch (err) {
      if (!isConditionFailed(err)) throw err
      // Someone else moved HEAD: look again, it may already be past us.
    }
  }
}

/**
 * The artifact's current version, or `undefined` when it has none. Rolls a
 * lagging HEAD forward (a writer died between its manifest and HEAD).
 */
export async function resolveHead(storage: Storage, artifact: string): Promise<number | undefined> {
  const cur = await readPointer(storage, headPath(artifact))
  let v = cur?.version ?? 0
  while (await storage.exists(manifestPath(artifact, v + 1))) v++
  if (v === 0) return undefined
  if (v !== cur?.version) await advanceHead(storage, artifact, v)
  return v
}

/** Reads a tag; `undefined` when it does not exist. */
export async function readTag(storage: Storage, artifact: string, tag: string): Promise<number | undefined> {
  return (await readPointer(storage, tagPath(artifact, tag)))?.version
}

/**
 * Points `tag` at `version` by compare-and-swap. With `expect` (a version, or
 * `null` for "tag must not exist") the move happens only if the tag is there now;
 * otherwise `ConflictError`. Without it the tag moves from whatever it was,
 * still atomically.
 */
export async function moveTag(
  storage: Storage,
  artifact: string,
  tag: string,
  version: number,
  expect?: number | null,
): Promise<void> {
  const path = tagPath(artifact, tag)
  const cur = await readPointer(storage, path)
  if (expect !== undefined && (cur?.version ?? null) !== expect) {
    throw new ConflictError(
      artifact,
      `tag ${artifact}@${tag} is at ${cur?.version ?? '(absent)'}, not ` +
        `${expect ?? '(absent)'}; re-read it and retry`,
    )
  }
  try {
    await storage.write(path, pointerText(version), {
      condition: cur ? { ifGeneration: cur.generation } : { ifAbsent: true },
    })
  } catch (err) {
    if (!isConditionFailed(err)) throw err
    throw new ConflictError(
      artifact,
      `tag ${artifact}@${tag} was moved by another writer at the same time; re-read it and retry`,
      { cause: err },
    )
  }
}

/** Removes a tag (no error when it does not exist). */
export async function deleteTag(storage: Storage, artifact: string, tag: string): Promise<void> {
  await storage.delete(tagPath(artifact, tag))
}

/** Every tag of an artifact with the version it names. */
export async function listTags(storage: Storage, artifact: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  const prefix = tagsPrefix(artifact)
  for await (const info of storage.list(prefix, { recursive: false })) {
    if (!info.path.endsWith('.json')) continue
    const tag = info.path.slice(prefix.length, -'.json'.length)
    const p = await readPointer(storage, info.path)
    if (p) out[tag] = p.version
  }
  return out
}
