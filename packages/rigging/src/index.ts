/** @module @marin/rigging: config loading (zod), the root pino logger, secrets, telemetry, storage URLs, atomic writes,
 * leases and provenance. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { RIGGING_ERROR_CODES, RiggingError, isRiggingError } from './errors.js'
export type { RiggingErrorCode } from './errors.js'

// Config
export { ConfigError, loadConfig } from './config.js'
export type { ConfigIssue, LoadConfigOptions } from './config.js'
export { envOverrides } from './config-env.js'
export type { EnvOverride } from './config-env.js'
export { readConfigFile } from './config-file.js'
export type { ConfigFile } from './config-file.js'

// Logging
export { LOG_LEVELS, configureLogging, logger, parseLogLevel, rootLogger, setLogLevel } from './logger.js'
export type { LogDestination, LogLevel, Logger, LoggingOptions } from './logger.js'
export {
  REDACTED,
  isSecretKey,
  redactSecrets,
  registerSecretValue,
  scrubProcessOutput,
  scrubSecretValues,
  scrubSecrets,
  scrubWrites,
} from './redaction.js'

// Secrets
export { SecretNotFoundError, SecretStore, defaultSecretsDir } from './secrets.js'
export type { SecretStoreOptions } from './secrets.js'
export {
  describeSpec,
  dirSource,
  envSource,
  parseSecretSpec,
  readSecretFile,
  resolveSecretSpec,
  secretEnvName,
  specSource,
} from './secret-sources.js'
export type { SecretSource, SecretSpec } from './secret-sources.js'
export { writeSecretFile } from './secret-file.js'
export { isSecretFingerprints, scrubFingerprinted, secretFingerprints } from './secret-fingerprints.js'
export type { SecretFingerprints } from './secret-fingerprints.js'

// Telemetry
export { Counter } from './telemetry/counter.js'
export type { BoundCounter } from './telemetry/counter.js'
export { Gauge } from './telemetry/gauge.js'
export type { BoundGauge } from './telemetry/gauge.js'
export { DEFAULT_BUCKETS, Histogram } from './telemetry/histogram.js'
export type { BoundHistogram, HistogramOptions } from './telemetry/histogram.js'
export type { Metric } from './telemetry/metric.js'
export type {
  CounterSnapshot,
  GaugeSnapshot,
  HistogramSample,
  HistogramSnapshot,
  Labels,
  MetricOptions,
  MetricSnapshot,
  MetricType,
  ScalarSample,
} from './telemetry/types.js'
export { MetricsRegistry, metrics } from './telemetry/registry.js'
export type { RegistrySnapshot } from './telemetry/registry.js'
export { DEFAULT_QUANTILES, quantileKey } from './telemetry/reservoir.js'
export { PROMETHEUS_CONTENT_TYPE, toPrometheusText } from './telemetry/prometheus.js'
export { JsonlSink } from './telemetry/jsonl-sink.js'
export type { JsonlSinkOptions } from './telemetry/jsonl-sink.js'

// Storage
export { openStorage, STORAGE_SCHEMES } from './storage/open-storage.js'
export type { OpenStorageOptions } from './storage/open-storage.js'
export { S3_PEER } from './storage/s3.js'
export type { S3StorageOptions } from './storage/s3.js'
export { GCS_PEER } from './storage/gcs.js'
export type { GcsStorageOptions } from './storage/gcs.js'
export { FileStorage } from './storage/file.js'
export type { FileStorageOptions } from './storage/file.js'
export type { FileLockOptions } from './storage/file-lock.js'
export type { RemoveOrphansOptions } from './storage/file-orphans.js'
export { MemoryStorage } from './storage/memory.js'
export { scrubbingStorage } from './storage/scrubbing.js'
export type { DeleteOptions, ListOptions, ObjectInfo, Storage, WriteCondition, WriteOptions } from './storage/types.js'

// The prefix and its layout
export {
  DEFAULT_MARIN_PREFIX,
  MARIN_LAYOUT,
  experimentRecordPath,
  localMarinPrefix,
  marinPrefix,
  prefixDir,
  prefixPath,
  prefixUrl,
  stepDirName,
} from './prefix.js'
export type { MarinPrefixOptions } from './prefix.js'

// Leases
export { Lease, defaultLeaseOwner, readLease, releaseLease } from './lease.js'
export type { KeepAliveOptions, LeaseOptions, LeaseRecord, LeaseState } from './lease.js'

// Provenance
export { provenance, scopedPackageVersions } from './provenance.js'
export type { Provenance, ProvenanceOptions } from './provenance.js'

// Byte sizes
export { formatByteSize, parseByteSize } from './byte-size.js'
export { seededRandom } from './random.js'
