/**
 * What an answer must look like: every error the bridge sends, wherever HTTP allows a body, is
 * `{"error":{"message","type","code","param"}}` (message and type strings, code and param string or
 * null); an SSE error frame is `data: {"error":{…}}` of the same shape.
 */

export function isOpenAIError(value: unknown): boolean {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const e = (value as { error?: unknown }).error;
  if (!e || typeof e !== "object" || Array.isArray(e)) return false;
  const o = e as Record<string, unknown>;
  const strOrNull = (v: unknown) => v === null || typeof v === "string";
  return (
    typeof o.message === "string" &&
    typeof o.type === "string" &&
    "code" in o &&
    strOrNull(o.code) &&
    "param" in o &&
    strOrNull(o.param)
  );
}

export function isOpenAIErrorBody(body: Buffer | string): boolean {
  try {
    return isOpenAIError(JSON.parse(typeof body === "string" ? body : body.toString("utf8")));
  } catch {
    return false;
  }
}

/** HTTP forbids a body on these (and on any answer to HEAD). */
export function bodyAllowed(status: number, method = "POST"): boolean {
  return method !== "HEAD" && !(status >= 100 && status < 200) && status !== 204 && status !== 304;
}

/** An error answer whose body is not OpenAI-shaped (false for non-errors and where no body is allowed). */
export function badErrorShape(status: number, body: Buffer | string, method = "POST"): boolean {
  return status >= 400 && bodyAllowed(status, method) && !isOpenAIErrorBody(body);
}

export interface SseCheck {
  frames: number;
  done: boolean;
  /** data frames carrying an error, and how many of them are not OpenAI-shaped. */
  errorFrames: number;
  badErrorFrames: number;
  /** finish_reason seen in some chunk. */
  finish: string | undefined;
  text: string;
  firstError: string | undefined;
}

/** Read an SSE body (complete or cut): frames, [DONE], error frames and their shape, the text. */
export function checkSse(body: string): SseCheck {
  const out: SseCheck = {
    frames: 0,
    done: false,
    errorFrames: 0,
    badErrorFrames: 0,
    finish: undefined,
    text: "",
    firstError: undefined,
  };
  for (const block of body.split("\n\n")) {
    for (const line of block.split("\n")) {
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      out.frames++;
      if (data === "[DONE]") {
        out.done = true;
        continue;
      }
      let obj: any;
      try {
        obj = JSON.parse(data);
      } catch {
        continue; // a frame cut by the end of a partial body
      }
      if (obj && typeof obj === "object" && "error" in obj) {
        out.errorFrames++;
        out.firstError ??= data.slice(0, 200);
        if (!isOpenAIError(obj)) out.badErrorFrames++;
        continue;
      }
      const ch = obj?.choices?.[0];
      if (typeof ch?.delta?.content === "string") out.text += ch.delta.content;
      if (ch?.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}
