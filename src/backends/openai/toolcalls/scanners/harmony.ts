/**
 * gpt-oss Harmony messages addressed to a function (vLLM's `openai` parser, SGLang `gpt-oss`):
 *
 *   <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "Tokyo"}<|call|>
 *   <|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{}<|call|>
 *
 * The recipient may come before or after the channel; `<|constrain|>json` or a bare `json` may
 * follow. The body is a JSON object (empty: no arguments), ended by `<|call|>` (or `<|end|>` /
 * `<|return|>`, or the end of the reply, as servers drop the stop token). A header without a
 * `functions.` recipient is not a call; when special tokens are stripped, such a header
 * (`<|start|>assistant<|channel|>final<|message|>`) is dropped whole, leaving the message text.
 */
import { JsonScanner, MORE, REJECT, V_OBJ } from "../json.js";
import { objectFromJsonText } from "../shape.js";
import {
  type Candidate,
  type Decision,
  isHws,
  isIdentChar,
  isWs,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  MAX_NAME,
  reject,
  type ScanContext,
} from "./common.js";
import { Tail } from "./markers.js";

export const HARMONY_START = "<|start|>";
export const HARMONY_CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
const CONSTRAIN = "<|constrain|>";
const CALL_ENDS = ["<|call|>", "<|end|>", "<|return|>"];
const RECIPIENT_PREFIX = "functions.";

const H_ROLE = 0;
const H_HDR = 1;
const H_LIT = 2;
const H_TO = 3;
const H_RECIPIENT = 4;
const H_WORD = 5;
const H_BODY = 6;
const H_JSON = 7;
const H_TAIL = 8;

export class HarmonyCandidate implements Candidate {
  private st: number;
  /** Characters held so far, the opener included. */
  private n: number;
  private channel: boolean;
  private word = "";
  private recipient = "";
  private lit: Lit | null = null;
  private json: JsonScanner | null = null;
  private tail: Tail | null = null;

  constructor(
    private readonly ctx: ScanContext,
    opener: string,
  ) {
    this.n = opener.length;
    this.channel = opener === HARMONY_CHANNEL;
    this.st = this.channel ? H_WORD : H_ROLE;
  }

  step(c: string): Decision | null {
    this.n++;
    switch (this.st) {
      case H_ROLE:
      case H_WORD:
        if (isIdentChar(c) && this.word.length < MAX_NAME) {
          this.word += c;
          return null;
        }
        if (this.word === "") return reject(1);
        this.word = "";
        this.st = H_HDR;
        return this.step2(c);
      case H_HDR:
        return this.step2(c);
      case H_LIT:
        return this.litStep(c);
      case H_TO:
        if (!this.lit) return reject(1);
        return this.litStep(c);
      case H_RECIPIENT:
        if (!isWs(c) && c !== "<" && this.recipient.length < MAX_NAME + RECIPIENT_PREFIX.length) {
          this.recipient += c;
          return null;
        }
        this.st = H_HDR;
        return this.step2(c);
      case H_BODY:
        if (isWs(c)) return null;
        if (c === "{") {
          this.json = new JsonScanner(this.ctx.tools, V_OBJ);
          this.json.step(c);
          this.st = H_JSON;
          return null;
        }
        if (c === "<") {
          this.tail = new Tail([{ name: this.name(), args: {} }], CALL_ENDS);
          this.st = H_TAIL;
          return this.tail.step(c);
        }
        return reject(1);
      case H_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        const args = objectFromJsonText(this.json!.text);
        if (args === null) return reject(0);
        this.tail = new Tail([{ name: this.name(), args }], CALL_ENDS);
        this.st = H_TAIL;
        return null;
      }
      case H_TAIL:
        return this.tail!.step(c);
      default:
        return reject(1);
    }
  }

  private name(): string {
    return this.recipient.slice(RECIPIENT_PREFIX.length);
  }

  /** One character of the header (`step` has counted it). */
  private step2(c: string): Decision | null {
    if (isHws(c)) return null;
    if (c === "<") {
      this.lit = new Lit(this.channel ? [MESSAGE, CONSTRAIN] : [HARMONY_CHANNEL], c);
      this.st = H_LIT;
      return null;
    }
    if (c === "t" && this.recipient === "") {
      this.lit = new Lit(["to="], c);
      this.st = H_TO;
      return null;
    }
    if (this.channel && isIdentChar(c)) {
      // A content type such as `json`.
      this.st = H_WORD;
      this.word = c;
      return null;
    }
    return reject(1);
  }

  private litStep(c: string): Decision | null {
    const lit = this.lit!;
    const r = lit.step(c);
    if (r === LIT_MORE) return null;
    if (r === LIT_FAIL) return reject(lit.partial.length);
    this.lit = null;
    const m = lit.partial;
    if (m === "to=") {
      this.st = H_RECIPIENT;
      return null;
    }
    if (m === HARMONY_CHANNEL) {
      this.channel = true;
      this.st = H_WORD;
      return null;
    }
    if (m === CONSTRAIN) {
      this.st = H_HDR;
      return null;
    }
    // <|message|>
    const name = this.recipient.startsWith(RECIPIENT_PREFIX) ? this.name() : "";
    if (!this.ctx.tools.has(name)) return reject(0, 0, this.ctx.strip ? this.n : 0);
    this.st = H_BODY;
    return null;
  }

  eof(): Decision {
    return this.st === H_TAIL ? this.tail!.eof() : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
