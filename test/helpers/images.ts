/** Images for tests: real, tiny ones (a 1x1 PNG of 70 bytes, a 1x1 GIF), as base64, data URLs and `TurnImage`s. */
import type { TurnImage, TurnInput } from "../../src/backends/contract/backend.js";

export const PNG_1x1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
export const GIF_1x1 = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
export const PNG_DATA_URL = `data:image/png;base64,${PNG_1x1}`;

/** A turn's image as the pipeline hands it to a backend. */
export const turnImage = (mediaType: string, base64: string, name: string): TurnImage => ({
  mediaType,
  base64,
  bytes: Buffer.from(base64, "base64").length,
  name,
});

/** `turn` with these images (a backend test's `turnInput()` has none). */
export const withImages = (turn: TurnInput, images: TurnImage[]): TurnInput => {
  turn.images = images;
  return turn;
};
