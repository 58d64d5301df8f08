import { brownParagraphs } from '../src/test-support/brown.ts'
for (const f of [4, 8, 12]) { const o = [...new Set(brownParagraphs(f))]; const h = Math.floor(o.length/2); console.log(f, o.length, o.slice(0,h).filter((p) => p.split(' ').length >= 40).length, o.join(' ').length) }
