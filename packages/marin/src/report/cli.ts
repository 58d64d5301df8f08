/** @module `marin publish-report --source DIR|EXPERIMENT --target DIR|URL [--repair] [--docs DIR]`: adds the
 * run's page to the site at the target (which keeps the runs published before) and updates its list of runs. */
import { join } from 'node:path'
import type { Command } from 'commander'
import { prefixOf, type CliIo, type Run } from '../cli/io.js'
import { buildReport } from './build.js'
import { publishSite } from './publish.js'
import { runFolder } from './site-parts.js'

/** The `publish-report` command: builds the report site of a run and publishes it. */
export function publishReportCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .requiredOption(
      '--source <dir|experiment>',
      'a record file, a folder of runs, a prefix, or NAME[/RUN] under $MARIN_PREFIX (newest run by default)',
    )
    .option('--target <dir|url>', 'a folder, any storage URL, or an http(s):// URL accepting PUT', './site')
    .option(
      '--repair',
      "drop entries of the target's manifest (.marin-report.json) that are not paths inside the site, " +
        'saying which, instead of refusing to publish',
    )
    .option(
      '--docs <dir>',
      'also publish the docs site `pnpm run docs` built there (site-docs/), linked from each page',
    )
    .option('--json', 'print what was published as JSON')
    .action((o: { source: string; target: string; json?: boolean; repair?: boolean; docs?: string }) =>
      run(async () => {
        const { data, site } = await buildReport(o.source, prefixOf(io), { docs: o.docs })
        const res = await publishSite(site, o.target, { repair: !!o.repair })
        if (o.json)
          io.out(JSON.stringify({ experiment: data.record.experiment, run: data.record.run, ...res }, null, 2))
        else {
          for (const w of [...data.warnings, ...res.warnings]) io.err(`warning: ${w}`)
          io.out(
            `report of ${data.record.experiment} run ${data.record.run}: ` +
              `${res.uploaded.length} files uploaded, ${res.unchanged.length} ` +
              `unchanged, ${res.deleted.length} deleted`,
          )
          const at = (p: string) =>
            /^[a-z][a-z0-9+.-]*:\/\//i.test(res.target) ? `${res.target.replace(/\/+$/, '')}/${p}` : join(res.target, p)
          io.out(`run page: ${at(`${runFolder(data.record)}/index.html`)}`)
          io.out(`all runs: ${at('index.html')}`)
        }
        return 0
      }),
    )
}
