export declare const STAMP: string;
export declare function buildState(root: string): { fresh: boolean; reason: string };
export declare function entryFile(root: string, rel: string, state?: { fresh: boolean }): string;
