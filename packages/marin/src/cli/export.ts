/**
 * @module `marin export ARTIFACT DIR`: the files of an artifact version (a model such as
 * `models/gpt-brown@1`, a dataset, a token cache) copied out of the prefix's store into a folder,
 * each verified against its hash, for tools that read plain files. A version whose paths would leave the folder is
 * refused before anything is written.
 */
import { existsSync, readdirSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Command } from 'commander'
import { openStore, storeUrl } from '@marin/finestore'
import { MarinError } from '../errors.js'
import { prefixOf, type CliIo, type Run } from './io.js'

export function exportCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .argument('<artifact>', 'an artifact version: NAME@VERSION (or NAME for its HEAD), e.g. models/gpt-brown@1')
    .argument('<dir>', 'a folder that does not exist yet, or an empty one')
    .action((artifact: string, dir: string) =>
      run(async () => {
        const dest = resolve(dir)
        if (existsSync(dest) && readdirSync(dest).length > 0)
          throw new MarinError('BAD_USAGE', `marin export: ${dest} is not empty; name a new or empty folder`)
        const store = await openStore({ url: storeUrl(prefixOf(io)) })
        try {
          const view = await store.open(artifact)
          // finestore checks every path of the version (a manifest may come from anyone sharing the store) before
          // writing the first file, and keeps each inside dest.
          const files = await view.materialize(dest)
          io.out(`${files.length} files of ${view.ref} → ${dest}`)
          for (const f of files) io.out(`  ${f}`)
          return 0
        } finally {
          store.close()
        }
      }),
    )
}
