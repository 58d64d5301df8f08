/**
 * @module Who is calling the controller. The cluster token (the admin credential:
 * clients, drivers and workers) lives in a 0600 file beside the state, or wherever
 * the operator puts it; each job's tasks get a token that names their job and is
 * signed with a key derived from the cluster token, so the controller checks it
 * without storing it, and it opens that job (and the children it submits) only.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import {
  chmodSync,
  closeSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { MARIN_LAYOUT } from '@marin/rigging'
import { IrisError } from './errors.js'

/** Whom a call comes from. */
export type Principal = { readonly kind: 'admin' } | { readonly kind: 'job'; readonly jobId: string }

export const ADMIN: Principal = Object.freeze({ kind: 'admin' })

const JOB_TOKEN_PREFIX = 'iris-job.'
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest()

/** Checks bearer tokens against the cluster token and mints and checks job tokens. */
export class ClusterAuth {
  private readonly adminDigest: Buffer
  private readonly jobKey: Buffer

  constructor(clusterToken: string) {
    if (clusterToken === '' || /\s/.test(clusterToken))
      throw new IrisError(
        'BAD_REQUEST',
        'the cluster token must be a non-empty string without whitespace; check the token file',
      )
    this.adminDigest = sha256(clusterToken)
    this.jobKey = createHash('sha256').update('iris job tokens\0').update(clusterToken).digest()
  }

  /** The token the tasks of `jobId` get as IRIS_TOKEN. The same job always gets the same token. */
  jobToken(jobId: string): string {
    return `${JOB_TOKEN_PREFIX}${jobId}.${this.mac(jobId)}`
  }

  /** The caller behind an `authorization` header, or a reason the call is refused. */
  authenticate(header: unknown): Principal | { refused: string } {
    if (header === undefined) return { refused: 'the call carries no token' }
    if (typeof header !== 'string' || !header.startsWith('Bearer '))
      return { refused: 'the authorization header is not "Bearer <token>"' }
    const token = header.slice(7)
    // Digests of equal length: the comparison time says nothing about the token.
    if (timingSafeEqual(sha256(token), this.adminDigest)) return ADMIN
    if (token.startsWith(JOB_TOKEN_PREFIX)) {
      const dot = token.lastIndexOf('.')
      const jobId = token.slice(JOB_TOKEN_PREFIX.length, dot)
      if (jobId !== '' && timingSafeEqual(sha256(token.slice(dot + 1)), sha256(this.mac(jobId))))
        return { kind: 'job', jobId }
    }
    return { refused: 'the token is not this cluster’s' }
  }

  private mac(jobId: string): string {
    return createHmac('sha256', this.jobKey).update(jobId).digest('hex')
  }
}

/** Where a local cluster (and `iris controller` without a token) keeps its cluster token: beside the state file. */
export function tokenPathFor(statePath: string): string {
  return join(dirname(statePath), 'token')
}

/** `<prefix>/iris/token`: the cluster token of the local cluster on that prefix. */
export function localTokenPath(prefix: string): string {
  return join(prefix, MARIN_LAYOUT.irisToken)
}

/**
 * Reads a token file. With `private` (files iris finds or makes on its own, such as
 * `<prefix>/iris/token`), refuses one that other accounts could read or change, or that
 * belongs to another account, since its token would then not be a secret. A file the
 * operator names (`--token-file`, IRIS_TOKEN_FILE) is theirs to protect: a Kubernetes
 * secret volume, for one, is a root-owned link.
 */
export function readTokenFile(path: string, field = 'token file', opts: { private?: boolean } = {}): string {
  let st
  try {
    st = opts.private ? lstatSync(path) : statSync(path)
  } catch (err) {
    throw new IrisError(
      'UNAUTHENTICATED',
      `${field}: cannot read ${path} (` +
        `${(err as NodeJS.ErrnoException).code}); pass a readable file ` +
        `holding the token`,
    )
  }
  if (!st.isFile())
    throw new IrisError('UNAUTHENTICATED', `${field}: ${path} is not a regular file; pass the file holding the token`)
  if (opts.private && (st.mode & 0o077) !== 0)
    throw new IrisError(
      'UNAUTHENTICATED',
      `${field}: ${path} is readable or writable by others (mode ` +
        `${(st.mode & 0o777).toString(8)}); run "chmod 600 ${path}"`,
    )
  if (opts.private && process.getuid && st.uid !== process.getuid())
    throw new IrisError(
      'UNAUTHENTICATED',
      `${field}: ${path} belongs to another account (uid ${st.uid}); use a token file of your own`,
    )
  const token = readFileSync(path, 'utf8').trim()
  if (token === '') throw new IrisError('UNAUTHENTICATED', `${field}: ${path} is empty; write the token into it`)
  return token
}

/**
 * The cluster token at `path`: the one there if it is a private file of this account,
 * else a new random one written there with mode 0600 (its directory made 0700 if new).
 */
export function ensureTokenFile(path: string): string {
  try {
    return readTokenFile(path, 'token file', { private: true })
  } catch {
    // Absent, empty or not private: replace it.
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const token = randomBytes(32).toString('hex')
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  const fd = openSync(tmp, 'wx', 0o600)
  try {
    writeSync(fd, `${token}\n`)
  } finally {
    closeSync(fd)
  }
  chmodSync(tmp, 0o600)
  try {
    renameSync(tmp, path)
  } catch (err) {
    unlinkSync(tmp)
    throw err
  }
  // Another process may have won the race: use whatever is there now.
  return readTokenFile(path, 'token file', { private: true })
}
