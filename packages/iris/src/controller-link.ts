/** @module How a worker talks to its controller: three calls, in-process or over gRPC. */
import type { z } from 'zod'
import type { Controller } from './controller.js'
import type {
  HeartbeatRequest,
  HeartbeatResponse,
  RegisterRequest,
  RegisterResponse,
  ReportRequest,
  ReportResponse,
} from './protocol.js'

export type ControllerLink = {
  register(req: z.infer<typeof RegisterRequest>): Promise<z.infer<typeof RegisterResponse>>
  heartbeat(req: z.infer<typeof HeartbeatRequest>, signal?: AbortSignal): Promise<z.infer<typeof HeartbeatResponse>>
  report(req: z.infer<typeof ReportRequest>): Promise<z.infer<typeof ReportResponse>>
}

/** A link that calls a controller in the same process (tests and embedding without gRPC). */
export function inProcessLink(controller: Controller): ControllerLink {
  return {
    register: async (req) => controller.registerWorker(req),
    heartbeat: (req, signal) => controller.heartbeat(req, signal),
    report: async (req) => controller.report(req),
  }
}
