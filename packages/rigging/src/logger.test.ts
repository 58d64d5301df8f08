import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { RiggingError } from './errors.js'
import { configureLogging, logger, parseLogLevel, rootLogger, setLogLevel } from './logger.js'
import { registerSecretValue } from './redaction.js'

// The pino testing approach: a sink stream that collects finished lines, asserted as JSON.
function sink() {
  const lines: string[] = []
  return {
    lines,
    json: () => lines.map((l) => JSON.parse(l) as Record<string, any>),
    destination: { write: (l: string) => void lines.push(l) },
  }
}

let out: ReturnType<typeof sink>
beforeEach(() => {
  out = sink()
  configureLogging({ destination: out.destination, pretty: false, level: 'info' })
})
afterEach(() => {
  delete process.env.LOG_LEVEL
})

describe('logger', () => {
  test('a package logger writes JSON lines bound to its package', () => {
    const log = logger('iris')
    log.info({ jobId: 'j1', attempt: 2 }, 'retrying job')
    const [line] = out.json()
    expect(out.lines[0]!.endsWith('\n')).toBe(true)
    expect(line).toMatchObject({ level: 30, pkg: 'iris', jobId: 'j1', attempt: 2, msg: 'retrying job' })
    expect(typeof line!.time).toBe('number')
    expect(logger('iris')).toBe(log)
  })

  test('children of a package logger keep the package and add their bindings', () => {
    logger('fray').child({ actor: 'a7' }).warn('slow')
    expect(out.json()[0]).toMatchObject({ level: 40, pkg: 'fray', actor: 'a7', msg: 'slow' })
  })

  test('level filters lines and reaches loggers created earlier, children included', () => {
    const log = logger('zephyr')
    const job = log.child({ jobId: 'j1' }).child({ shard: 3 })
    log.debug('hidden')
    job.debug('hidden too')
    expect(out.lines).toHaveLength(0)
    setLogLevel('debug')
    log.debug('shown')
    job.debug('shown too')
    expect(out.json().map((l) => l.msg)).toEqual(['shown', 'shown too'])
    expect(out.json()[1]).toMatchObject({ pkg: 'zephyr', jobId: 'j1', shard: 3 })
    out.lines.length = 0
    setLogLevel('silent')
    log.fatal('nothing')
    job.fatal('nothing either')
    expect(out.lines).toHaveLength(0)
  })

  test('LOG_LEVEL sets the level when none is given', () => {
    process.env.LOG_LEVEL = 'WARN'
    configureLogging({ destination: out.destination, pretty: false })
    logger('ducky').info('dropped')
    logger('ducky').warn('kept')
    expect(out.json().map((l) => l.msg)).toEqual(['kept'])
    expect(rootLogger().level).toBe('warn')
  })

  test('an unknown LOG_LEVEL is a CONFIG_INVALID error that lists the levels', () => {
    process.env.LOG_LEVEL = 'verbose'
    expect(() => configureLogging({ destination: out.destination })).toThrow(RiggingError)
    expect(() => parseLogLevel('verbose')).toThrow(
      /LOG_LEVEL="verbose" is not a log level; set it to one of trace, debug, info/,
    )
    try {
      parseLogLevel('loud')
    } catch (err) {
      expect((err as RiggingError).code).toBe('CONFIG_INVALID')
    }
  })

  test('errors go under err with type, message and stack', () => {
    logger('iris').error({ err: new TypeError('boom') }, 'job failed')
    const line = out.json()[0]!
    expect(line.err).toMatchObject({ type: 'TypeError', message: 'boom' })
    expect(line.err.stack).toContain('logger.test.ts')
  })

  test('pretty output is readable text, not JSON', () => {
    configureLogging({ destination: out.destination, pretty: true })
    logger('marin').info({ step: 'tokenize' }, 'step done')
    const text = out.lines.join('')
    expect(() => JSON.parse(text)).toThrow()
    expect(text).toMatch(/INFO.*\[marin\] step done/)
    expect(text).toContain('tokenize')
  })
})

describe('redaction', () => {
  test('secret-looking keys are redacted at any depth; ordinary keys are kept', () => {
    const payload = {
      user: 'ada',
      password: 'hunter22',
      numTokens: 512,
      tokenizer: 'gpt2',
      eos_token: '<|endoftext|>',
      hf_token: 'hf_abc',
      awsSecretAccessKey: 'aws-s',
      key: 'blobs/sha256/ab',
      request: {
        headers: { Authorization: 'Bearer abc', accept: 'json' },
        body: { api_key: 'k-1', nested: { clientSecret: 's' } },
      },
      list: [{ token: 't-1' }, { secrets: { a: 1 } }],
    }
    logger('ducky').info({ payload }, 'request')
    const line = out.json()[0]!
    expect(line.payload).toEqual({
      user: 'ada',
      password: '[REDACTED]',
      numTokens: 512,
      tokenizer: 'gpt2',
      eos_token: '<|endoftext|>',
      hf_token: '[REDACTED]',
      awsSecretAccessKey: '[REDACTED]',
      key: 'blobs/sha256/ab',
      request: {
        headers: { Authorization: '[REDACTED]', accept: 'json' },
        body: { api_key: '[REDACTED]', nested: { clientSecret: '[REDACTED]' } },
      },
      list: [{ token: '[REDACTED]' }, { secrets: '[REDACTED]' }],
    })
    expect(payload.password).toBe('hunter22') // the caller's object is untouched
  })

  test('bindings and error properties are redacted too', () => {
    const err = Object.assign(new Error('auth failed'), { apiKey: 'sk-live-1' })
    logger('ducky').child({ token: 'bearer-xyz' }).error({ err }, 'call failed')
    const raw = out.lines.join('')
    expect(raw).not.toContain('bearer-xyz')
    expect(raw).not.toContain('sk-live-1')
    const line = out.json()[0]!
    expect(line.token).toBe('[REDACTED]')
    expect(line.err.apiKey).toBe('[REDACTED]')
  })

  test('a cyclic object does not hang redaction', () => {
    const a: Record<string, unknown> = { name: 'a', password: 'pw-cycle' }
    a.self = a
    logger('fray').info({ a }, 'cyclic')
    expect(out.lines.join('')).not.toContain('pw-cycle')
  })

  test('very deep nesting is cut, never printed unredacted', () => {
    let deep: Record<string, unknown> = { password: 'pw-deep' }
    for (let i = 0; i < 40; i++) deep = { next: deep }
    logger('fray').info({ deep }, 'deep')
    const raw = out.lines.join('')
    expect(raw).not.toContain('pw-deep')
    expect(raw).toContain('[Truncated]')
  })

  test('registered secret values never appear, wherever they are logged', () => {
    const value = 'sk-registered-"quoted"\\value'
    registerSecretValue(value)
    const log = logger('levanter')
    log.info({ note: `uses ${value}`, list: [value] }, `message with ${value}`)
    log.error({ err: new Error(`failed with ${value}`) }, 'oops')
    configureLogging({ destination: out.destination, pretty: true })
    log.warn(`pretty ${value}`)
    const raw = out.lines.join('')
    expect(raw).not.toContain(value)
    expect(raw).not.toContain(JSON.stringify(value).slice(1, -1))
    expect(raw).not.toContain('sk-registered')
    expect(raw.match(/\[REDACTED\]/g)!.length).toBeGreaterThanOrEqual(5)
    const [first] = out.lines.slice(0, 1).map((l) => JSON.parse(l))
    expect(first.msg).toBe('message with [REDACTED]')
  })
})

describe('default output in a real process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rigging-log-'))
  const script = join(dir, 'log.ts')
  const loggerPath = resolve(import.meta.dirname, 'logger.ts')
  writeFileSync(
    script,
    `import { logger } from ${JSON.stringify(loggerPath)}\n` +
      `logger('proc').debug('debug line')\nlogger('proc').info({ n: 1 ` +
      `}, 'info line')\nprocess.stdout.write('RESULT\\n')\n`,
  )
  const run = (env: Record<string, string>, viaTty = false) => {
    const node = [process.execPath, '--import', 'tsx', script]
    const cmd = viaTty ? ['script', '-qec', node.map((a) => `'${a}'`).join(' '), '/dev/null'] : node
    return spawnSync(cmd[0]!, cmd.slice(1), {
      cwd: resolve(import.meta.dirname, '../../..'),
      env: { ...process.env, LOG_LEVEL: '', LOG_FORMAT: '', ...env },
      encoding: 'utf8',
    })
  }

  test('without a terminal: JSON lines on stderr, stdout left to the program', () => {
    const r = run({})
    expect(r.status).toBe(0)
    expect(r.stdout).toBe('RESULT\n')
    const lines = r.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines).toEqual([expect.objectContaining({ pkg: 'proc', msg: 'info line', n: 1, level: 30 })])
  })

  test('LOG_LEVEL from the environment', () => {
    const r = run({ LOG_LEVEL: 'debug' })
    expect(
      r.stderr
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).msg),
    ).toEqual(['debug line', 'info line'])
  })

  test('a bad LOG_LEVEL stops the process with the typed error', () => {
    const r = run({ LOG_LEVEL: 'chatty' })
    expect(r.status).not.toBe(0)
    expect(r.stderr).toContain('LOG_LEVEL="chatty" is not a log level')
  })

  test('on a terminal: pretty, colored lines', () => {
    // `script` runs the program on a pseudo-terminal, so stderr.isTTY is true.
    const r = run({}, true)
    expect(r.status).toBe(0)
    expect(r.stdout).toContain('info line')
    expect(r.stdout).toContain('\u001b[') // ANSI colors
    expect(r.stdout).not.toMatch(/^\{"level"/m)
  })

  test('LOG_FORMAT=pretty without a terminal', () => {
    const r = run({ LOG_FORMAT: 'pretty' })
    expect(r.stderr).toMatch(/INFO.*info line/)
    expect(r.stderr).not.toContain('{"level"')
  })
})
