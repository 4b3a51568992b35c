// A case shared as a link (site/js/page/link.mjs): the fragment holds the case and gives it back
// whole; what cannot be a case is refused in a sentence, never thrown, whatever the address holds
// (cut, changed, too long, another version, a deflate bomb); the command line's request is the
// wire's (protocol.mjs toWire) and survives the shell's quoting.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { caseOf, caseProblem, commandOf, commandRequest, decodeCase, encodeCase, KEY, linkTo, MEASURES, MOST_CHARACTERS, VERSION } from "../../site/js/page/link.mjs";
import { FIELDS } from "../../site/js/worker/protocol.gen.mjs";

const TURN = {
  messages: [
    { role: "user", content: "Hi! My name is Priya." },
    { role: "assistant", content: "Hello Priya, “how” can I help? 🙂\n\tSecond line, with a ' and a \\ and $(rm -rf /)." },
    { role: "user", content: "What is my name?" },
  ],
  preset: "pirate", window: 512, reserve: 48, maxTokens: 48, replyIds: [504, 1030, 13, 2], step: 1, open: ["inspect", "cause"],
};

const base64url = (bytes) => Buffer.from(bytes).toString("base64url");
async function deflated(text) {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
const fragmentOf = async (json) => `${KEY}=${VERSION}.${base64url(await deflated(json))}`;

test("a case goes into a fragment and comes back whole, in a link that keeps only ?model=", async () => {
  const c = caseOf({ ...TURN, topK: 10 }); // topK changes no figure of the turn: left out
  assert.deepEqual(c, TURN);
  const fragment = await encodeCase(c);
  assert.match(fragment, /^case=1\.[A-Za-z0-9_-]+$/);
  assert.deepEqual(await decodeCase(`#${fragment}`), { case: TURN });
  // compact: a conversation of twenty turns takes a third of its JSON's characters
  const long = caseOf({ ...TURN, messages: [...Array(20)].flatMap((_, i) => TURN.messages.slice(0, 2).map((m) => ({ ...m, content: `${m.content} ${i}` })))
    .concat([TURN.messages[2]]) });
  assert.ok((await encodeCase(long)).length < JSON.stringify(long).length / 3);
  const link = await linkTo(c, "http://127.0.0.1:8000/lab/?mode=plain&preset=brief&model=http%3A%2F%2Fh%2Fm%2F#old");
  assert.equal(link, `http://127.0.0.1:8000/lab/?model=http%3A%2F%2Fh%2Fm%2F#${fragment}`);
  assert.equal(await linkTo(c, "https://example.org/"), `https://example.org/#${fragment}`);
  // one measure as a string; a turn with no step; custom text as the system prompt
  assert.deepEqual(caseOf({ ...TURN, open: "whole" }).open, ["whole"]);
  const { step, open, ...turn } = TURN;
  assert.deepEqual((await decodeCase(await encodeCase(caseOf({ ...turn, preset: "custom", custom: "Be terse." })))).case,
                   { ...turn, preset: "custom", custom: "Be terse." });
});

test("what cannot be a case is refused in a sentence naming why", async () => {
  const bad = [
    [{ ...TURN, messages: [] }, "it holds no messages"],
    [{ ...TURN, messages: [{ role: "user", content: "a" }, { role: "assistant", content: "b" }] }, "its last message is not yours"],
    [{ ...TURN, messages: [{ role: "assistant", content: "b" }, { role: "user", content: "a" }] }, "its reply 1 answers no message of yours"],
    [{ ...TURN, messages: [{ role: "system", content: "b" }, { role: "user", content: "a" }] }, "its message 1 is neither yours nor the model's"],
    [{ ...TURN, messages: [{ role: "user", content: 3 }] }, "its message 1 has no text"],
    [{ ...TURN, messages: [{ role: "user", content: "a", name: "x" }] }, "its message 1 is not {role, content}"],
    [{ ...TURN, messages: [{ role: "user", content: "  " }] }, "its last message is empty"],
    [{ ...TURN, window: 0 }, "its window is not a count of tokens"],
    [{ ...TURN, maxTokens: 2.5 }, "its maxTokens is not a count of tokens"],
    [{ ...TURN, preset: 4 }, "its preset is not text"],
    [{ ...TURN, specialInText: "no" }, "its specialInText is neither true nor false"],
    [{ ...TURN, replyIds: [1, -2] }, "its reply is not a list of token ids"],
    [{ ...TURN, step: 4 }, "its step 4 is not one of its reply's 4 tokens"],
    [{ ...TURN, open: ["lens"] }, `its open measures are not among ${MEASURES.join(", ")}`],
    [{ ...TURN, open: ["cause", "cause"] }, `its open measures are not among ${MEASURES.join(", ")}`],
    [{ ...TURN, open: ["branch"] }, "its branch takes no id"],
    [{ ...TURN, id: 7 }, "it names an id but opens no branch"],
    [{ ...TURN, step: undefined }, "it opens a measure of no step"],
    [{ ...TURN, html: "<b>" }, "it holds \"html\", which no case has"],
  ];
  for (const [c, why] of bad) {
    const clean = Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined));
    assert.equal(caseProblem(clean), why, why);
    // the same case in a link: refused when it is opened, in the same words, and nothing thrown
    assert.deepEqual(await decodeCase(await fragmentOf(JSON.stringify({ v: VERSION, ...clean }))),
                     { error: `This link's case cannot be read: ${why}. Nothing was changed.` });
  }
  assert.equal(caseProblem({ ...TURN, open: ["branch"], id: 7 }), null);
  assert.throws(() => caseOf({ ...TURN, layout: "plain" }), /a chat turn of the instruct model/);
  assert.throws(() => caseOf({ ...TURN, model: "base" }), /a chat turn of the instruct model/);
  assert.throws(() => caseOf({ ...TURN, step: 9 }), /cannot be a link: its step 9/);
});

test("an address that holds no case, or one cut, changed, too long or of another version, gets a sentence", async () => {
  for (const none of ["", "#", "#reads-title", "#mode=live"]) assert.equal(await decodeCase(none), null);
  const good = await encodeCase(TURN);
  const cut = "This link's case cannot be read: it was cut or changed on its way";
  for (const broken of [good.slice(0, -5), `${good.slice(0, 20)}A${good.slice(21)}`, "case=1.", "case=1.%%%", "case=1", "case=one.AAAA"]) {
    const got = await decodeCase(broken);
    assert.ok(got.error?.startsWith(cut), `${broken}: ${JSON.stringify(got)}`);
    assert.ok(got.error.endsWith("Nothing was changed."));
  }
  assert.match((await decodeCase(good.replace("case=1.", "case=2."))).error, /written in version 2, and this page reads version 1/);
  assert.match((await decodeCase(await fragmentOf(JSON.stringify({ v: 2, ...TURN })))).error, /its version is not the one its address names/);
  for (const json of ["[1]", "null", "\"text\"", "{\"v\": 1}"]) {
    assert.match((await decodeCase(await fragmentOf(json))).error, /cannot be read: (it holds no|its version)/, json);
  }
  const long = `case=1.${"A".repeat(MOST_CHARACTERS)}`;
  assert.equal((await decodeCase(long)).error,
               `This link is too long: ${(long.length).toLocaleString("en-US")} characters, where a link here holds at most 32,000. Nothing was changed.`);
  // a deflate bomb: a link that would unpack to 16 MB is refused after the first megabyte
  const bomb = await fragmentOf(`{"v":1,"messages":[{"role":"user","content":"${" ".repeat(16 << 20)}"}]}`);
  assert.ok(bomb.length < MOST_CHARACTERS, bomb.length);
  assert.match((await decodeCase(bomb)).error, /it unpacks to more than 1048576 bytes/);
  // whatever else an address holds: a sentence or nothing, never a throw
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 300; i++) {
    const n = Math.floor(random() * 60);
    const junk = Array.from({ length: n }, () => String.fromCharCode(32 + Math.floor(random() * 95))).join("");
    const mutated = [...good].map((ch) => (random() < 0.02 ? "-_Az09"[Math.floor(random() * 6)] : ch)).join("");
    for (const text of [`case=${junk}`, `case=1.${junk}`, mutated]) {
      const got = await decodeCase(text);
      assert.ok(got === null || typeof got.error === "string" || got.case, text);
    }
  }
});

test("a case too long for a link is refused when made, with the way out", async () => {
  // text that deflates badly: pseudo-random letters, 60,000 of them
  let seed = 3;
  const text = Array.from({ length: 60_000 }, () => String.fromCharCode(97 + ((seed = (seed * 69069 + 1) % 2 ** 32) >>> 27))).join("");
  const c = caseOf({ messages: [{ role: "user", content: text }] });
  await assert.rejects(linkTo(c, "http://h/"), (e) => e instanceof RangeError && /too long for a link: [\d,]+ characters, where a link here holds at most 32,000\. “Copy as a command” gives it whole\./.test(e.message));
});

test("the command is the measure open, its request the wire's, and the shell gives it back as it was", () => {
  const settings = { reply_limit: 96 };
  const names = (type) => new Set(FIELDS[type]);
  const cases = [
    [{ ...TURN, step: undefined, open: undefined }, "run", "Turn", null],
    [{ ...TURN, open: ["inspect"] }, "inspect", "Inspect", 1],
    [{ ...TURN, open: ["cause"] }, "cause", "Cause", 1],
    [{ ...TURN, open: ["inspect", "whole"] }, "cause", "Cause", TURN.replyIds.length - 1],
    [{ ...TURN, open: ["branch"], id: 9 }, "branch", "Branch", 1],
  ];
  for (const [raw, command, type, step] of cases) {
    const c = caseOf(Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined)));
    const { command: got, request } = commandRequest(c, settings);
    assert.equal(got, command);
    for (const k of Object.keys(request)) assert.ok(names(type).has(k), `${command} reads no ${k}`);
    assert.equal(request.step ?? null, step);
    assert.equal(request.max_tokens, 48);
    assert.equal(request.preset, "pirate");
    if (command !== "run") assert.deepEqual(request.reply_ids, TURN.replyIds);
    if (command === "branch") assert.equal(request.id, 9);
    // the command line as copied: printf hands its request to stdin as it was, quotes, newlines and all
    const line = commandOf(c, settings, { weights: "tiny, http://h/m/" });
    assert.ok(line.endsWith(`| python3 -m chatlens ${command}  # the page's weights: tiny, http://h/m/ (the same files: --model PATH)`), line);
    const printed = spawnSync("bash", ["-c", line.slice(0, line.indexOf(" | python3 -m chatlens"))], { encoding: "utf8" });
    assert.equal(printed.status, 0, printed.stderr);
    assert.deepEqual(JSON.parse(printed.stdout), request);
  }
});
