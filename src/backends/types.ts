/**
 * The backend boundary lives in src/contract/backend.ts (below every room that produces or consumes
 * an event stream: backends, the router, the systems executors). Re-exported here for the backends.
 */
export * from "../contract/backend.js";
