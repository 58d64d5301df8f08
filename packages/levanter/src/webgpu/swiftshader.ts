/**
 * @module SwiftShader (a software Vulkan driver) and the Vulkan loader, from the registry: the
 * `@sparticuz/chromium` package ships them as `bin/swiftshader.tar.br` (libvk_swiftshader.so,
 * libvulkan.so.1, vk_swiftshader_icd.json). Unpacked once per version into the temp folder.
 */
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { LevanterError } from '../errors.js'

const PACKAGE = '@sparticuz/chromium'
const FILES = ['libvk_swiftshader.so', 'libvulkan.so.1', 'vk_swiftshader_icd.json'] as const

/** Where the unpacked driver lies. */
export type SwiftShader = {
  readonly dir: string
  /** The Vulkan loader (libvulkan.so.1) shipped beside the driver. */
  readonly loader: string
  /** The ICD manifest to name in `VK_ICD_FILENAMES`. */
  readonly icd: string
}

/** The regular files of a (ustar/GNU) tar archive, by name. */
export function untar(tar: Buffer): Map<string, Buffer> {
  const out = new Map<string, Buffer>()
  for (let o = 0; o + 512 <= tar.length; ) {
    const header = tar.subarray(o, o + 512)
    if (header.every((b) => b === 0)) break
    const field = (from: number, len: number) =>
      header
        .subarray(from, from + len)
        .toString('latin1')
        .replace(/\0.*$/s, '')
    const size = parseInt(field(124, 12).trim() || '0', 8)
    const type = field(156, 1)
    const prefix = field(345, 155)
    const name = (prefix ? `${prefix}/` : '') + field(0, 100)
    if (!Number.isFinite(size)) throw new Error(`bad tar header at byte ${o}`)
    if (type === '0' || type === '') out.set(path.posix.basename(name), tar.subarray(o + 512, o + 512 + size))
    o += 512 + Math.ceil(size / 512) * 512
  }
  return out
}

/** The archive inside the installed package, or a clear error saying how to get it. */
export function swiftShaderArchive(): { archive: string; version: string } {
  const require = createRequire(import.meta.url)
  let pkg: string
  try {
    // the package exports no ./package.json: walk up from its entry point
    let dir = path.dirname(require.resolve(PACKAGE))
    while (!fs.existsSync(path.join(dir, 'package.json')) || !fs.existsSync(path.join(dir, 'bin')))
      if (dir === (dir = path.dirname(dir))) throw new Error(`no package root above ${require.resolve(PACKAGE)}`)
    pkg = path.join(dir, 'package.json')
  } catch (err) {
    throw new LevanterError(
      'BACKEND_UNAVAILABLE',
      `SwiftShader: the package ${PACKAGE} (a dev dependency of @marin/levanter) is not installed; ` +
        `run pnpm install in the repository, or use a machine with a Vulkan GPU driver`,
      { cause: err },
    )
  }
  const version = (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string }).version
  return { archive: path.join(path.dirname(pkg), 'bin', 'swiftshader.tar.br'), version }
}

/**
 * Unpack SwiftShader into `<cacheDir>/levanter-swiftshader-<version>` (once; a finished folder is
 * reused, a half-written one never seen: files go to a private folder that is renamed into place).
 * @param cacheDir @default os.tmpdir()
 */
export function unpackSwiftShader(cacheDir: string = os.tmpdir()): SwiftShader {
  const { archive, version } = swiftShaderArchive()
  const dir = path.join(cacheDir, `levanter-swiftshader-${version}`)
  const found = (): SwiftShader => ({
    dir,
    loader: path.join(dir, 'libvulkan.so.1'),
    icd: path.join(dir, 'vk_swiftshader_icd.json'),
  })
  if (FILES.every((f) => fs.existsSync(path.join(dir, f)))) return found()
  const files = untar(zlib.brotliDecompressSync(fs.readFileSync(archive)))
  const missing = FILES.filter((f) => !files.has(f))
  if (missing.length)
    throw new LevanterError(
      'BACKEND_UNAVAILABLE',
      `SwiftShader: ${archive} lacks ${missing.join(', ')}; reinstall ${PACKAGE}`,
    )
  const tmp = fs.mkdtempSync(path.join(cacheDir, `.levanter-swiftshader-${version}-`))
  try {
    for (const f of FILES)
      fs.writeFileSync(path.join(tmp, f), files.get(f)!, {
        mode: f.endsWith('.so') || f.includes('.so.') ? 0o755 : 0o644,
      })
    try {
      fs.renameSync(tmp, dir)
    } catch (err) {
      // another process won the race: its folder is complete
      if (!FILES.every((f) => fs.existsSync(path.join(dir, f)))) throw err
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  return found()
}
