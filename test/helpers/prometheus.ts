/**
 * Reading a `/metrics` answer with a real Prometheus text-format parser (`parse-prometheus-text-format`,
 * the text format's parser on npm, ported from the Prometheus Python client's).
 *
 * That parser folds every series of a LABELLED histogram into one sample and drops their `_sum` and
 * `_count` (its upstream issue #13, fix PR #8 unmerged); ours are labelled by model and backend. So the
 * text is parsed twice, both times whole: as it is (families, types, HELP, counters, gauges), and
 * with the histograms' TYPE lines turned to `untyped`, where the parser reads each `_bucket`, `_sum`
 * and `_count` series as its own family with its labels; histograms are put together from those.
 */
import parsePrometheusTextFormat, { type PromFamily, type PromSample } from "parse-prometheus-text-format";

export type { PromFamily, PromSample };

export interface HistogramSeries {
  labels: Record<string, string>;
  /** Upper bound ("0.5", "+Inf") → cumulative count. */
  buckets: Record<string, number>;
  sum: number;
  count: number;
}

export interface Scrape {
  /** Every family as the parser read it, by name. */
  families: Map<string, PromFamily>;
  /** Every histogram's series, by family name. */
  histograms: Map<string, HistogramSeries[]>;
}

/** Parse an exposition. Throws when the text does not parse or a histogram's series disagree. */
export function parseMetrics(text: string): Scrape {
  // The format's last line ends with a line feed (and the parser drops a last line without one).
  if (!text.endsWith("\n")) throw new Error("the exposition does not end with a line feed");
  const families = new Map<string, PromFamily>();
  for (const f of parsePrometheusTextFormat(text)) {
    if (families.has(f.name)) throw new Error(`family ${f.name} appears twice`);
    families.set(f.name, f);
  }
  const histogramNames = [...families.values()].filter((f) => f.type === "HISTOGRAM").map((f) => f.name);
  // Untyped, a histogram's series interleave (`_bucket`… `_sum`, `_count`, `_bucket`…): the parser
  // starts a family at each change of name, so the pieces are gathered by name.
  const flat = new Map<string, PromFamily>();
  for (const f of parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped"))) {
    const seen = flat.get(f.name);
    if (seen) seen.metrics.push(...f.metrics);
    else flat.set(f.name, f);
  }
  const histograms = new Map<string, HistogramSeries[]>();
  for (const name of histogramNames) {
    const series = new Map<string, HistogramSeries>();
    const at = (labels: Record<string, string> = {}) => {
      const { le: _le, ...rest } = labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      let s = series.get(key);
      if (!s) series.set(key, (s = { labels: rest, buckets: {}, sum: 0, count: 0 }));
      return s;
    };
    for (const b of flat.get(`${name}_bucket`)?.metrics ?? [])
      at(b.labels).buckets[b.labels?.le ?? "?"] = Number(b.value);
    for (const s of flat.get(`${name}_sum`)?.metrics ?? []) at(s.labels).sum = Number(s.value);
    for (const c of flat.get(`${name}_count`)?.metrics ?? []) at(c.labels).count = Number(c.value);
    for (const s of series.values()) {
      if (s.buckets["+Inf"] !== s.count)
        throw new Error(
          `histogram ${name}${JSON.stringify(s.labels)}: +Inf bucket ${s.buckets["+Inf"]} but count ${s.count}`,
        );
    }
    histograms.set(name, [...series.values()]);
  }
  return { families, histograms };
}

const matches = (labels: Record<string, string> | undefined, want: Record<string, string>) =>
  Object.entries(want).every(([k, v]) => labels?.[k] === v);

/** The samples of a counter or gauge family whose labels include `labels`. */
export function samples(scrape: Scrape, name: string, labels: Record<string, string> = {}): PromSample[] {
  return (scrape.families.get(name)?.metrics ?? []).filter((s) => matches(s.labels, labels));
}

/** A counter's or gauge's value summed over the samples matching `labels` (0 when there are none). */
export function value(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return samples(scrape, name, labels).reduce((n, s) => n + Number(s.value ?? 0), 0);
}

/** A histogram's series whose labels include `labels`. */
export function histogramSeries(scrape: Scrape, name: string, labels: Record<string, string> = {}): HistogramSeries[] {
  return (scrape.histograms.get(name) ?? []).filter((s) => matches(s.labels, labels));
}

/** A histogram's observation count and sum over the series matching `labels`. */
export function histogram(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): { count: number; sum: number } {
  return histogramSeries(scrape, name, labels).reduce((a, s) => ({ count: a.count + s.count, sum: a.sum + s.sum }), {
    count: 0,
    sum: 0,
  });
}
