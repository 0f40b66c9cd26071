export declare const STAMP: string;
export declare function buildState(root: string): { fresh: boolean; reason: string };
export declare function entryFile(root: string, rel: string, state?: { fresh: boolean }): string;
/** Compiled files in dist/ whose source is gone (paths relative to `root`). */
export declare function staleOutputs(root: string): string[];
