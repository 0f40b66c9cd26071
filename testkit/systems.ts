/**
 * The seed's example system, as tests and benchmarks declare it: "Content Pipeline" writes a blog
 * post on a topic in a given tone. Its run is a real command (node prints
 * "post about <topic> in <tone> tone, <words|any> words"), so nothing about it is faked.
 */
export function contentPipeline(node: string = process.execPath) {
  return {
    id: "content-pipeline",
    name: "Content Pipeline",
    description: "Writes a blog post on a topic in a given tone",
    examples: ["write a blog post about X", "draft an article on Y"],
    inputs: {
      type: "object",
      required: ["topic", "tone"],
      properties: {
        topic: { type: "string", description: "The blog post topic" },
        tone: { type: "string", enum: ["formal", "casual", "technical"], description: "Writing tone" },
        words: { type: "integer", description: "Length in words" },
      },
    },
    sideEffects: false,
    run: {
      kind: "command",
      argv: [
        node,
        "-e",
        "console.log('post about ' + process.argv[1] + ' in ' + process.argv[2] + ' tone, ' + (process.argv[3] || 'any') + ' words')",
        "${inputs.topic}",
        "${inputs.tone}",
        "${inputs.words}",
      ],
    },
  };
}

/** The signature the haiku writer's CLAUDE.md asks for (only an agent that read it signs with it). */
export const HAIKU_SIGNATURE = "-- drafted by a system built in chat";

/**
 * The builder's example: the plan its Architect returns for "build a system that writes a haiku
 * about any topic" — "Haiku Writer" (haiku-writer): an input `topic`, an agent `poet` on the model
 * `writer` ("Write a haiku about {{topic}}."), an output `result`, and a CLAUDE.md in the system's
 * sandbox asking the agent to sign every poem with `signature`.
 */
export function haikuWriterPlan(signature: string = HAIKU_SIGNATURE) {
  return {
    metadata: {
      system: "haiku-writer",
      name: "Haiku Writer",
      description: "Writes a haiku about a topic",
      summary: "an input, a poet agent, an output",
    },
    steps: [
      {
        id: "in",
        name: "topic input",
        action: "CREATE_NODE",
        params: { id: "topic", type: "input", label: "Topic", properties: { description: "What the haiku is about" } },
      },
      {
        id: "poet",
        name: "poet agent",
        action: "CREATE_NODE",
        params: {
          id: "poet",
          type: "agent",
          label: "Poet",
          properties: { model: "writer", prompt: "Write a haiku about {{topic}}." },
        },
      },
      {
        id: "out",
        name: "output",
        action: "CREATE_NODE",
        params: { id: "result", type: "output", label: "Haiku" },
      },
      {
        id: "e1",
        name: "topic to poet",
        action: "CONNECT_NODES",
        params: { from: "${steps.in.output}", to: "${steps.poet.output}" },
        dependsOn: ["in", "poet"],
      },
      {
        id: "e2",
        name: "poet to output",
        action: "CONNECT_NODES",
        params: { from: "${steps.poet.output}", to: "${steps.out.output}" },
        dependsOn: ["poet", "out"],
      },
      {
        id: "guide",
        name: "house style",
        action: "CREATE_FILE",
        params: { path: "CLAUDE.md", content: `Sign every poem with: ${signature}` },
      },
    ],
  };
}
