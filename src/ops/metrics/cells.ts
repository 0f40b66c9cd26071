/**
 * Counters and histograms for the families observed on EVERY turn (turns, their duration, first
 * byte and tokens, the queue wait), registered in the bridge's prom-client `Registry` beside
 * prom-client's own metrics and exported in exactly the shape prom-client's `Counter` and
 * `Histogram` give it (test/unit/metrics-cells.test.ts compares the two texts).
 *
 * Why not prom-client's: its `inc()` / `observe()` check every label against the label names,
 * sort and join them into a hash and look the bucket up in an object keyed by the bound, on every
 * call. Here the label values are known to be bounded strings (configured ids, closed lists, see
 * metrics.ts), so an observation is one string key, one Map lookup and a walk over the bounds
 * (the profile of a non-streamed turn at c=32 showed prom-client's checks at ~4% of the bridge's
 * CPU, bench/README.md). Everything else — text format, scrape — stays prom-client's.
 */
import type { Registry } from "prom-client";

/** The key of one label set: its values in label-name order. */
const keyOf = (values: readonly string[]): string => (values.length === 1 ? values[0]! : values.join("\u0000"));

function labelsOf(names: readonly string[], values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  names.forEach((n, i) => (labels[n] = values[i]!));
  return labels;
}

/** A value pair as prom-client's registry formats it (`sharedLabels` printed after `labels`). */
interface ValuePair {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName?: string;
  exemplar?: null;
}

interface MetricData {
  name: string;
  help: string;
  type: "counter" | "histogram";
  values: ValuePair[];
  aggregator: "sum";
}

/** The part every cell family shares: name, help, label names, registration. */
abstract class Family<Cell> {
  readonly aggregator = "sum";
  protected readonly cells = new Map<string, { labels: Record<string, string>; cell: Cell }>();

  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    // Duck-typed like prom-client's metrics: the registry reads `name`, `type` and `get()` /
    // `getForPromString()` only.
    registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  protected abstract empty(): Cell;

  /** The cell of one label set (values in `labelNames` order; made on first use). */
  protected cell(values: readonly string[]): Cell {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name}: ${this.labelNames.length} label values expected, got ${values.length}`);
    const key = keyOf(values);
    let c = this.cells.get(key);
    if (!c) {
      c = { labels: labelsOf(this.labelNames, values), cell: this.empty() };
      this.cells.set(key, c);
    }
    return c.cell;
  }

  abstract get(): Promise<MetricData>;
}

/** A counter: `inc(n, ...labelValues)`. */
export class CellCounter extends Family<{ value: number }> {
  readonly type = "counter";

  protected empty() {
    return { value: 0 };
  }

  inc(n: number, ...labelValues: string[]): void {
    if (!(n >= 0) || !Number.isFinite(n))
      throw new Error(`${this.name}: a counter only goes up by a finite amount (got ${n})`);
    this.cell(labelValues).value += n;
  }

  /** What prom-client's `Counter.get()` gives (the registry formats it). */
  async get(): Promise<MetricData> {
    const values: ValuePair[] = [];
    if (!this.labelNames.length && !this.cells.size) values.push({ value: 0, labels: {} });
    for (const { labels, cell } of this.cells.values()) values.push({ value: cell.value, labels });
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

interface HistogramCell {
  /** Observations per bucket (not cumulative); the last slot counts those above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram: `observe(value, ...labelValues)`. */
export class CellHistogram extends Family<HistogramCell> {
  readonly type = "histogram";

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    super(name, help, labelNames, registry);
    if (bounds.some((b, i) => i > 0 && b <= bounds[i - 1]!)) throw new Error(`${name}: bucket bounds must increase`);
  }

  protected empty(): HistogramCell {
    return { counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }

  observe(value: number, ...labelValues: string[]): void {
    if (!Number.isFinite(value)) throw new TypeError(`${this.name}: value is not a valid number: ${value}`);
    const c = this.cell(labelValues);
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    c.counts[i]!++;
    c.sum += value;
    c.count++;
  }

  /** What prom-client's `Histogram.getForPromString()` gives (the registry formats it). */
  async getForPromString(): Promise<MetricData> {
    const values: ValuePair[] = [];
    const bucket = `${this.name}_bucket`;
    const cells = [...this.cells.values()];
    if (!this.labelNames.length && !cells.length) cells.push({ labels: {}, cell: this.empty() });
    for (const { labels, cell } of cells) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += cell.counts[i]!;
        values.push({ labels: { le }, sharedLabels: labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push(
        { labels: { le: "+Inf" }, sharedLabels: labels, value: cell.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: labels, value: cell.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: labels, value: cell.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's `Histogram.get()`: each value's shared labels merged into its own. */
  async get(): Promise<MetricData> {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...rest }) => ({
        ...rest,
        labels: { ...labels, ...sharedLabels },
      })),
    };
  }
}
