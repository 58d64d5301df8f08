/**
 * @module The key of the method by which a job source submits its own jobs to a `JobScheduler`, in its own order:
 * marin's `Experiment` has one, so `scheduler.submit(experiment)` runs its steps as jobs, each once its dependencies
 * are done. A registered symbol, so that a source made by another copy of a package is recognized too; a module of
 * its own (`@marin/iris/submit-to`), so that defining such a source loads nothing else of iris.
 */
export const SUBMIT_TO: unique symbol = Symbol.for('iris.submitTo') as never
