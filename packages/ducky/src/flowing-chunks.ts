/**
 * @module The chunks (or messages) a readable stream delivers, as an async iterable, read in
 * flowing mode: the response streams of grpc-js calls, or TCP sockets.
 *
 * `stream.iterator()` (and `for await … of stream`) reads in paused mode: for a socket, once a
 * 64 KiB read exceeds its 16 KiB high-water mark, reading stops and starts again on the next
 * `read()`, so every chunk costs a stop and a restart; for every stream it adds a layer of its own
 * async generator per item. Here the stream keeps flowing while fewer than `maxQueued` items
 * (16 by default, the same bound as an object-mode stream's high-water mark; up to 1 MiB of
 * 64 KiB socket reads) wait for the consumer and pauses only beyond that, which is how a
 * hand-written `'data'` pipe behaves.
 */
import type { Readable } from 'node:stream'

/** The error when the stream closes without an end of input or an error of its own. */
function prematureClose(): Error {
  return Object.assign(new Error('the connection closed before its end of input'), {
    code: 'ERR_STREAM_PREMATURE_CLOSE',
  })
}

/**
 * Yields each chunk `sock` delivers until its end of input; throws the stream's error, or a
 * premature-close error when it is destroyed first. Leaving the loop early neither ends nor
 * destroys the stream (it is paused): the caller owns it.
 * @example
 * for await (const chunk of flowingChunks(sock)) if (!call.write(chunk)) await drained()
 */
export async function* flowingChunks<T = Buffer>(sock: Readable, maxQueued = 16): AsyncGenerator<T> {
  const queue: T[] = []
  let ended = false
  let closed = false
  let failure: Error | undefined
  let wake: (() => void) | undefined
  const poke = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  const onData = (d: T) => {
    queue.push(d)
    if (queue.length >= maxQueued) sock.pause()
    poke()
  }
  const onEnd = () => {
    ended = true
    poke()
  }
  const onError = (err: Error) => {
    failure = err
    poke()
  }
  const onClose = () => {
    closed = true
    poke()
  }
  sock.on('data', onData)
  sock.on('end', onEnd)
  sock.on('error', onError)
  sock.on('close', onClose)
  // A socket paused before (by an earlier reader) does not start flowing on a new 'data' listener.
  if (sock.isPaused()) sock.resume()
  try {
    for (;;) {
      const d = queue.shift()
      if (d !== undefined) {
        if (queue.length === 0 && sock.isPaused()) sock.resume()
        yield d
      } else if (failure !== undefined) throw failure
      else if (ended || sock.readableEnded) return
      else if (closed || sock.destroyed) throw prematureClose()
      else await new Promise<void>((resolve) => (wake = resolve))
    }
  } finally {
    // The error listener stays: a later error of a socket the caller is about to close must not
    // become an uncaught exception.
    sock.off('data', onData)
    sock.off('end', onEnd)
    sock.off('close', onClose)
    // Without a 'data' listener a flowing socket would drop what it reads next.
    if (!sock.destroyed) sock.pause()
  }
}
