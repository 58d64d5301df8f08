/**
 * @module A storage whose text writes are scrubbed of secret values: the one place where the
 * status files, logs and records a program persists lose every value a `SecretStore` of that
 * process handed out, whoever formatted them.
 */
import { scrubSecretValues } from '../redaction.js'
import type { Storage } from './types.js'

/**
 * `storage` with every registered secret value (see `registerSecretValue`) replaced by
 * `[REDACTED]` in each text (`string`) written with `write`. Bytes (`Uint8Array`) and
 * streams are written as they are: they may be anything, such as a checkpoint, where
 * rewriting bytes would corrupt data. Everything else (reads, conditions, `url`,
 * `localPath`, the class) is the storage underneath.
 * @example
 * const storage = scrubbingStorage(await openStorage(prefix, { private: true }))
 * await storage.write('step/.executor_info', JSON.stringify(info)) // no secret value in it
 */
export function scrubbingStorage<S extends Storage>(storage: S): S {
  const write: Storage['write'] = (path, data, opts) =>
    storage.write(path, typeof data === 'string' ? scrubSecretValues(data) : data, opts)
  return new Proxy(storage, {
    get(target, prop) {
      if (prop === 'write') return write
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}
