/**
 * @module A backward pass that frees memory as it goes. tfjs's `engine.gradients` keeps every
 * intermediate gradient and every saved activation until the whole backward pass ends, so a
 * training step's peak holds all activations *and* all their gradients (about twice what the
 * step needs; PyTorch frees each as soon as it is used). {@link installLeanBackprop} replaces the
 * engine's `gradients` (what `tf.grads`, `tf.variableGrads` and optimizers call) with the same
 * computation in the same order, which disposes each node's output gradients and saved tensors
 * once that node's input gradients are computed. The results are the same bits; the peak drops.
 * Higher-order gradients (a gradient taken inside a gradient) keep tfjs's own pass.
 */
import * as tf from '@tensorflow/tfjs'
import type { ScatterInto } from './gather-grad.js'

type Grad = tf.Tensor
/** A node of the engine's tape (tfjs-core's TapeNode, as far as used here). */
type TapeNode = {
  id: number
  kernelName: string
  inputs: Record<string, tf.Tensor>
  outputs: tf.Tensor[]
  gradient?: (dys: (Grad | null)[]) => Record<string, () => Grad>
  saved?: tf.Tensor[]
}
/** The parts of tfjs-core's Engine the pass uses. */
type EngineLike = {
  state: { activeTape: TapeNode[] | null; gradientDepth: number }
  scopedRun<T>(start: () => void, end: () => void, f: () => T): T
  startTape(): void
  endTape(): void
  tidy<T extends tf.TensorContainer>(nameOrFn: string | (() => T), fn?: () => T): T
  startScope(name?: string): void
  endScope(result?: tf.TensorContainer): void
  gradients: Gradients
}
type Gradients = (
  f: () => tf.Tensor,
  xs: tf.Tensor[],
  dy?: tf.Tensor,
  allowNoGradients?: boolean,
) => { value: tf.Tensor; grads: tf.Tensor[] }

/** The nodes on a path from one of `xs` to `y`, in tape order, each with only its inputs that depend on `xs`. */
function pathNodes(tape: readonly TapeNode[], xs: readonly tf.Tensor[], y: tf.Tensor): TapeNode[] {
  const fromX = new Set(xs.map((x) => x.id))
  const nodeFromX = new Set<number>()
  for (const node of tape) {
    if (Object.values(node.inputs).some((t) => fromX.has(t.id))) {
      nodeFromX.add(node.id)
      for (const o of node.outputs) fromX.add(o.id)
    }
  }
  const toY = new Set([y.id])
  const nodeToY = new Set<number>()
  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i]!
    if (!node.outputs.some((o) => toY.has(o.id))) continue
    nodeToY.add(node.id)
    for (const t of Object.values(node.inputs)) toY.add(t.id)
  }
  return tape
    .filter((n) => nodeFromX.has(n.id) && nodeToY.has(n.id))
    .map((n) => ({
      ...n,
      inputs: Object.fromEntries(Object.entries(n.inputs).filter(([, t]) => fromX.has(t.id))),
    }))
}

/**
 * Walk `tape` backward from `grads` (tensor id → gradient, holding y's), accumulating input
 * gradients as tfjs does, and dispose a gradient as soon as nothing can read it any more, and each
 * node's saved tensors once its gradient has run. Yields after each node. With `onFinal`, the
 * gradient of each tensor of `keep` goes to it once no node left can add to it, and is disposed.
 */
function* backprop(
  engine: EngineLike,
  grads: Map<number, Grad>,
  tape: readonly TapeNode[],
  keep: ReadonlySet<number>,
  pinned: ReadonlySet<Grad>,
  onFinal?: (id: number, g: Grad) => void,
): Generator<void, void, void> {
  // how many map entries hold each gradient object (a gradient function may pass dy through as is)
  const holders = new Map<Grad, number>()
  const hold = (g: Grad) => holders.set(g, (holders.get(g) ?? 0) + 1)
  const release = (g: Grad) => {
    const n = (holders.get(g) ?? 1) - 1
    if (n > 0) holders.set(g, n)
    else {
      holders.delete(g)
      if (!pinned.has(g)) g.dispose()
    }
  }
  for (const g of grads.values()) hold(g)
  // the node at which each tensor of `keep` gets its last contribution (the first to use it)
  const lastUse = new Map<number, number[]>()
  if (onFinal) {
    const seen = new Set<number>()
    tape.forEach((node, i) => {
      for (const x of Object.values(node.inputs))
        if (keep.has(x.id) && !seen.has(x.id)) {
          seen.add(x.id)
          lastUse.set(i, [...(lastUse.get(i) ?? []), x.id])
        }
    })
  }
  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i]!
    if (!node.gradient) throw new Error(`Cannot compute gradient: gradient function not found for ${node.kernelName}.`)
    const inputGradients = node.gradient(node.outputs.map((o) => grads.get(o.id) ?? null))
    for (const [name, x] of Object.entries(node.inputs)) {
      const make = inputGradients[name]
      if (!make) throw new Error(`Cannot backprop through input ${name} of ${node.kernelName}.`)
      const prevHere = grads.get(x.id)
      // an embedding lookup's rows added straight into the gradient so far (a tied head's), when only this pass
      // holds it: the bits of prev + dense scatter, without building the [V, D] scatter
      const into = (make as Partial<ScatterInto>).scatterInto
      if (into && prevHere !== undefined && holders.get(prevHere) === 1 && !pinned.has(prevHere) && into(prevHere))
        continue
      const dx = engine.tidy(make)
      if (dx.dtype !== 'float32' || dx.shape.join() !== x.shape.join())
        throw new Error(
          `Error in gradient for op ${node.kernelName}: the gradient of input '${name}' is ` +
            `${dx.dtype} [${dx.shape}], the input ${x.dtype} [${x.shape}]`,
        )
      const prev = grads.get(x.id)
      if (prev === undefined) {
        grads.set(x.id, dx)
        hold(dx)
        continue
      }
      const sum = tf.add(prev, dx)
      grads.set(x.id, sum)
      hold(sum)
      release(prev)
      if (!holders.has(dx) && !pinned.has(dx)) dx.dispose() // dy passed through and held nowhere else
    }
    // nothing reads this node's output gradients or saved tensors again
    for (const o of node.outputs) {
      const g = grads.get(o.id)
      if (g === undefined || keep.has(o.id)) continue
      grads.delete(o.id)
      release(g)
    }
    for (const t of node.saved ?? []) if (!holders.has(t)) t.dispose()
    for (const id of (onFinal && lastUse.get(i)) || []) {
      const g = grads.get(id)
      if (g === undefined) continue
      onFinal!(id, g)
      grads.delete(id)
      release(g)
    }
    yield
  }
}

let stock: Gradients | undefined

function drain(pass: Generator<void, void, void>): void {
  while (!pass.next().done);
}

/** Replace the engine's `gradients` with the lean pass (idempotent). */
export function installLeanBackprop(): void {
  if (stock) return
  const engine = tf.engine() as unknown as EngineLike
  stock = engine.gradients
  const own = stock
  engine.gradients = function leanGradients(f, xs, dy, allowNoGradients = false) {
    // inside another gradient (higher order) the tape must stay whole: tfjs's own pass
    if (engine.state.gradientDepth > 0) return own.call(engine, f, xs, dy, allowNoGradients)
    if (xs.length === 0) throw new Error('gradients() received an empty list of xs.')
    if (dy != null && dy.dtype !== 'float32') throw new Error(`dy must have 'float32' dtype, but has '${dy.dtype}'`)
    const y = engine.scopedRun(
      () => engine.startTape(),
      () => engine.endTape(),
      () => engine.tidy('forward', f),
    )
    if (!(y instanceof tf.Tensor)) throw new Error('The result y returned by f() must be a tensor.')
    const tape = engine.state.activeTape ?? []
    const nodes = pathNodes(tape, xs, y)
    if (!allowNoGradients && nodes.length === 0)
      throw new Error(
        'Cannot compute gradient of y=f(x) with respect to x. Make sure that the f you passed encloses all ' +
          'operations that lead from x to y.',
      )
    return engine.tidy('backward', () => {
      const grads = new Map<number, Grad>([[y.id, dy ?? tf.onesLike(y)]])
      drain(backprop(engine, grads, nodes, new Set(xs.map((x) => x.id)), new Set(dy ? [dy] : [])))
      for (const node of tape) for (const t of node.saved ?? []) t.dispose()
      engine.state.activeTape = null
      return { value: y, grads: xs.map((x) => grads.get(x.id)!) }
    })
  }
}

/**
 * The lean pass over `f`'s gradients with respect to `xs`, handing each gradient to `onGrad(i, g)`
 * (i: its index in `xs`) as soon as it is final, that is once the pass has run every node that
 * adds to it, and disposing it after (`onGrad` copies what it keeps). The same computation in the
 * same order as {@link installLeanBackprop}'s pass, so the same bits. After each node it awaits
 * `between()` when given: a collective started on finished gradients progresses there while the
 * rest of the pass still has to run. `f`'s value is returned (the caller disposes it); an x that
 * `f` does not depend on gets a zero gradient, at the end.
 */
export async function streamGradients(
  f: () => tf.Tensor,
  xs: readonly tf.Tensor[],
  onGrad: (i: number, g: tf.Tensor) => void,
  between?: () => Promise<void> | undefined,
): Promise<tf.Tensor> {
  const engine = tf.engine() as unknown as EngineLike
  if (engine.state.gradientDepth > 0) throw new Error('streamGradients cannot run inside another gradient')
  const y = engine.scopedRun(
    () => engine.startTape(),
    () => engine.endTape(),
    () => engine.tidy('forward', f),
  )
  const tape = engine.state.activeTape ?? []
  engine.state.activeTape = null
  const index = new Map(xs.map((x, i) => [x.id, i]))
  const done = new Set<number>()
  const grads = new Map<number, Grad>()
  // What the gradient functions make outside their results goes with a scope, as in a tidy: one
  // scope per node, opened and closed with no await inside. A scope held open across `between()`
  // would take in the tensors whatever else runs in this process meanwhile makes (another pass:
  // inline mesh members), and closing it would dispose them, or close that other pass's scope.
  const scoped = (f: () => void) => {
    engine.startScope('backward')
    try {
      f()
    } finally {
      engine.endScope([...grads.values()])
    }
  }
  try {
    const nodes = pathNodes(tape, xs, y)
    scoped(() => grads.set(y.id, tf.onesLike(y)))
    const pass = backprop(engine, grads, nodes, new Set(index.keys()), new Set(), (id, g) => {
      done.add(id)
      onGrad(index.get(id)!, g)
    })
    for (;;) {
      let end = false
      scoped(() => (end = pass.next().done === true))
      if (end) break
      const wait = between?.()
      if (wait) await wait
    }
  } finally {
    for (const g of grads.values()) if (!g.isDisposed) g.dispose()
    for (const node of tape) for (const t of node.saved ?? []) if (!t.isDisposed) t.dispose()
  }
  xs.forEach((x, i) => {
    if (done.has(x.id)) return
    const z = tf.zerosLike(x)
    onGrad(i, z)
    z.dispose()
  })
  return y
}

/** Put tfjs's own pass back. */
export function uninstallLeanBackprop(): void {
  if (!stock) return
  ;(tf.engine() as unknown as EngineLike).gradients = stock
  stock = undefined
}
