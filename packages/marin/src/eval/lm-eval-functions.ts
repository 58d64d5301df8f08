/**
 * @module Built-in equivalents of the Python functions lm-evaluation-harness task YAML names with
 * `!function` (`process_docs`, `doc_to_*`), for the tasks Marin runs. Each reproduces the upstream
 * function's behaviour on one document.
 */

/** One dataset row. */
export type Doc = Record<string, unknown>
/** A `!function`: a document to a value (`process_docs`: the processed document). */
export type DocFunction = (doc: Doc) => unknown

const str = (v: unknown) => (typeof v === 'string' ? v : String(v))

/** HellaSwag's text clean-up: " [title]" becomes ". ", other bracketed tags go, double spaces close up. */
function hellaswagPreprocess(text: string): string {
  return text
    .trim()
    .replace(/ \[title\]/g, '. ')
    .replace(/\[.*?\]/g, '')
    .replace(/ {2}/g, ' ')
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1).toLowerCase()

/** COPA's connector between premise and choice, by its `question` (a Map: a document's text is no key of Object). */
const copaConnector = new Map([
  ['cause', 'because'],
  ['effect', 'therefore'],
])
/** COPA's choice joined onto the premise: its first letter lowercased. */
const copaChoice = (c: unknown) => {
  const x = str(c)
  return x.charAt(0).toLowerCase() + x.slice(1)
}

const WSC_UPPER_PRONOUNS = ['A', 'An', 'The', 'She', 'He', 'It', 'They', 'My', 'His', 'Her', 'Their']

/** WSC273's option clean-up: possessives get "'s"; a capitalized first word is lowercased mid-sentence. */
function wscOption(doc: Doc, option: string): string {
  let o = option
  if (['my', 'his', 'her', 'our', 'their'].includes(str(doc.pronoun).toLowerCase())) o += "'s"
  const pronoun = o.split(/\s+/)[0]!
  const startOfSentence = str(doc.text).at(Number(doc.pronoun_loc) - 2) === '.'
  if (!startOfSentence && WSC_UPPER_PRONOUNS.includes(pronoun)) return o.split(pronoun).join(pronoun.toLowerCase())
  return o
}

// Names from task files are looked up in Maps: on a plain object `__proto__` or `constructor` would be found.
const FUNCTIONS: Readonly<Record<string, Readonly<Record<string, DocFunction>>>> = {
  hellaswag: {
    'utils.process_docs': (doc) => ({
      ...doc,
      query: hellaswagPreprocess(`${str(doc.activity_label)}: ${str(doc.ctx_a)} ${capitalize(str(doc.ctx_b))}`),
      choices: (doc.endings as unknown[]).map((e) => hellaswagPreprocess(str(e))),
      gold: Number.parseInt(str(doc.label), 10),
    }),
  },
  copa: {
    'utils.doc_to_text': (doc) => `${str(doc.premise).trim().slice(0, -1)} ${copaConnector.get(str(doc.question))}`,
    'utils.doc_to_target': (doc) => ` ${copaChoice(Number(doc.label) === 0 ? doc.choice1 : doc.choice2)}`,
    'utils.doc_to_choice': (doc) => [` ${copaChoice(doc.choice1)}`, ` ${copaChoice(doc.choice2)}`],
  },
  wsc273: {
    'utils.process_doc': (doc) => {
      // As upstream: the text's double spaces close up first, and the options are judged against that text.
      const d: Doc = { ...doc, text: str(doc.text).replaceAll('  ', ' ') }
      return { ...d, options: (doc.options as unknown[]).map((o) => wscOption(d, str(o))) }
    },
  },
  winogrande: {
    'preprocess_winogrande.doc_to_text': (doc) =>
      new Map([
        ['1', 0],
        ['2', 1],
      ]).get(str(doc.answer)),
    'preprocess_winogrande.doc_to_target': (doc) => {
      const s = str(doc.sentence)
      return s.slice(s.indexOf('_') + 1).trim()
    },
    'preprocess_winogrande.doc_to_choice': (doc) => {
      const s = str(doc.sentence),
        i = s.indexOf('_')
      return [doc.option1, doc.option2].map((o) => s.slice(0, i) + str(o))
    },
  },
}

const BY_FAMILY: ReadonlyMap<string, ReadonlyMap<string, DocFunction>> = new Map(
  Object.entries(FUNCTIONS).map(([family, fns]) => [family, new Map(Object.entries(fns))]),
)

/** The built-ins of task `task`'s family (`hellaswag…`, `winogrande…`, `copa`, `wsc273`), or none. */
function familyOf(task: string): ReadonlyMap<string, DocFunction> | undefined {
  for (const [family, fns] of BY_FAMILY) if (task.startsWith(family)) return fns
  return undefined
}

/** The built-in for `!function name` in task `task`, or undefined. */
export function knownFunction(task: string, name: string): DocFunction | undefined {
  return familyOf(task)?.get(name)
}

/** The `!function` names task `task` has built-ins for (for errors that list them). */
export function knownFunctionNames(task: string): string[] {
  return [...(familyOf(task)?.keys() ?? [])]
}
