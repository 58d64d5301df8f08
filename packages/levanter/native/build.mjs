/**
 * Builds levanter's native GEMM (native/gemm.cc) with node-gyp and the machine's compiler at
 * install. It never fails the install: without x86-64, node-gyp, headers or a compiler it prints
 * one line and exits 0, and levanter keeps its WebAssembly GEMM (src/kernels/native-gemm.ts).
 * node-gyp is the one the package manager puts on PATH for install scripts, else npm's own.
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const skip = (why) => {
  console.log(`levanter: native GEMM not built (${why}); the WebAssembly GEMM will be used`)
  process.exit(0)
}
if (process.env.LEVANTER_NATIVE_SKIP_BUILD === '1') skip('LEVANTER_NATIVE_SKIP_BUILD=1')
if (process.arch !== 'x64') skip(`needs x86-64, this is ${process.arch}`)

// Local headers (node's own install prefix) unless told otherwise: no download at install.
const prefix = join(dirname(process.execPath), '..')
const env = { ...process.env }
if (!env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node_api.h')))
  env.npm_config_nodedir = prefix
const npmGyp = join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin')
const candidates = [
  ['node-gyp', []],
  [process.execPath, [join(npmGyp, 'node-gyp.js')]],
]
let result
let gyp
for (const [cmd, pre] of candidates) {
  if (cmd === process.execPath && !existsSync(pre[0])) continue
  result = spawnSync(cmd, [...pre, 'rebuild', '--release'], { cwd: here, env, encoding: 'utf8' })
  if (!result.error) {
    gyp = [cmd, pre]
    break
  }
}
if (!result || result.error) skip('node-gyp not found')
// a compiler without -mavx512bf16, then one without -mavx512f: build without the bf16 kernel, then the AVX2 ones alone
for (const [flags, what] of [
  [['-Dbf16=0'], 'its bf16 kernel'],
  [['-Davx512=0', '-Dbf16=0'], 'its AVX-512 and bf16 kernels'],
]) {
  if (result.status === 0) break
  const [cmd, pre] = gyp
  const again = spawnSync(cmd, [...pre, 'rebuild', '--release', '--', ...flags], { cwd: here, env, encoding: 'utf8' })
  if (again.status === 0) console.log(`levanter: native GEMM built without ${what} (the compiler refused it)`)
  result = again.status === 0 ? again : result
}
if (result.status !== 0) {
  const lines = `${result.stdout}\n${result.stderr}`.split('\n').filter((l) => /error/i.test(l))
  skip(`node-gyp failed: ${(lines[0] ?? `exit ${result.status}`).trim().slice(0, 200)}`)
}
console.log('levanter: native GEMM built (native/build/Release/levanter_gemm.node)')
