/** @module File-tree helpers: make a tree read-only, and remove a tree even when it is read-only. */
import { chmodSync, lstatSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** Files become 0444 and directories 0555, children before parents. */
export function makeReadOnly(path: string): void {
  const st = lstatSync(path)
  if (st.isSymbolicLink()) return
  if (st.isDirectory()) {
    for (const e of readdirSync(path)) makeReadOnly(join(path, e))
    chmodSync(path, 0o555)
  } else {
    chmodSync(path, 0o444)
  }
}

// Without write permission on a directory its entries cannot be unlinked (unless root).
function makeWritable(path: string): void {
  let st
  try {
    st = lstatSync(path)
  } catch {
    return
  }
  if (!st.isDirectory()) return
  chmodSync(path, 0o755)
  for (const e of readdirSync(path)) makeWritable(join(path, e))
}

/** `rm -rf` that also removes read-only mounts. */
export function removeTree(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true })
  } catch {
    makeWritable(path)
    rmSync(path, { recursive: true, force: true })
  }
}
