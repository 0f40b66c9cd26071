/**
 * Tool pre-execution: for models that describe tools instead of calling them, the bridge runs the
 * obvious tool (web search, page fetch, news) BEFORE the model answers and puts the results in the
 * prompt as live data. A failing tool never blocks the answer: the model answers without it.
 */
import type { Logger } from "pino";
import { childLogger } from "../../core/log/logger.js";
import type { ResolvedModel } from "../../core/config/schema.js";
import type { LiveData } from "../context/stateless.js";
import { parseIntentsConfig } from "../intents/schema.js";
import type { DebugLog } from "../../core/log/debug-log.js";
import type { Route } from "../models/routes.js";
import type { IntentReport } from "./chat.js";
import type { ToolRunner } from "../web-tools/preexec.js";

/** The key of a model without intents settings of its own. */
const NO_SETTINGS = {};

export class PreExecutor {
  private readonly runners = new Map<string, ToolRunner | null>();
  /**
   * The runner of a model's settings once found, by its `intents` object and its tool-result budget
   * (a route may copy the model, never these): the settings are not parsed again every turn.
   */
  private readonly found = new WeakMap<object, Map<number, ToolRunner | null>>();

  constructor(
    private readonly logger: Logger,
    private readonly debugLog: DebugLog,
  ) {}

  /**
   * One runner per distinct settings (models sharing settings share a cache). The tools (page
   * extraction, search) are loaded on first use: a bridge whose models never fetch live data
   * never loads them.
   */
  private async runnerFor(model: ResolvedModel): Promise<ToolRunner | null> {
    const mine = this.known(model);
    if (mine !== undefined) return mine;
    const runner = await this.findRunner(model);
    const key = model.intents ?? NO_SETTINGS;
    let byBudget = this.found.get(key);
    if (!byBudget) this.found.set(key, (byBudget = new Map()));
    byBudget.set(model.context.maxToolResultChars, runner);
    return runner;
  }

  private known(model: ResolvedModel): ToolRunner | null | undefined {
    return this.found.get(model.intents ?? NO_SETTINGS)?.get(model.context.maxToolResultChars);
  }

  private async findRunner(model: ResolvedModel): Promise<ToolRunner | null> {
    const cfg = parseIntentsConfig(model.intents ?? {});
    const id = JSON.stringify([cfg, model.context.maxToolResultChars]);
    const known = this.runners.get(id);
    if (known !== undefined) return known;
    if (!cfg.enabled) {
      this.runners.set(id, null);
      return null;
    }
    const { ToolRunner } = await import("../web-tools/preexec.js");
    let runner = this.runners.get(id); // another turn may have made it meanwhile
    if (runner === undefined) {
      const maxToolResultChars = Math.min(cfg.maxToolResultChars, model.context.maxToolResultChars);
      runner = new ToolRunner(cfg, childLogger(this.logger, { part: "preexec" }), { maxToolResultChars });
      this.runners.set(id, runner);
    }
    return runner;
  }

  /** `report` hears which tool ran and whether it worked (the pipeline publishes it as `intent.executed`). */
  async enrich(
    userText: string,
    route: Route,
    signal: AbortSignal,
    log: Logger = this.logger,
    report?: (r: IntentReport) => void,
  ): Promise<LiveData[]> {
    if (!userText || route.model.sessionMode === "passthrough") return [];
    const found = this.known(route.model);
    const runner = found !== undefined ? found : await this.runnerFor(route.model);
    if (!runner) return [];
    const res = await runner.preExecute(userText, signal);
    if (res.intent) {
      this.debugLog.line(`Intent detected: ${res.intent.kind} (rule ${res.intent.ruleId})`);
      log.info(
        {
          intent: res.intent.kind,
          rule: res.intent.ruleId,
          cached: res.cached,
          results: res.resultCount,
          error: res.error,
        },
        "tool pre-execution",
      );
      report?.({ tools: [res.intent.kind], ok: !res.error, ...(res.error ? { error: res.error } : {}) });
    }
    if (res.error) this.debugLog.line(`Pre-exec failed, answering without it: ${res.error}`);
    return res.live ? [res.live] : [];
  }

  async close(): Promise<void> {
    await Promise.all([...this.runners.values()].map((r) => r?.close()));
  }
}
