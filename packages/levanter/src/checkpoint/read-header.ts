/**
 * @module A local safetensors file's header alone, without reading its data: what the tensors are,
 * checked as the format requires, before anything their size depends on is allocated. The header is
 * at most 100 MB (the format's cap). Files in finestore are read whole instead (a blob is verified
 * only whole), and their header taken from the bytes (`readSafetensorsHeader`).
 */
import fs from 'node:fs'
import { parseSafetensorsHeader, safetensorsHeaderLength } from './safetensors.js'
import type { SafetensorsHeader } from './safetensors.js'

/** The header of the local safetensors file `file`. */
export function readHeaderFromFile(file: string): SafetensorsHeader & { readonly fileSize: number } {
  const fd = fs.openSync(file, 'r')
  try {
    const fileSize = fs.fstatSync(fd).size
    const first8 = new Uint8Array(8)
    fs.readSync(fd, first8, 0, 8, 0)
    const len = safetensorsHeaderLength(first8, fileSize, file)
    const json = new Uint8Array(len)
    fs.readSync(fd, json, 0, len, 8)
    return { ...parseSafetensorsHeader(json, fileSize - 8 - len, file), fileSize }
  } finally {
    fs.closeSync(fd)
  }
}
