/** @module One walk over `artifacts/`: every manifest, tag and HEAD storage holds. */
import type { Storage } from '@marin/rigging'
import { ARTIFACTS_PREFIX, parseArtifactPath } from './layout.js'

export type ArtifactScan = {
  readonly manifests: { artifact: string; version: number; path: string }[]
  readonly tags: { artifact: string; tag: string; path: string }[]
  /** Every artifact that has at least one manifest or a HEAD. */
  readonly artifacts: Set<string>
}

export async function scanArtifacts(storage: Storage, prefix = ''): Promise<ArtifactScan> {
  const scan: ArtifactScan = { manifests: [], tags: [], artifacts: new Set() }
  for await (const info of storage.list(ARTIFACTS_PREFIX + prefix)) {
    const o = parseArtifactPath(info.path)
    if (!o) continue
    if (o.type === 'manifest') scan.manifests.push({ artifact: o.artifact, version: o.version, path: info.path })
    else if (o.type === 'tag') scan.tags.push({ artifact: o.artifact, tag: o.tag, path: info.path })
    scan.artifacts.add(o.artifact)
  }
  return scan
}
