/** @module Loads an optional peer dependency, or says exactly which package to add. */
import { RiggingError } from '../errors.js'

/**
 * `import(pkg)`, turning "not installed" into STORAGE_ADAPTER_MISSING that names
 * the package and the command to add it. The specifier is a variable so that
 * type-checking does not need the optional package installed.
 */
export async function importPeer<T>(pkg: string, url: string): Promise<T> {
  try {
    return (await import(pkg)) as T
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      String((err as Error).message).includes(pkg)
    ) {
      throw new RiggingError(
        'STORAGE_ADAPTER_MISSING',
        `storage URL ${url} needs the optional package ${pkg}, which is ` +
          `not installed; add it with \`pnpm add ${pkg}\` (or \`npm ` +
          `install ${pkg}\`)`,
        { cause: err },
      )
    }
    throw err
  }
}
