/**
 * @module The mesh's settings as zod schemas: its axes (`mesh: { data, model }`) and where its
 * members run (`placement`). Plain zod, no fray or tfjs, so that config code
 * (src/config.ts, `@marin/levanter/config`) reads them without loading either.
 */
import { z } from 'zod'

/** Members as fray actors, `data × model` of them: replicas over the batch, tensor-parallel members within one. */
export const MeshConfig = z.strictObject(
  {
    data: z.number().int().positive().default(1).describe('replicas over the batch (fsdp shards over them)'),
    model: z.number().int().positive().default(1).describe('tensor-parallel members: heads and MLP split'),
  },
  {
    error: (iss) => (iss.code === 'unrecognized_keys' ? 'is not a mesh axis; the axes are data and model' : undefined),
  },
)
export type MeshConfigInput = z.input<typeof MeshConfig>
export type MeshConfig = z.output<typeof MeshConfig>

/** Where mesh members run: `{ iris: { controller, tokenFile } }` places each on an iris worker. */
export const MeshPlacement = z.strictObject({
  iris: z.strictObject({
    controller: z.string().min(1).describe('host:port of the iris controller'),
    tokenFile: z.string().min(1).optional().describe('file holding the cluster token (`iris controller` writes it)'),
  }),
})
export type MeshPlacement = z.output<typeof MeshPlacement>
