/**
 * The benchmark suite interface. A suite is one file in `bench/suites/<name>.ts` whose default
 * export is a `BenchSuite`; `bench/run.ts` discovers the files, so adding a suite needs no edit
 * anywhere else. `npm run bench` runs all suites; `npm run bench -- --suite <name>` runs one.
 * Every `.ts` file directly in bench/suites/ must be a suite: code only one suite uses goes in
 * `bench/suites/<name>/` (not discovered), code several use in bench/, fakes shared with the tests
 * in testkit/.
 */

export interface BenchLimits {
  /** Requests per scenario before measuring (not counted). */
  warmup: number;
  /** A scenario stops after this many measured requests… */
  maxRequests: number;
  /** …or after this many seconds, whichever comes first. */
  maxSeconds: number;
}

export interface BenchContext {
  /** Repository root (absolute). */
  root: string;
  /** Where result files go (bench/results). */
  resultsDir: string;
  limits: BenchLimits;
  /** Run the bridge under `node --cpu-prof` and summarise where its time goes. */
  profile: boolean;
  /** `--scenario`: run only these scenarios (ids of the suite's own; a suite without scenarios ignores it). */
  scenarios?: string[];
  /** Progress line on stderr (results go in the returned markdown). */
  log(message: string): void;
}

/** One stated target and whether the run met it. */
export interface TargetCheck {
  name: string;
  goal: string;
  measured: string;
  pass: boolean;
}

export interface SuiteResult {
  /** Markdown body (tables, notes); run.ts adds the machine header and the command. */
  markdown: string;
  targets: TargetCheck[];
}

export interface BenchSuite {
  /** Name used with `--suite`. */
  name: string;
  /** One line for `--list`. */
  description: string;
  /** Result file name part: bench/results/<ISO date>-<resultSlug>.md (default: name). */
  resultSlug?: string;
  run(ctx: BenchContext): Promise<SuiteResult>;
}
