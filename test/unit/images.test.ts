/**
 * Images at the door (src/request/images): data URLs checked (base64, kind by its bytes, size),
 * image URLs fetched through the network guard (a local server stands in for a web host; loopback
 * is refused unless the config allows it), and the turn's images as backends get them.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { imagesSchema } from "../../src/core/config/schema.js";
import { ApiError } from "../../src/request/chat-api/errors.js";
import { chatRequestSchema, type ChatRequest } from "../../src/request/chat-api/schema.js";
import { turnImages, withoutImages, hasImages } from "../../src/request/images/parts.js";
import { decodeDataUrl, Images, sniffImage } from "../../src/request/images/resolve.js";
import { PNG_1x1 } from "../helpers/images.js";

const JPEG_HEAD = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0, 1]).toString("base64");

const request = (content: unknown[], more: unknown[] = []): ChatRequest =>
  chatRequestSchema.parse({ model: "m", messages: [...more, { role: "user", content }] });
const image = (url: string) => ({ type: "image_url", image_url: { url, detail: "low" } });
const urlAt = (r: ChatRequest, i: number, j: number) =>
  (r.messages[i]!.content as unknown as Array<{ image_url: { url: string } }>)[j]!.image_url.url;

async function refusedWith(p: Promise<unknown>, code: string, text: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, text);
    return true;
  });
}

describe("data URLs", () => {
  test("a PNG is taken; its kind is read from its bytes, not from what the client claimed", () => {
    const d = decodeDataUrl(`data:image/png;base64,${PNG_1x1}`, 1024);
    assert.ok(d.ok);
    assert.equal(d.mediaType, "image/png");
    assert.equal(d.data.length, 70);
    assert.equal(sniffImage(Buffer.from(JPEG_HEAD, "base64")), "image/jpeg");
    assert.equal(sniffImage(Buffer.from("GIF89a-----")), "image/gif");
    assert.equal(sniffImage(Buffer.from("RIFF\0\0\0\0WEBPVP8 ")), "image/webp");
    assert.equal(sniffImage(Buffer.from("<svg></svg>")), undefined);
  });

  test("not base64, not an image, too large, or not a data URL: each says what is wrong", () => {
    const why = (url: string, max = 1024) => {
      const d = decodeDataUrl(url, max);
      assert.equal(d.ok, false);
      return (d as { why: string }).why;
    };
    assert.match(why("data:image/png,rawbytes"), /without ;base64/);
    assert.match(why("data:image/png;base64,@@@@"), /not base64/);
    assert.match(
      why(`data:image/png;base64,${Buffer.from("<svg/>").toString("base64")}`),
      /not a PNG, JPEG, GIF or WebP/,
    );
    assert.match(why(`data:image/png;base64,${PNG_1x1}`, 10), /larger than the 1 KB allowed \(images\.maxBytes\)/);
    assert.match(why("data:;base64"), /not a valid data URL/);
  });
});

describe("Images.resolve", () => {
  let server: http.Server;
  let origin: string;
  let hits = 0;
  const big = Buffer.concat([Buffer.from(PNG_1x1, "base64"), Buffer.alloc(4096)]);
  before(async () => {
    server = http.createServer((req, res) => {
      hits++;
      if (req.url === "/cat.png") {
        res.writeHead(200, { "content-type": "image/png" });
        res.end(Buffer.from(PNG_1x1, "base64"));
      } else if (req.url === "/big.png") {
        res.writeHead(200, { "content-type": "image/png" });
        res.end(big);
      } else if (req.url === "/page.html") {
        res.writeHead(200, { "content-type": "text/html" });
        res.end("<html>not an image</html>");
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));
  const signal = new AbortController().signal;

  test("a request without images is returned as it is; a checked data URL stays byte for byte", async () => {
    const images = new Images(imagesSchema.parse({}));
    const plain = request([{ type: "text", text: "hi" }]);
    assert.equal(await images.resolve(plain, signal), plain);
    const url = `data:image/png;base64,${PNG_1x1}`;
    const r = request([{ type: "text", text: "what is this?" }, image(url)]);
    const out = await images.resolve(r, signal);
    assert.equal(urlAt(out, 0, 1), url);
  });

  test("a data URL whose claimed type is wrong is given its real one", async () => {
    const images = new Images(imagesSchema.parse({}));
    const out = await images.resolve(request([image(`data:image/jpeg;base64,${PNG_1x1}`)]), signal);
    assert.equal(urlAt(out, 0, 0), `data:image/png;base64,${PNG_1x1}`);
    // The part keeps its other fields (detail).
    assert.equal((out.messages[0]!.content as any)[0].image_url.detail, "low");
  });

  test("an image URL on a private address is refused before any connection, naming the image and the way out", async () => {
    const images = new Images(imagesSchema.parse({}));
    const before = hits;
    await refusedWith(
      images.resolve(request([image(`${origin}/cat.png`)], [{ role: "system", content: "s" }]), signal),
      "image_url_blocked",
      /^messages\[1\]\.content\[0\]\.image_url\.url: .*loopback.*send the image as a data URL, or allow the host in images\.fetch\.allowHosts/,
    );
    assert.equal(hits, before, "no request reached the server");
    await refusedWith(
      images.resolve(request([image("http://169.254.169.254/latest/meta-data")]), signal),
      "image_url_blocked",
      /link-local|metadata/,
    );
  });

  test("allowed, an image URL is fetched and becomes a data URL; too big, or not an image, is refused", async () => {
    const images = new Images(imagesSchema.parse({ maxBytes: 1024, fetch: { allowPrivateAddresses: true } }));
    try {
      const out = await images.resolve(request([image(`${origin}/cat.png`)]), signal);
      assert.equal(urlAt(out, 0, 0), `data:image/png;base64,${PNG_1x1}`);
      await refusedWith(
        images.resolve(request([image(`${origin}/big.png`)]), signal),
        "image_too_large",
        /1 KB allowed/,
      );
      await refusedWith(
        images.resolve(request([image(`${origin}/page.html`)]), signal),
        "invalid_image",
        /not a PNG, JPEG, GIF or WebP image \(content-type text\/html\)/,
      );
      await refusedWith(
        images.resolve(request([image(`${origin}/gone.png`)]), signal),
        "image_url_unreachable",
        /HTTP 404/,
      );
    } finally {
      await images.close();
    }
  });

  test("other schemes, fetching off, too many images, a part without a URL", async () => {
    const images = new Images(imagesSchema.parse({ maxPerRequest: 2, fetch: { enabled: false } }));
    await refusedWith(
      images.resolve(request([image("file:///etc/passwd")]), signal),
      "invalid_image_url",
      /only data URLs and http\(s\)/,
    );
    await refusedWith(
      images.resolve(request([image("https://example.com/a.png")]), signal),
      "image_url_not_fetched",
      /images\.fetch\.enabled/,
    );
    const png = image(`data:image/png;base64,${PNG_1x1}`);
    await refusedWith(
      images.resolve(request([png, png, png]), signal),
      "too_many_images",
      /more than 2 images.*images\.maxPerRequest/,
    );
    await refusedWith(images.resolve(request([{ type: "image_url" }]), signal), "invalid_image", /needs a URL/);
  });
});

describe("a turn's images", () => {
  const png = `data:image/png;base64,${PNG_1x1}`;
  const jpeg = `data:image/jpeg;base64,${JPEG_HEAD}`;
  const r = chatRequestSchema.parse({
    model: "m",
    messages: [
      { role: "user", content: [{ type: "text", text: "old" }, image(png)] },
      { role: "assistant", content: "an old answer" },
      { role: "user", content: [{ type: "text", text: "and these?" }, image(png), image(jpeg)] },
    ],
  });

  test("only the person's new images, with bytes, kinds and file names", () => {
    assert.ok(hasImages(r.messages));
    const images = turnImages(r.messages);
    assert.deepEqual(
      images.map((i) => [i.name, i.mediaType, i.bytes]),
      [
        ["image-1.png", "image/png", 70],
        ["image-2.jpg", "image/jpeg", 12],
      ],
    );
    assert.equal(images[0]!.base64, PNG_1x1);
  });

  test("a model that cannot see images gets one line per image, saying so", () => {
    const { request: out, dropped } = withoutImages(r, "Local Llama");
    assert.equal(dropped, 3);
    assert.equal(hasImages(out.messages), false);
    const last = out.messages[2]!.content as Array<{ type: string; text: string }>;
    assert.equal(last[0]!.text, "and these?");
    assert.match(last[2]!.text, /^\[The person sent an image \(image\/jpeg\) here, but Local Llama cannot see images/);
  });
});
