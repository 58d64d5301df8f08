/**
 * @module hyparquet and hyparquet-compressors, imported at first use (some 45 modules): a process that
 * imports zephyr but reads no Parquet file does not load them. One load per process, shared by the reader
 * and the footer and page checks.
 */
import type * as Hyparquet from 'hyparquet'
import type * as Column from 'hyparquet/src/column.js'
import type * as Compressors from 'hyparquet-compressors'

export type HyparquetModules = {
  readonly parquetReadObjects: typeof Hyparquet.parquetReadObjects
  readonly parquetSchema: typeof Hyparquet.parquetSchema
  readonly parquetMetadata: typeof Hyparquet.parquetMetadata
  readonly parquetHeader: typeof Column.parquetHeader
  readonly compressors: typeof Compressors.compressors
}

let loaded: Promise<HyparquetModules> | undefined

/** The hyparquet functions zephyr uses, loaded on the first call. */
export function hyparquet(): Promise<HyparquetModules> {
  loaded ??= Promise.all([
    import('hyparquet'),
    import('hyparquet/src/column.js'),
    import('hyparquet-compressors'),
  ]).then(([h, column, c]) => ({
    parquetReadObjects: h.parquetReadObjects,
    parquetSchema: h.parquetSchema,
    parquetMetadata: h.parquetMetadata,
    parquetHeader: column.parquetHeader,
    compressors: c.compressors,
  }))
  return loaded
}
