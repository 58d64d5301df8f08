/**
 * The device check: `pnpm device-check [--software] [--quick] [--steps N] [--batch N] [--peak-tflops X] [--mesh L]`.
 * Reads its flags first (device-check-usage.ts: bad usage exits 2 before tfjs or Dawn load), then runs the checks
 * (device-check-run.ts: the GPU adapter, levanter's ops and WGSL kernels against the cpu backend, the mesh members
 * against one process, and the training lines). Exits 1 when a check fails or no GPU adapter is found.
 */
import { parseDeviceCheckArgs } from './device-check-usage.js'

const options = parseDeviceCheckArgs()
const { runDeviceCheck } = await import('./device-check-run.js')
await runDeviceCheck(options)
