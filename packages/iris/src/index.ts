/** @module @marin/iris: job orchestration: controller, workers, scheduler, job states and retries, logs, the iris CLI
 * and a local cluster. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Errors
export { IRIS_ERROR_CODES, IrisError, isIrisError } from './errors.js'
export type { IrisErrorCode } from './errors.js'

// Jobs: requests, resources, states
export { resolveJobRequest, parseJobSpec, JobSpecSchema } from './job-spec.js'
export type { JobRequest, JobSpec } from './job-spec.js'
export { DEFAULT_RESOURCES, fits, formatResources, parseResources } from './resources.js'
export type { Resources } from './resources.js'
export { parseMount } from './mount-spec.js'
export type { Mount } from './mount-spec.js'
export { parseDuration } from './duration.js'
export { ATTEMPT_STATES, JOB_STATES, PRIORITIES, TASK_STATES, isFinalJobState, isFinalTaskState } from './states.js'
export type { AttemptState, JobState, Priority, TaskState } from './states.js'
export type { AttemptStatus, JobStatus, LogLine, TaskStatus, WorkerStatus } from './records.js'

// Scheduling
export { schedule } from './scheduler.js'
export type { Assignment, ClusterSnapshot, Decision, PendingTask, Unschedulable, WorkerView } from './scheduler.js'

// Controller, workers, clusters
export { Controller } from './controller.js'
export type { ControllerOptions } from './controller.js'
export { startController } from './controller-server.js'
export type { ControllerServer, ControllerServerOptions } from './controller-server.js'
export { ControllerService } from './controller-service.js'
export { Worker } from './worker.js'
export type { MountMaterializer, WorkerOptions } from './worker.js'
export { grpcLink } from './grpc-link.js'
export { inProcessLink } from './controller-link.js'
export type { ControllerLink } from './controller-link.js'
export { finestoreMounts } from './mounts.js'
export { LocalCluster } from './local-cluster.js'
export { kubernetesPlatform } from './kube-platform.js'
export type { KubernetesPlatformOptions } from './kube-platform.js'
export { ClusterAuth, ensureTokenFile, localTokenPath, readTokenFile } from './credentials.js'
export type { Principal } from './credentials.js'
export type { LocalClusterOptions } from './local-cluster.js'

// Clients
export { IrisClient } from './client.js'
export type { IrisClientOptions, LogsOptions, WaitOptions } from './client.js'
export { JobScheduler } from './job-scheduler.js'
export { SUBMIT_TO } from './submit-to.js'
export type { JobHandle, JobSchedulerOptions, JobSource, SelfSubmitting } from './job-scheduler.js'

// CLI
export { buildProgram, runCli } from './cli.js'
export { DEFAULT_CONTROLLER } from './cli-io.js'
export type { CliIo } from './cli-io.js'
