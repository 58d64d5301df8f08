/**
 * @module The storage of a prefix as the executor opens it, in the driver and in each step
 * process: status files, logs, history and records are its owner's alone (0600 files and
 * 0700 folders on a local prefix), and every text written holds no value a `SecretStore` of
 * that process handed out, so a step that fails with a secret in its error persists it nowhere.
 */
import { openStorage, scrubbingStorage, type Storage } from '@marin/rigging'

/** Opens `prefix` (a storage URL or local path) for the executor's own files. */
export async function openPrefixStorage(prefix: string): Promise<Storage> {
  return scrubbingStorage(await openStorage(prefix, { private: true }))
}
