/** @module The SQLite schema of the controller's state, and opening the database in WAL mode. */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs'
import { dirname } from 'node:path'
import { createRequire } from 'node:module'
import type Database from 'better-sqlite3'
import { IrisError } from './errors.js'

/**
 * Bump when the schema changes incompatibly; `openStateDb` refuses a newer file instead of
 * guessing. Added tables (such as `submit_requests`) need no bump: an older iris ignores them.
 */
export const SCHEMA_VERSION = 1

const DDL = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  job_id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL UNIQUE,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  priority TEXT NOT NULL,
  spec TEXT NOT NULL,
  submitted_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  exit_code INTEGER,
  error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS tasks (
  job_id TEXT NOT NULL REFERENCES jobs(job_id),
  task_index INTEGER NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  worker_losses INTEGER NOT NULL DEFAULT 0,
  worker_id TEXT,
  exit_code INTEGER,
  error TEXT,
  PRIMARY KEY (job_id, task_index)
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks(state);
CREATE TABLE IF NOT EXISTS attempts (
  attempt_id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  task_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  worker_id TEXT NOT NULL,
  state TEXT NOT NULL,
  assigned_at INTEGER NOT NULL,
  started_at INTEGER,
  finished_at INTEGER,
  exit_code INTEGER,
  error TEXT
);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts(job_id, task_index);
CREATE INDEX IF NOT EXISTS attempts_active ON attempts(state, worker_id);
CREATE TABLE IF NOT EXISTS workers (
  worker_id TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  resources TEXT NOT NULL,
  docker INTEGER NOT NULL,
  docker_reason TEXT,
  state TEXT NOT NULL,
  registered_at INTEGER NOT NULL,
  lost_at INTEGER
);
CREATE TABLE IF NOT EXISTS logs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL,
  task_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  line_no INTEGER NOT NULL,
  stream TEXT NOT NULL,
  ts INTEGER NOT NULL,
  line TEXT NOT NULL,
  UNIQUE (job_id, task_index, attempt, line_no)
);
CREATE INDEX IF NOT EXISTS logs_job ON logs(job_id, seq);
CREATE TABLE IF NOT EXISTS submit_requests (
  request_id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  at INTEGER NOT NULL
);
`

/** Opens (creating if needed) the state database at `path`, in WAL mode with a busy timeout. */
export function openStateDb(path: string): Database.Database {
  if (path !== ':memory:') {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
    // Job specs (env values included) live here: only this account may read it. SQLite gives
    // the -wal and -shm files the mode of the database file.
    closeSync(openSync(path, 'a', 0o600))
    try {
      chmodSync(path, 0o600)
    } catch {
      // Not ours to change (another account's file opened read-write): leave it.
    }
  }
  // better-sqlite3 is required when the database is opened, not when iris is imported
  const Sqlite = createRequire(import.meta.url)('better-sqlite3') as typeof Database
  const db = new Sqlite(path)
  db.pragma('journal_mode = WAL')
  // NORMAL is durable across process crashes in WAL mode; only an OS crash can lose the last commits.
  db.pragma('synchronous = NORMAL')
  db.pragma('busy_timeout = 5000')
  db.exec(DDL)
  const row = db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string } | undefined
  if (!row) db.prepare(`INSERT INTO meta (key, value) VALUES ('schema_version', ?)`).run(String(SCHEMA_VERSION))
  else if (Number(row.value) > SCHEMA_VERSION) {
    db.close()
    throw new IrisError(
      'STATE_CORRUPT',
      `${path}: schema version ${row.value} is newer than this iris (` +
        `${SCHEMA_VERSION}); upgrade iris before opening it`,
    )
  }
  return db
}
