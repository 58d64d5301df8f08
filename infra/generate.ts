/**
 * Writes infra/ from its one source, packages/iris/src/kube-manifests.ts:
 *   pnpm exec tsx infra/generate.ts
 * and removes the Kubernetes manifests and systemd units that source no longer makes.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { infraFiles } from '../packages/iris/src/kube-manifests.js'

const here = import.meta.dirname
const files = infraFiles()
for (const dir of ['k8s', 'systemd'])
  for (const f of readdirSync(join(here, dir))) if (!(`${dir}/${f}` in files)) rmSync(join(here, dir, f))
for (const [path, text] of Object.entries(files)) {
  mkdirSync(dirname(join(here, path)), { recursive: true })
  writeFileSync(join(here, path), text)
}
console.log(`wrote ${Object.keys(files).length} files under infra/`)
