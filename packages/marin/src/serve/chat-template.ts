/**
 * @module Chat templates: how a list of messages becomes the prompt text. A checkpoint's
 * `tokenizer_config.json` may carry a Jinja `chat_template` (as Hugging Face tokenizers do); it is
 * rendered with `messages`, `add_generation_prompt: true`, `bos_token` and `eos_token`, and the
 * assistant turn ends at `eos_token`. Without one, ChatML-style turns are written as plain text,
 * so any byte-level tokenizer encodes them, and the turn ends at `<|im_end|>`. A checkpoint's template
 * is someone else's code: it renders in the sandbox on its own worker thread (`template-worker.ts`), so
 * one that loops or allocates without bound is refused with BAD_TEMPLATE while the server keeps serving.
 */
import { MarinError } from '../errors.js'
import { SandboxedTemplate } from './template-sandbox.js'
import { TemplateWorker } from './template-worker.js'

export const CHAT_END = '<|im_end|>'

export type ChatTurn = { readonly role: string; readonly content: string | readonly { readonly text: string }[] }

/** Renders messages into the prompt; `stops` end the assistant's turn. */
export type ChatTemplate = {
  /** Rejects (the template's own `raise_exception`, or a rendering error) when the messages do not fit it, and
   * with BAD_TEMPLATE when the template passes the sandbox's limits. */
  render(messages: readonly ChatTurn[]): Promise<string>
  /** Ends what rendering holds (a worker thread). */
  close?(): Promise<void>
  readonly stops: readonly string[]
  /** The rendered text holds the tokenizer's special tokens (BOS, turn markers) as text, to encode as their ids
   * (a checkpoint's own template); otherwise it is plain text and the tokenizer adds its own. */
  readonly writesSpecialTokens: boolean
}

const textOf = (m: ChatTurn) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join(''))

/** `<|im_start|>role\ncontent<|im_end|>\n` per message, then the open assistant turn. */
export function renderChat(messages: readonly ChatTurn[]): string {
  const body = messages.map((m) => `<|im_start|>${m.role}\n${textOf(m)}${CHAT_END}\n`)
  return `${body.join('')}<|im_start|>assistant\n`
}

/** The template used when the checkpoint has none. */
export const CHATML: ChatTemplate = {
  render: async (messages) => renderChat(messages),
  stops: [CHAT_END],
  writesSpecialTokens: false,
}

/** A special token as `tokenizer_config.json` writes it: a string or an AddedToken `{content, …}`. */
function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v
  if (typeof v === 'object' && v !== null && typeof (v as { content?: unknown }).content === 'string')
    return (v as { content: string }).content
  return undefined
}

/**
 * The chat template of a parsed `tokenizer_config.json` (`file` names it in errors), or undefined
 * when it has none. `chat_template` may be one template or a list of `{name, template}`, of which
 * "default" is used. A template that does not parse is a BAD_USAGE error naming the file.
 */
export function chatTemplateFromConfig(config: unknown, file: string): ChatTemplate | undefined {
  if (typeof config !== 'object' || config === null) return undefined
  const c = config as Record<string, unknown>
  let source = c.chat_template
  if (Array.isArray(source)) {
    const named = source.find((t: { name?: unknown }) => t?.name === 'default') as { template?: unknown } | undefined
    if (named === undefined)
      throw new MarinError(
        'BAD_USAGE',
        `${file}: chat_template lists named templates but none is "default"; add one or remove the list`,
      )
    source = named.template
  }
  if (source == null) return undefined
  if (typeof source !== 'string')
    throw new MarinError(
      'BAD_USAGE',
      `${file}: chat_template must be a string (a Jinja template), got ${typeof source}`,
    )
  const name = `${file}: chat_template`
  try {
    // Parsed here too, so a template that does not parse fails loading rather than every request.
    new SandboxedTemplate(source, name)
  } catch (err) {
    const why = (err as Error).message
    throw new MarinError('BAD_USAGE', `${file}: chat_template is not a valid Jinja template: ${why}`, { cause: err })
  }
  const bos = tokenText(c.bos_token),
    eos = tokenText(c.eos_token)
  const worker = new TemplateWorker(source, name)
  return {
    render: (messages) =>
      worker.render({
        messages: messages.map((m) => ({ role: m.role, content: textOf(m) })),
        add_generation_prompt: true,
        ...(bos !== undefined ? { bos_token: bos } : {}),
        ...(eos !== undefined ? { eos_token: eos } : {}),
      }),
    close: () => worker.close(),
    stops: eos !== undefined && eos !== '' ? [eos] : [],
    writesSpecialTokens: true,
  }
}
