/**
 * @module The chat template: ChatML-style turns written as plain text, so any byte-level tokenizer
 * encodes them. The assistant turn ends at `<|im_end|>`, which is always a stop string for chat.
 */

export const CHAT_END = '<|im_end|>'

export type ChatTurn = { readonly role: string; readonly content: string | readonly { readonly text: string }[] }

/** `<|im_start|>role\ncontent<|im_end|>\n` per message, then the open assistant turn. */
export function renderChat(messages: readonly ChatTurn[]): string {
  const body = messages.map(
    (m) =>
      `<|im_start|>${m.role}\n` +
      `${typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('')}` +
      `${CHAT_END}\n`,
  )
  return `${body.join('')}<|im_start|>assistant\n`
}
