/**
 * The device check's flags, read and checked before anything heavy loads: bad usage exits 2 naming the flag in
 * a fraction of a second, without starting tfjs or Dawn. Imports nothing of levanter's.
 */
import { parseArgs } from 'node:util'

/** The mesh layouts `--mesh` takes (device-mesh-check.ts's `MESH_LAYOUTS`; device-check-run.ts fails to type-check
 * when the two lists part). */
export const DEVICE_CHECK_LAYOUTS = ['fsdp', 'model'] as const
export type DeviceCheckLayout = (typeof DEVICE_CHECK_LAYOUTS)[number]

/** What the flags ask for. */
export type DeviceCheckOptions = {
  readonly mesh: DeviceCheckLayout[]
  readonly software: boolean
  readonly quick: boolean
  readonly steps: number
  readonly batch: number
  readonly peakTflops: number | undefined
}

const USAGE =
  'usage: pnpm device-check [--software] [--quick] [--steps N] [--batch N] [--peak-tflops X] [--mesh L]\n' +
  '  --software      accept a software adapter (SwiftShader) when there is no GPU\n' +
  '  --quick         tiny models (for SwiftShader)\n' +
  '  --steps N       timed training steps per model (after 2 warm-up steps); default 10\n' +
  '  --batch N       GPT-2-small batch (sequences of 1024); default 8\n' +
  '  --peak-tflops X fp32 peak of the GPU for MFU, when its name is not in the table\n' +
  `  --mesh L        the mesh layouts to check, comma-separated: ${DEVICE_CHECK_LAYOUTS.join(', ')}; default all`

function usage(message: string): never {
  process.stderr.write(`device-check: ${message}\n${USAGE}\n`)
  process.exit(2)
}

/**
 * The options `args` ask for; on bad usage, the message and the usage on stderr and exit 2
 * (`--help`: usage, exit 0).
 */
export function parseDeviceCheckArgs(args: string[] = process.argv.slice(2)): DeviceCheckOptions {
  let values
  try {
    values = parseArgs({
      args,
      options: {
        software: { type: 'boolean', default: false },
        quick: { type: 'boolean', default: false },
        steps: { type: 'string', default: '10' },
        batch: { type: 'string', default: '8' },
        'peak-tflops': { type: 'string' },
        mesh: { type: 'string', default: DEVICE_CHECK_LAYOUTS.join(',') },
        help: { type: 'boolean', default: false },
      },
    }).values
  } catch (err) {
    usage((err as Error).message)
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  const int = (name: string, v: string) => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < 1) usage(`--${name} ${v}: give a positive integer`)
    return n
  }
  const peak = values['peak-tflops'] === undefined ? undefined : Number(values['peak-tflops'])
  if (peak !== undefined && !(peak > 0)) usage(`--peak-tflops ${values['peak-tflops']}: give a positive number`)
  const mesh = values.mesh.split(',').map((l) => l.trim())
  const unknown = mesh.find((l) => !(DEVICE_CHECK_LAYOUTS as readonly string[]).includes(l))
  if (unknown !== undefined)
    usage(`--mesh ${values.mesh}: "${unknown}" is not a layout; give ${DEVICE_CHECK_LAYOUTS.join(', ')}`)
  return {
    mesh: mesh as DeviceCheckLayout[],
    software: values.software,
    quick: values.quick,
    steps: int('steps', values.steps),
    batch: int('batch', values.batch),
    peakTflops: peak,
  }
}
