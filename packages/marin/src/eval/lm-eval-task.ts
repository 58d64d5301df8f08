/**
 * @module lm-evaluation-harness task YAML: read a task definition (`include`s merged, `!function`
 * references mapped to built-in equivalents) and its documents from local JSONL or Parquet files,
 * so tasks such as ARC, HellaSwag, PIQA, LAMBADA and Winogrande run unchanged when their data is on
 * disk. Running is in `lm-eval-run.ts`.
 *
 * Where the documents come from, first match wins: the `dataFiles` override; the YAML's
 * `dataset_kwargs.data_files` (a path, a list, or `{split: path}`; relative to the YAML file);
 * `<dataDir>/<dataset_path>/[<dataset_name>/]<split>.{jsonl,json,parquet}`. The split is the task's
 * `test_split`, else `validation_split`, else `training_split`, as lm-eval picks it.
 *
 * Few-shot (`num_fewshot`, overridden by the `numFewshot` option unless the YAML sets 0): examples
 * come from `fewshot_config.split` / `fewshot_split`, else `fewshot_config.samples`, else the
 * training split, else validation, else test (see `lm-eval-fewshot.ts`); that split is read only when
 * examples are wanted, from the same places (`dataFiles` stands for the evaluated split only).
 */
import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from 'node:fs'
import { dirname, extname, join, resolve } from 'node:path'
import { createRequire } from 'node:module'
import { ParquetReader } from '@marin/zephyr'
import type * as Yaml from 'yaml'
import { z } from 'zod'
import { MarinError } from '../errors.js'
import type { DocField } from './lm-eval-fields.js'
import { FEWSHOT_SAMPLERS, poolNeeded } from './lm-eval-fewshot.js'
import type { FewshotSpec } from './lm-eval-fewshot.js'
import { FilterListConfig, ignorePatterns, parseFilterList } from './lm-eval-filters.js'
import type { LmEvalFilter } from './lm-eval-filters.js'
import { knownFunction, knownFunctionNames } from './lm-eval-functions.js'
import type { Doc } from './lm-eval-functions.js'

export type { DocField } from './lm-eval-fields.js'

export const LM_EVAL_OUTPUT_TYPES = [
  'multiple_choice',
  'loglikelihood',
  'generate_until',
  'loglikelihood_rolling',
] as const
export type LmEvalOutputType = (typeof LM_EVAL_OUTPUT_TYPES)[number]

/** Metrics each output type can compute, and its defaults when `metric_list` is absent. */
export const LM_EVAL_METRICS: Readonly<Record<LmEvalOutputType, { all: readonly string[]; defaults: string[] }>> = {
  multiple_choice: { all: ['acc', 'acc_norm', 'acc_bytes', 'acc_mutual_info'], defaults: ['acc'] },
  loglikelihood: { all: ['perplexity', 'acc'], defaults: ['perplexity', 'acc'] },
  generate_until: { all: ['exact_match'], defaults: ['exact_match'] },
  loglikelihood_rolling: {
    all: ['word_perplexity', 'byte_perplexity', 'bits_per_byte'],
    defaults: ['word_perplexity', 'byte_perplexity', 'bits_per_byte'],
  },
}

export type LmEvalMetric = {
  readonly metric: string
  readonly ignoreCase: boolean
  readonly ignorePunctuation: boolean
  readonly regexesToIgnore: readonly string[]
  /** How errors name it: the task file, the task and `metric_list[i]`. */
  readonly where?: string
}

/** A task read from lm-eval YAML: what to ask of each document and which metrics to report. */
export type LmEvalTask = {
  readonly name: string
  readonly kind: 'lm_eval'
  readonly outputType: LmEvalOutputType
  /** The YAML file. */
  readonly source: string
  readonly docs: readonly Doc[]
  readonly docToText: DocField
  readonly docToTarget: DocField
  readonly docToChoice?: DocField
  /**
   * `doc_to_decontamination_query`: the text of a document that decontamination matches, in place of its
   * prompt (a column, a template or a built-in `!function`); absent, decontamination uses the prompt.
   */
  readonly docToDecontaminationQuery?: DocField
  /** Rendered per document (a column name or a Jinja template), put before everything else. */
  readonly description: string
  readonly targetDelimiter: string
  readonly fewshotDelimiter: string
  /** Examples before each document (`num_fewshot`, or the `numFewshot` option). */
  readonly numFewshot: number
  /** Seed of the few-shot sampler's `random.Random` (the harness's `fewshot_random_seed`). */
  readonly fewshotSeed: number
  /** The few-shot pool and how examples are written; present when `numFewshot` > 0. */
  readonly fewshot?: FewshotSpec
  readonly until: readonly string[]
  readonly maxGenTokens: number
  /** `filter_list` (generate_until): each pipeline scores separately; absent, the output cut at `until`. */
  readonly filters?: readonly LmEvalFilter[]
  readonly multipleInputs: boolean
  readonly metrics: readonly LmEvalMetric[]
}

export type LmEvalOptions = {
  /** Documents from this JSONL or Parquet file instead of what the YAML names. */
  readonly dataFiles?: string
  /** Root of local copies: `<dataDir>/<dataset_path>/[<dataset_name>/]<split>.{jsonl,json,parquet}`. */
  readonly dataDir?: string
  /** Where task YAML files are looked up by task name (suites, bare names). */
  readonly tasksDir?: string
  /** Few-shot examples per document, instead of the YAML's `num_fewshot` (except where it is 0). */
  readonly numFewshot?: number
  /** The few-shot sampler's seed. @default 1234 (lm-eval's default `fewshot_random_seed`) */
  readonly fewshotSeed?: number
}

/** lm-eval's default `fewshot_random_seed`. */
export const DEFAULT_FEWSHOT_SEED = 1234

/** A suite's task: an lm-eval task name, or one run with its own `num_fewshot` (and name, when a task runs twice). */
export type LmEvalSuiteTask = string | { readonly task: string; readonly numFewshot: number; readonly alias?: string }

/**
 * Named task sets: `core`, the six tasks above at each YAML's own `num_fewshot`; `marin_core`, Marin's
 * `CORE_TASKS` with their few-shot counts (less `agieval_lsat_ar`, whose YAML is not here).
 */
export const LM_EVAL_SUITES: Readonly<Record<string, readonly LmEvalSuiteTask[]>> = {
  core: ['arc_easy', 'arc_challenge', 'hellaswag', 'lambada_openai', 'piqa', 'winogrande'],
  marin_core: [
    { task: 'arc_easy', numFewshot: 10 },
    { task: 'arc_challenge', numFewshot: 10 },
    { task: 'boolq', numFewshot: 10 },
    { task: 'commonsense_qa', numFewshot: 10 },
    { task: 'copa', numFewshot: 0 },
    { task: 'hellaswag', numFewshot: 0, alias: 'hellaswag_0shot' },
    { task: 'hellaswag', numFewshot: 10, alias: 'hellaswag_10shot' },
    { task: 'lambada_openai', numFewshot: 0 },
    { task: 'openbookqa', numFewshot: 0 },
    { task: 'piqa', numFewshot: 10 },
    { task: 'wsc273', numFewshot: 0 },
    { task: 'winogrande', numFewshot: 0 },
  ],
}

const FN_TAG = '!function'
const yamlTags = [{ tag: FN_TAG, resolve: (name: string) => ({ [FN_TAG]: name }) }]

const Field = z.union([z.string(), z.number(), z.array(z.unknown()), z.object({ [FN_TAG]: z.string() })])
const FnRef = z.object({ [FN_TAG]: z.string() })
const Config = z.looseObject({
  task: z.string().min(1),
  output_type: z.enum(LM_EVAL_OUTPUT_TYPES).default('generate_until'),
  dataset_path: z.string().nullish(),
  dataset_name: z.string().nullish(),
  dataset_kwargs: z.looseObject({ data_files: z.unknown().optional() }).nullish(),
  test_split: z.string().nullish(),
  validation_split: z.string().nullish(),
  training_split: z.string().nullish(),
  fewshot_split: z.string().nullish(),
  process_docs: FnRef.nullish(),
  doc_to_text: Field.nullish(),
  doc_to_target: Field.nullish(),
  doc_to_choice: Field.nullish(),
  // lm-eval's TaskConfig types it `str | None` (a column or template), or a `!function`
  doc_to_decontamination_query: z.union([z.string(), FnRef]).nullish(),
  description: z.string().nullish(),
  target_delimiter: z.string().nullish(),
  fewshot_delimiter: z.string().nullish(),
  num_fewshot: z.number().int().min(0).nullish(),
  fewshot_config: z
    .looseObject({
      sampler: z.string().nullish(),
      split: z.string().nullish(),
      samples: z.union([z.array(z.record(z.string(), z.unknown())), FnRef]).nullish(),
      process_docs: FnRef.nullish(),
      doc_to_text: Field.nullish(),
      doc_to_target: Field.nullish(),
      doc_to_choice: Field.nullish(),
      target_delimiter: z.string().nullish(),
      fewshot_delimiter: z.string().nullish(),
      gen_prefix: z.string().nullish(),
    })
    .nullish(),
  gen_prefix: z.string().nullish(),
  multiple_inputs: z.boolean().nullish(),
  repeats: z.number().int().positive().nullish(),
  generation_kwargs: z
    .looseObject({
      until: z.union([z.string(), z.array(z.string())]).optional(),
      max_gen_toks: z.number().int().positive().optional(),
      do_sample: z.boolean().optional(),
      temperature: z.number().optional(),
    })
    .nullish(),
  filter_list: FilterListConfig.nullish(),
  metric_list: z
    .array(
      z.looseObject({
        metric: z.string(),
        ignore_case: z.boolean().optional(),
        ignore_punctuation: z.boolean().optional(),
        regexes_to_ignore: z.array(z.string()).optional(),
      }),
    )
    .nullish(),
})

const bad = (file: string, msg: string) => new MarinError('BAD_CONFIG', `${file}: ${msg}`)

/**
 * The YAML as an object, `include`s merged underneath (relative to the including file). Files are known
 * by their real paths, so a cycle through a symlinked folder is found (and named) like any other.
 */
function readMerged(file: string, seen: string[] = []): Record<string, unknown> {
  let real: string
  try {
    real = realpathSync(file)
  } catch (err) {
    const by = seen.length > 0 ? ` (included by ${seen.at(-1)})` : ''
    throw new MarinError('BAD_CONFIG', `task file ${file}${by}: cannot read it; check the path`, { cause: err })
  }
  if (seen.includes(real)) {
    const cycle = [...seen.slice(seen.indexOf(real)), real]
    throw bad(cycle[0]!, `include cycle: ${cycle.join(' → ')}; remove one of these includes`)
  }
  let text: string
  try {
    text = readFileSync(real, 'utf8')
  } catch (err) {
    throw new MarinError('BAD_CONFIG', `task file ${file}: cannot read it; check the path`, { cause: err })
  }
  // yaml (some 70 modules) is required when a task file is read, not with the package
  const yaml = createRequire(import.meta.url)('yaml') as typeof Yaml
  let y: unknown
  try {
    y = yaml.parse(text, { customTags: yamlTags })
  } catch (err) {
    throw bad(file, `not valid YAML: ${(err as Error).message}`)
  }
  if (typeof y !== 'object' || y === null || Array.isArray(y)) throw bad(file, 'expected a YAML mapping')
  const own = y as Record<string, unknown>
  if (typeof own.include !== 'string') return own
  const base = readMerged(resolve(dirname(file), own.include), [...seen, real])
  const { include: _, ...rest } = own
  return { ...base, ...rest }
}

function dataFilesFor(spec: unknown, split: string, file: string): string[] | undefined {
  if (spec == null) return undefined
  if (typeof spec === 'string') return [spec]
  if (Array.isArray(spec) && spec.every((x) => typeof x === 'string')) return spec as string[]
  if (typeof spec === 'object' && !Array.isArray(spec)) {
    const v = (spec as Record<string, unknown>)[split]
    if (v === undefined)
      throw bad(file, `dataset_kwargs.data_files has no "${split}" split (has ${Object.keys(spec).join(', ')})`)
    return dataFilesFor(v, split, file)
  }
  throw bad(file, 'dataset_kwargs.data_files must be a path, a list of paths, or {split: path}')
}

async function readDocsFile(path: string, what: string): Promise<Doc[]> {
  if (extname(path) === '.parquet') {
    const out: Doc[] = []
    try {
      for await (const row of new ParquetReader({ path })) out.push(row)
    } catch (err) {
      throw new MarinError('BAD_CONFIG', `${what}: cannot read Parquet ${path}: ${(err as Error).message}`, {
        cause: err,
      })
    }
    return out
  }
  const lines = readFileSync(path, 'utf8').split('\n')
  const out: Doc[] = []
  lines.forEach((l, i) => {
    if (l.trim() === '') return
    try {
      out.push(JSON.parse(l) as Doc)
    } catch {
      throw new MarinError('BAD_CONFIG', `${what}: ${path}:${i + 1} is not a JSON object; write one per line`)
    }
  })
  return out
}

/** The split evaluated: `test_split`, else `validation_split`, else `training_split`. */
const evalSplit = (c: z.output<typeof Config>) => c.test_split ?? c.validation_split ?? c.training_split ?? undefined

/**
 * The documents of `split` (the evaluated one when `forEval`; `dataFiles` stands for that one only).
 * `purpose` says, in errors, what they were for.
 */
async function loadSplit(
  c: z.output<typeof Config>,
  file: string,
  o: LmEvalOptions,
  split: string | undefined,
  purpose: string,
  forEval: boolean,
): Promise<Doc[]> {
  let files: string[] | undefined
  if (o.dataFiles !== undefined && (forEval || split === evalSplit(c))) files = [o.dataFiles]
  else {
    const fromYaml = dataFilesFor(c.dataset_kwargs?.data_files, split ?? 'train', file)
    if (fromYaml) files = fromYaml.map((f) => resolve(dirname(file), f))
    else {
      if (!split) throw bad(file, 'names no test_split, validation_split or training_split to evaluate')
      const parts = [c.dataset_path ?? '', c.dataset_name ?? ''].filter(Boolean)
      const tried = ['.jsonl', '.json', '.parquet'].map((ext) => join(o.dataDir ?? '<data-dir>', ...parts, split + ext))
      const hit = o.dataDir !== undefined ? tried.find((p) => existsSync(p)) : undefined
      if (!hit)
        throw bad(
          file,
          `no local data for task ${c.task}${purpose}: looked for ${tried.join(', ')}; ` +
            `pass --data-dir DIR holding ${[...parts, split].join('/')}.jsonl (or .parquet)` +
            (forEval ? ', or --data-files FILE,' : '') +
            ' or set dataset_kwargs.data_files',
        )
      files = [hit]
    }
  }
  const docs: Doc[] = []
  for (const f of files) {
    if (!existsSync(f)) throw bad(file, `data file ${f} does not exist`)
    docs.push(...(await readDocsFile(f, file)))
  }
  if (docs.length === 0) throw bad(file, `no documents in ${files.join(', ')}`)
  return docs
}

/** The end of an unknown `!function`'s message: the built-ins task `task` has, if any. */
function noBuiltin(task: string): string {
  const known = knownFunctionNames(task)
  return known.length > 0
    ? `has no built-in equivalent for task ${task}; its built-ins are ${known.join(', ')}`
    : `task ${task} has no built-in functions; write the field as a template or column name`
}

function processDocs(ref: { [FN_TAG]: string } | null | undefined, task: string, file: string, key: string) {
  if (!ref) return (docs: Doc[]) => docs
  const name = ref[FN_TAG]
  const fn = knownFunction(task, name)
  if (!fn) throw bad(file, `${key}: !function ${name} is Python, and ${noBuiltin(task)}`)
  return (docs: Doc[]) => docs.map((d) => fn(d) as Doc)
}

/** The few-shot pool and writing rules, as the harness resolves `fewshot_config` over the task's fields. */
async function fewshotSpec(
  c: z.output<typeof Config>,
  file: string,
  o: LmEvalOptions,
  n: number,
  task: { docToText: DocField; docToTarget: DocField; docToChoice?: DocField },
): Promise<FewshotSpec> {
  const fc = c.fewshot_config ?? {}
  if (c.output_type === 'loglikelihood_rolling')
    throw bad(file, `num_fewshot: ${n}: loglikelihood_rolling tasks take no few-shot examples; set it to 0`)
  if (c.gen_prefix != null || fc.gen_prefix != null) throw bad(file, 'gen_prefix is not supported; remove it')
  const sampler = fc.sampler ?? 'default'
  if (!(FEWSHOT_SAMPLERS as readonly string[]).includes(sampler))
    throw bad(file, `fewshot_config.sampler: ${sampler} is not supported; use ${FEWSHOT_SAMPLERS.join(', ')}`)
  const named = fc.split ?? c.fewshot_split ?? undefined
  let docs: Doc[]
  let from: string
  if (named !== undefined) {
    const process = processDocs(fc.process_docs ?? c.process_docs, c.task, file, 'fewshot_config.process_docs')
    docs = process(await loadSplit(c, file, o, named, ' (few-shot examples)', false))
    from = `split "${named}"`
  } else if (fc.samples != null) {
    if (!Array.isArray(fc.samples))
      throw bad(file, `fewshot_config.samples: !function ${fc.samples[FN_TAG]} is Python; list the samples inline`)
    docs = fc.samples as Doc[]
    from = 'fewshot_config.samples'
  } else {
    const split = c.training_split ?? c.validation_split ?? c.test_split ?? undefined
    docs = processDocs(
      c.process_docs,
      c.task,
      file,
      'process_docs',
    )(await loadSplit(c, file, o, split, ' (few-shot examples)', split === evalSplit(c)))
    from = `split "${split}"`
  }
  const spec: FewshotSpec = {
    docs,
    from,
    sampler: sampler as FewshotSpec['sampler'],
    // The harness leaves the evaluated document out when the few-shot split equals the test split (unset == unset).
    excludeEvalDoc: (named ?? null) === (c.test_split ?? null),
    docToText: field(fc.doc_to_text, 'fewshot_config.doc_to_text', c.task, file) ?? task.docToText,
    docToTarget: field(fc.doc_to_target, 'fewshot_config.doc_to_target', c.task, file) ?? task.docToTarget,
    ...((field(fc.doc_to_choice, 'fewshot_config.doc_to_choice', c.task, file) ?? task.docToChoice) !== undefined
      ? { docToChoice: field(fc.doc_to_choice, 'fewshot_config.doc_to_choice', c.task, file) ?? task.docToChoice }
      : {}),
    targetDelimiter: fc.target_delimiter ?? c.target_delimiter ?? ' ',
    fewshotDelimiter: fc.fewshot_delimiter ?? c.fewshot_delimiter ?? '\n\n',
  }
  const need = poolNeeded(spec, n)
  if (docs.length < need)
    throw bad(
      file,
      `num_fewshot: ${n} needs ${need} documents in the few-shot ${from}` +
        (need > n ? ' (the evaluated one is left out of each draw)' : '') +
        `, which has ${docs.length}; lower num_fewshot`,
    )
  return spec
}

function field(v: z.output<typeof Field> | null | undefined, key: string, task: string, file: string) {
  if (v == null) return undefined
  if (typeof v === 'object' && !Array.isArray(v)) {
    const name = (v as Record<string, string>)[FN_TAG]!
    const fn = knownFunction(task, name)
    if (!fn) throw bad(file, `${key}: !function ${name} is Python, and ${noBuiltin(task)}`)
    return fn
  }
  return v as DocField
}

/**
 * Read an lm-eval task YAML and its documents.
 * @example const task = await readLmEvalTask('tasks/arc/arc_easy.yaml', { dataDir: 'data' })
 */
export async function readLmEvalTask(file: string, o: LmEvalOptions = {}): Promise<LmEvalTask> {
  const raw = readMerged(file)
  const parsed = Config.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw bad(file, `${issue.path.join('.') || '(file)'}: ${issue.message}`)
  }
  const c = parsed.data
  const type = c.output_type
  // As the harness: a run's num_fewshot replaces the task's, except where the task sets 0.
  const numFewshot = c.num_fewshot === 0 ? 0 : (o.numFewshot ?? c.num_fewshot ?? 0)
  if (!Number.isInteger(numFewshot) || numFewshot < 0)
    throw bad(file, `num_fewshot: ${numFewshot} must be a whole number of examples`)
  if ((c.repeats ?? 1) > 1)
    throw bad(file, `repeats: ${c.repeats}: generation here is greedy, so repeats would be identical; set it to 1`)
  const gk = c.generation_kwargs
  if (gk?.do_sample === true || (gk?.temperature ?? 0) > 0)
    throw bad(file, 'generation_kwargs: sampling (do_sample, temperature > 0) is not supported; generation is greedy')
  if (c.filter_list != null && type !== 'generate_until')
    throw bad(file, `filter_list applies to generate_until tasks here, not ${type}; remove it`)
  const named = `${file} (task ${c.task})`
  const filters = c.filter_list != null ? parseFilterList(c.filter_list, named) : undefined
  const metrics = (c.metric_list ?? LM_EVAL_METRICS[type].defaults.map((metric) => ({ metric }))).map((m, i) => {
    if (!LM_EVAL_METRICS[type].all.includes(m.metric))
      throw bad(
        file,
        `metric_list: ${m.metric} is not computed for output_type ${type}; ` +
          `use ${LM_EVAL_METRICS[type].all.join(', ')}`,
      )
    const e = m as { ignore_case?: boolean; ignore_punctuation?: boolean; regexes_to_ignore?: string[] }
    const where = `${named}: metric_list[${i}] (${m.metric})`
    // Checked now, so a pattern that is not valid fails before any document is run.
    ignorePatterns(e.regexes_to_ignore ?? [], where)
    return {
      metric: m.metric,
      ignoreCase: e.ignore_case ?? false,
      ignorePunctuation: e.ignore_punctuation ?? false,
      regexesToIgnore: e.regexes_to_ignore ?? [],
      where,
    }
  })
  const docToText = field(c.doc_to_text, 'doc_to_text', c.task, file)
  const docToTarget = field(c.doc_to_target, 'doc_to_target', c.task, file)
  const docToChoice = field(c.doc_to_choice, 'doc_to_choice', c.task, file)
  if (docToText === undefined && type !== 'loglikelihood_rolling') throw bad(file, 'doc_to_text: missing')
  if (docToTarget === undefined) throw bad(file, 'doc_to_target: missing')
  const query = field(c.doc_to_decontamination_query, 'doc_to_decontamination_query', c.task, file)
  if (type === 'multiple_choice' && docToChoice === undefined) throw bad(file, 'doc_to_choice: missing')
  const docs = processDocs(
    c.process_docs,
    c.task,
    file,
    'process_docs',
  )(await loadSplit(c, file, o, evalSplit(c), '', true))
  const fewshot =
    numFewshot > 0
      ? await fewshotSpec(c, file, o, numFewshot, { docToText: docToText ?? '', docToTarget, docToChoice })
      : undefined
  const until = c.generation_kwargs?.until
  return {
    name: c.task,
    kind: 'lm_eval',
    outputType: type,
    source: file,
    docs,
    docToText: docToText ?? '',
    docToTarget,
    ...(docToChoice !== undefined ? { docToChoice } : {}),
    ...(query !== undefined ? { docToDecontaminationQuery: query } : {}),
    description: c.description ?? '',
    targetDelimiter: c.target_delimiter ?? ' ',
    fewshotDelimiter: c.fewshot_delimiter ?? '\n\n',
    numFewshot,
    fewshotSeed: o.fewshotSeed ?? DEFAULT_FEWSHOT_SEED,
    ...(fewshot ? { fewshot } : {}),
    until: until === undefined ? [c.fewshot_delimiter ?? '\n\n'] : typeof until === 'string' ? [until] : until,
    maxGenTokens: c.generation_kwargs?.max_gen_toks ?? 256,
    ...(filters ? { filters } : {}),
    multipleInputs: c.multiple_inputs ?? false,
    metrics,
  }
}

/** Every `*.yaml` under `dir` whose own `task:` is `name` (the first found), or undefined. */
export function findTaskYaml(dir: string, name: string): string | undefined {
  const walk = (d: string): string | undefined => {
    for (const e of readdirSync(d).sort()) {
      const p = join(d, e)
      if (statSync(p).isDirectory()) {
        const hit = walk(p)
        if (hit) return hit
      } else if (e.endsWith('.yaml') || e.endsWith('.yml')) {
        const m = /^task:\s*(\S+)\s*$/m.exec(readFileSync(p, 'utf8'))
        if (m?.[1] === name) return p
      }
    }
    return undefined
  }
  return walk(dir)
}
