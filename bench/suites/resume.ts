/** Suite "resume" (implementation: bench/suite-resume.ts). */
export { default } from "../suite-resume.js";
