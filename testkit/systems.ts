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
      argv: [node, "-e", "console.log('post about ' + process.argv[1] + ' in ' + process.argv[2] + ' tone, ' + (process.argv[3] || 'any') + ' words')", "${inputs.topic}", "${inputs.tone}", "${inputs.words}"],
    },
  };
}
