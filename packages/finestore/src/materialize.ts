/**
 * @module Writing the files of a version into a local folder: the one place where paths from a manifest become paths
 * on disk. A manifest is written by whoever can write to the store, so every target is checked before the first byte
 * is written: the paths fit in one folder (`checkFileSet`), each lands inside the folder once resolved, and none walks
 * through a symbolic link or onto something that exists. A failure after that (a damaged blob) removes what was
 * written, so the folder ends up with the whole version or none of it.
 */
import { lstat, mkdir, realpath, rm, rmdir, stat } from 'node:fs/promises'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { FinestoreError } from './errors.js'
import { checkFileSet } from './names.js'

export type MaterializeOptions = {
  /**
   * A folder that must hold `dir`, such as a task's folder when `dir` is a mount inside it: the part of `dir` below
   * it is checked like the paths of the version (no symbolic links, no files where folders go). @default dir
   */
  readonly within?: string
}

/** What materializing needs from a view (see `ArtifactView.materialize`). */
export type MaterializeSource = {
  readonly ref: string
  files(): string[]
  copyTo(path: string, dest: string): Promise<void>
}

type Made = { readonly path: string; readonly dir: boolean }

/** Writes every file of `src` under `dir`; returns the paths written (those of the version, sorted). */
export async function materializeFiles(
  src: MaterializeSource,
  dir: string,
  opts: MaterializeOptions = {},
): Promise<string[]> {
  const files = src.files()
  const root = resolve(opts.within ?? dir)
  const target = resolve(dir)
  const base = relative(root, target)
  if (base === '..' || base.startsWith(`..${sep}`) || isAbsolute(base)) {
    throw new FinestoreError('INVALID_INPUT', `cannot write ${src.ref} to ${target}: it is not inside ${root}`)
  }
  const refused = (what: string) =>
    new FinestoreError('INVALID_PATH', `${src.ref}: ${what}; nothing was written to ${target}`)
  try {
    checkFileSet(files, src.ref)
  } catch (err) {
    throw new FinestoreError('INVALID_PATH', `${(err as Error).message}; nothing was written to ${target}`, false, {
      cause: err,
    })
  }
  const rootStat = await stat(root).catch(() => undefined)
  if (rootStat !== undefined && !rootStat.isDirectory()) throw refused(`${root} exists and is not a folder`)
  const prefix = base === '' ? [] : base.split(sep)
  const check = new Checker(root, refused)
  await check.walk(prefix, false)
  for (const f of files) {
    // checkFileSet refuses "..", "/" and "\", so this holds today; it keeps the promise whatever the rule becomes.
    const rel = relative(target, resolve(target, f))
    if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel))
      throw refused(`file ${JSON.stringify(f)} would land outside`)
    await check.walk([...prefix, ...f.split('/')], true)
  }

  const made: Made[] = []
  try {
    const realRoot = await makeRoot(root, made)
    for (const f of files) {
      const segments = [...prefix, ...f.split('/')]
      const parent = segments.slice(0, -1)
      await makeDirs(root, parent, made)
      // A link put in by someone else since the check still cannot take the file out of the folder.
      const real = await realpath(join(root, ...parent))
      if (real !== join(realRoot, ...parent)) throw refused(`the folder of ${JSON.stringify(f)} turned into ${real}`)
      const dest = join(root, ...segments)
      made.push({ path: dest, dir: false })
      await src.copyTo(f, dest)
    }
    if (files.length === 0) await makeDirs(root, prefix, made)
  } catch (err) {
    for (const m of made.reverse()) await (m.dir ? rmdir(m.path) : rm(m.path, { force: true })).catch(() => {})
    throw err
  }
  return files
}

/** Looks at what exists below `root` without writing anything, each folder once. */
class Checker {
  // Folders found to exist; a path below one found missing is not looked at again.
  readonly #dirs = new Set<string>()
  readonly #missing = new Set<string>()

  constructor(
    private readonly root: string,
    private readonly refused: (what: string) => FinestoreError,
  ) {}

  /** Refuses links and non-folders on the way to `segments`, and (if `leaf`) a last name that is taken. */
  async walk(segments: readonly string[], leaf: boolean): Promise<void> {
    let path = this.root
    for (let i = 0; i < segments.length; i++) {
      path = join(path, segments[i]!)
      const last = leaf && i === segments.length - 1
      if (this.#missing.has(path)) return
      if (this.#dirs.has(path)) {
        if (last) throw this.refused(`${path} already exists; write into a new or empty folder`)
        continue
      }
      const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined
        throw err
      })
      if (st === undefined) {
        this.#missing.add(path)
        return
      }
      if (st.isSymbolicLink()) {
        throw this.refused(`${path} is a symbolic link; files are written only into real folders, so remove the link`)
      }
      if (last) throw this.refused(`${path} already exists; write into a new or empty folder`)
      if (!st.isDirectory()) throw this.refused(`${path} exists and is not a folder`)
      this.#dirs.add(path)
    }
  }
}

/** Creates `root` and any missing folders above it, noting each; returns the real path of `root`. */
async function makeRoot(root: string, made: Made[]): Promise<string> {
  const missing: string[] = []
  for (let p = root; !(await stat(p).catch(() => undefined)); p = dirname(p)) missing.unshift(p)
  for (const p of missing) {
    await mkdir(p, { recursive: true })
    made.push({ path: p, dir: true })
  }
  return realpath(root)
}

/** Creates the folders of `segments` below `root` one at a time, noting each one it made. */
async function makeDirs(root: string, segments: readonly string[], made: Made[]): Promise<void> {
  let path = root
  for (const s of segments) {
    path = join(path, s)
    try {
      await mkdir(path)
      made.push({ path, dir: true })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}
