/**
 * The questions `clawbridge init` asks: yes/no and pick-one-of-a-list, each with a default taken by
 * Enter. On node:readline (no prompt library): one line per answer works the same in a
 * terminal, in tmux and from a pipe. `--yes` uses `defaultsAsker`, which answers every question
 * with its default and prints the question and the answer, so the output reads the same.
 */
import { createInterface, type Interface } from "node:readline";

export interface Choice {
  value: string;
  /** What is shown (default: the value). */
  label?: string;
}

export interface Asker {
  /** A yes/no question; Enter takes `def`. */
  confirm(question: string, def: boolean): Promise<boolean>;
  /** One of `choices` by number or by value (or another name, as typed); Enter takes `def`. */
  choose(question: string, choices: readonly Choice[], def: string): Promise<string>;
  close(): void;
}

export class NoAnswerError extends Error {
  constructor(why = "the input ended") {
    super(
      why.startsWith("interrupted")
        ? why
        : `no answer: ${why} (run \`clawbridge init --yes\` to take every default without asking)`,
    );
    this.name = "NoAnswerError";
  }
}

/** Answers every question with its default, saying so on `write`. */
export function defaultsAsker(write: (s: string) => void): Asker {
  return {
    async confirm(question, def) {
      write(`${question} ${def ? "yes" : "no"} (--yes)\n`);
      return def;
    },
    async choose(question, _choices, def) {
      write(`${question} ${def} (--yes)\n`);
      return def;
    },
    close() {},
  };
}

/** Asks on `input`/`output` (a terminal or a pipe). */
export function readlineAsker(
  input: NodeJS.ReadableStream = process.stdin,
  output: NodeJS.WritableStream = process.stdout,
): Asker {
  const rl: Interface = createInterface({ input, output, terminal: (input as { isTTY?: boolean }).isTTY === true });
  // Lines are queued as they come: from a pipe they all arrive at once, before they are asked for.
  const lines: string[] = [];
  let waiting: { resolve: (line: string) => void; reject: (err: Error) => void } | undefined;
  let closed = false;
  rl.on("line", (line) => {
    if (waiting) {
      const w = waiting;
      waiting = undefined;
      w.resolve(line);
    } else lines.push(line);
  });
  // The input ending (Ctrl-D, a pipe that runs dry) or Ctrl-C (which a terminal readline catches:
  // without this it would only pause) ends the question being asked; nothing is written after it.
  let why = "the input ended";
  rl.on("SIGINT", () => {
    why = "interrupted (Ctrl-C), nothing written";
    output.write("\n");
    rl.close();
  });
  rl.on("close", () => {
    closed = true;
    waiting?.reject(new NoAnswerError(why));
    waiting = undefined;
  });
  const ask = async (q: string): Promise<string> => {
    rl.setPrompt(q);
    rl.prompt();
    const queued = lines.shift();
    if (queued !== undefined) {
      if (!(input as { isTTY?: boolean }).isTTY) output.write(`${queued}\n`); // the answer shows as typed
      return queued.trim();
    }
    if (closed) throw new NoAnswerError(why);
    return (await new Promise<string>((resolve, reject) => (waiting = { resolve, reject }))).trim();
  };
  return {
    async confirm(question, def) {
      for (;;) {
        const a = (await ask(`${question} ${def ? "[Y/n]" : "[y/N]"} `)).toLowerCase();
        if (a === "") return def;
        if (["y", "yes"].includes(a)) return true;
        if (["n", "no"].includes(a)) return false;
        output.write("  please answer y or n\n");
      }
    },
    async choose(question, choices, def) {
      output.write(`${question}\n`);
      choices.forEach((c, i) =>
        output.write(`  ${String(i + 1).padStart(2)}) ${c.label ?? c.value}${c.value === def ? "  (default)" : ""}\n`),
      );
      for (;;) {
        const a = await ask(`  number or name [${def}]: `);
        if (a === "") return def;
        const n = Number(a);
        if (Number.isInteger(n) && n >= 1 && n <= choices.length) return choices[n - 1]!.value;
        const byValue = choices.find((c) => c.value === a);
        if (byValue) return byValue.value;
        // A name the CLI did not list (Qwen Code with an OpenAI-compatible key takes any): as typed.
        if (/^[A-Za-z][\w.:/@+-]{0,127}$/.test(a)) {
          output.write(`  ${a} is not listed; using it as typed\n`);
          return a;
        }
        output.write(`  type a number from 1 to ${choices.length}, or a model name\n`);
      }
    },
    close() {
      rl.close();
    },
  };
}
