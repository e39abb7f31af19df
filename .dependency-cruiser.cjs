/**
 * The layer rules, once, as data (dependency-cruiser; run by `npm run lint:layers` and `npm test`).
 * A new violation fails the lint step. docs/extending.md says which layer a new file belongs to.
 *
 *   domain/     the concepts as code: imports nothing of ours, no Node built-ins, no packages
 *   db/         schema and named queries: imports only domain/; the only place SQL is written
 *   scheduler/  the scheduling pass (read, plan, apply): imports only db/ and domain/; only activities/ run it
 *   runtime/    process helpers shared by every executable (logger, tokens, files): no db/, no drizzle
 *   workflows/  deterministic Temporal code: @temporalio/workflow|common and domain/; they own the
 *               interfaces of the activities they call (workflows/*-activities.ts), which activities/ implement
 *   activities/, api/, temporal/, workers/  the processes' code; clients of workflows import only
 *               their messages, types, names and activity interfaces, never a workflow's implementation
 *   cli/        gpuctl: nothing outside cli/ imports it (tests, benchmarks and the docs generator aside)
 *   web/        the console: domain/ and the API's schemas (api/schemas/) only
 */
const ours = '^(activities|api|bench|cli|db|domain|examples|runtime|scheduler|scripts|sdk|temporal|test|web|workers|workflows)/|^config\\.ts$';
/** The workflow files that clients may import: messages, activity interfaces, shared types, names, start arguments, failures. */
const workflowInterface = '^workflows/(?:[a-z-]+-messages|[a-z-]+-activities|types|names|search-attributes|job-start|failures)\\.ts$';
/** A layer that imports, of ours, only itself and the layers it stands on. */
const standsOn = (name, comment, folder, below) => ({
  name,
  severity: 'error',
  comment,
  from: { path: `^${folder}/` },
  to: { path: ours, pathNot: `^(${[folder, ...below].join('|')})/` },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Imports run one way: a cycle (of values or of types) means two modules are one concern or one is in the wrong layer.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-imports-nothing',
      severity: 'error',
      comment: 'domain/ is plain TypeScript with no I/O: every layer imports it, it imports none of them, no Node built-ins and no packages.',
      from: { path: '^domain/' },
      to: { pathNot: '^domain/' },
    },
    {
      name: 'the-console-stands-on-domain-and-the-api-schemas',
      severity: 'error',
      comment: 'web/ is the console, a browser bundle: it knows the concepts (domain/) and the shapes the API answers (api/schemas/), never the processes, the database or the workflows.',
      from: { path: '^web/' },
      to: { path: ours, pathNot: '^(web|domain|api/schemas)/' },
    },
    standsOn('db-imports-only-domain', 'db/ knows the domain, drizzle and its drivers; never the orchestration, the processes or the tools.', 'db', ['domain']),
    {
      name: 'sql-lives-in-db',
      severity: 'error',
      comment: 'Queries are named functions in db/queries/: no caller builds SQL. (temporal/cluster.ts creates the Temporal server\'s own databases, not ours.)',
      from: { path: '^(activities|api|cli|domain|runtime|scheduler|scripts|temporal|workers|workflows)/|^config\\.ts$', pathNot: '^temporal/cluster\\.ts$' },
      to: { path: '^node_modules/(drizzle-orm|pg|@electric-sql)/', dependencyTypesNot: ['type-only'] },
    },
    standsOn(
      'scheduler-sits-on-db-and-domain',
      'The scheduling pass reads through db/queries, plans with domain/ and applies through db/queries: it knows those two layers and nothing above them.',
      'scheduler',
      ['db', 'domain'],
    ),
    {
      name: 'only-activities-run-the-scheduler',
      severity: 'error',
      comment: 'The pass is run by the scheduler workflow\'s activity (activities/control/scheduling.ts); the layers below it never call up into it, and nothing else runs it (tests and benchmarks aside).',
      from: { path: ours, pathNot: '^(scheduler|activities|test|bench)/' },
      to: { path: '^scheduler/' },
    },
    {
      name: 'runtime-has-no-database',
      severity: 'error',
      comment: 'runtime/ is loaded by every executable, gpuctl included: it must not pull in the database layer.',
      from: { path: '^runtime/' },
      to: { path: ['^(activities|api|cli|db|scheduler|temporal|workers|workflows)/', '^node_modules/(drizzle-orm|pg|@electric-sql)/'] },
    },
    {
      name: 'workflows-are-pure',
      severity: 'error',
      comment: 'Workflows are deterministic sandboxes: @temporalio/workflow and common, their own files and domain/; no Node built-ins, no runtime code.',
      from: { path: '^workflows/' },
      to: { pathNot: ['^(workflows|domain)/', '^node_modules/@temporalio/(workflow|common)/'] },
    },
    {
      name: 'workflows-own-their-activity-interfaces',
      severity: 'error',
      comment: 'No arrow runs back up: a workflow calls activities through an interface of its own (workflows/control-activities.ts, gpu-host-activities.ts) that activities/ implements, so workflows/ imports nothing from activities/, not even a type.',
      from: { path: '^workflows/' },
      to: { path: '^activities/' },
    },
    {
      name: 'clients-import-workflow-interfaces-only',
      severity: 'error',
      comment: "Clients of workflows (the API, the workers' code, the CLI, tools) import a workflow's messages, types and names, never its implementation.",
      from: { path: '^(activities|api|bench|cli|db|runtime|scheduler|scripts|temporal|workers)/' },
      to: { path: '^workflows/', pathNot: workflowInterface },
    },
    {
      name: 'nothing-imports-cli',
      severity: 'error',
      comment: 'gpuctl is the outermost layer: shared code lives in runtime/ (or domain/), not cli/. Tests, benchmarks and the docs generator drive it.',
      from: { pathNot: '^(cli|test|bench)/|^scripts/gen-docs\\.ts$' },
      to: { path: '^cli/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|db/migrations)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
