/**
 * A `<`: the openers of every tag- and token-based format, matched literally, then handed to the
 * format's scanner. At the very start of the reply, `<think>` / `<seed:think>` open a reasoning
 * block instead (never searched for calls).
 */
import {
  accept,
  type Candidate,
  type Decision,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  reject,
  type ScanContext,
  SUB_MORE,
  SUB_REJECT,
} from "./common.js";
import { DEEPSEEK_OPENERS, DeepSeekCandidate } from "./deepseek.js";
import { HARMONY_CHANNEL, HARMONY_START, HarmonyCandidate } from "./harmony.js";
import { KIMI_OPENERS, KimiCandidate } from "./kimi.js";
import {
  ACTION_START,
  ActionScanner,
  GRANITE_TOOL_CALL,
  JsonMarker,
  PYTHON_START,
  PYTHON_TAG,
  PyListMarker,
  PythonTagScanner,
  TOOL_CALL_START,
} from "./markers.js";
import { type ItemScanner, ITEM_OPENERS, itemScanner, OPEN_TAGS, TagScanner } from "./tag.js";

const THINK: Readonly<Record<string, string>> = { "<think>": "</think>", "<seed:think>": "</seed:think>" };

const OPENERS: readonly string[] = [
  ...OPEN_TAGS,
  ...ITEM_OPENERS,
  PYTHON_TAG,
  PYTHON_START,
  TOOL_CALL_START,
  GRANITE_TOOL_CALL,
  ACTION_START,
  ...KIMI_OPENERS,
  HARMONY_START,
  HARMONY_CHANNEL,
  ...DEEPSEEK_OPENERS,
];
const OPENERS_AT_START: readonly string[] = [...OPENERS, ...Object.keys(THINK)];
const TAG_SET: ReadonlySet<string> = new Set(OPEN_TAGS);
const ITEM_SET: ReadonlySet<string> = new Set(ITEM_OPENERS);
const KIMI_SET: ReadonlySet<string> = new Set(KIMI_OPENERS);
const DEEPSEEK_SET: ReadonlySet<string> = new Set(DEEPSEEK_OPENERS);

/** A wrapper tag as a candidate. */
class TagCandidate implements Candidate {
  private readonly tag: TagScanner;
  constructor(ctx: ScanContext, tag: string) {
    this.tag = new TagScanner(ctx, tag);
  }
  step(c: string): Decision | null {
    const r = this.tag.step(c);
    if (r === SUB_MORE) return null;
    return r === SUB_REJECT ? reject(this.tag.rejectRefeed) : accept(this.tag.calls);
  }
  eof(): Decision {
    return this.tag.eofOk() ? accept(this.tag.calls) : reject(0);
  }
  codeOnReject(): number {
    return 0;
  }
}

/** A `<function=…>` / `<function name="…">` / `<invoke name="…">` block on its own. */
class ItemCandidate implements Candidate {
  constructor(private readonly item: ItemScanner) {}
  step(c: string): Decision | null {
    const r = this.item.step(c);
    if (r === SUB_MORE) return null;
    return r === SUB_REJECT ? reject(this.item.rejectRefeed) : accept([this.item.result()]);
  }
  eof(): Decision {
    return this.item.eofOk() ? accept([this.item.result()]) : reject(0);
  }
  codeOnReject(): number {
    return 0;
  }
}

function innerFor(ctx: ScanContext, m: string): Candidate {
  if (TAG_SET.has(m)) return new TagCandidate(ctx, m.slice(1, -1));
  if (ITEM_SET.has(m)) return new ItemCandidate(itemScanner(ctx, m, null));
  if (KIMI_SET.has(m)) return new KimiCandidate(ctx);
  if (DEEPSEEK_SET.has(m)) return new DeepSeekCandidate(ctx);
  switch (m) {
    case PYTHON_TAG:
      return new PythonTagScanner(ctx);
    case PYTHON_START:
      return new PyListMarker(ctx, "<|python_end|>");
    case TOOL_CALL_START:
      return new PyListMarker(ctx, "<|tool_call_end|>");
    case GRANITE_TOOL_CALL:
      return new JsonMarker(ctx, false);
    case ACTION_START:
      return new ActionScanner(ctx);
    default:
      return new HarmonyCandidate(ctx, m);
  }
}

export class AngleCandidate implements Candidate {
  private readonly lit: Lit;
  private inner: Candidate | null = null;

  constructor(
    private readonly ctx: ScanContext,
    atReplyStart: boolean,
  ) {
    this.lit = new Lit(atReplyStart ? OPENERS_AT_START : OPENERS, "<");
  }

  step(c: string): Decision | null {
    if (this.inner) return this.inner.step(c);
    const r = this.lit.step(c);
    if (r === LIT_MORE) return null;
    if (r === LIT_FAIL) return reject(1);
    const m = this.lit.partial;
    const close = THINK[m];
    if (close !== undefined) return { calls: null, refeed: 0, code: 0, drop: 0, think: close };
    this.inner = innerFor(this.ctx, m);
    return null;
  }

  eof(): Decision {
    return this.inner ? this.inner.eof() : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
