// Makes the tokenizer test fixtures from real Hugging Face tokenizer files, with Hugging Face's
// own JavaScript tokenizers (npm @huggingface/tokenizers) as the reference:
//   node make-expected.mjs TOKENIZERS_MJS OUT_DIR NAME=PACKAGE_MODELS_DIR ...
// For each NAME: encodes texts.json (add_special_tokens false) and decodes the ids back; writes
// OUT_DIR/NAME/tokenizer.json, a copy of the real file cut down to the vocabulary and merges those
// texts use (ids unchanged: every merge that fires while encoding them is kept, so the cut file
// encodes them exactly as the whole one does, which is checked here), its tokenizer_config.json,
// and OUT_DIR/expected.json with the ids and decoded texts. `regenerate` runs this.
import fs from "fs";
import path from "path";

const [tokenizersMjs, outDir, ...specs] = process.argv.slice(2);
const { Tokenizer } = await import(path.resolve(tokenizersMjs));
const texts = JSON.parse(fs.readFileSync(new URL("texts.json", import.meta.url)));
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));

function encodeAll(tokenizer) {
  return texts.map((text) => tokenizer.encode(text, { add_special_tokens: false }).ids);
}

// The vocabulary a set of tokens needs: each token and, recursively, both halves of every merge
// that produces it (the merges that fire while encoding are among those).
function cut(json, usedTokens) {
  const model = json.model;
  const pair = (m) => (Array.isArray(m) ? m : m.split(" "));
  const producers = new Map();
  model.merges.forEach((m, rank) => {
    const [a, b] = pair(m);
    const joined = a + b;
    if (!producers.has(joined)) producers.set(joined, []);
    producers.get(joined).push(rank);
  });
  const keep = new Set();
  const keptMerges = new Set();
  const stack = [...usedTokens];
  while (stack.length) {
    const token = stack.pop();
    if (keep.has(token)) continue;
    keep.add(token);
    for (const rank of producers.get(token) ?? []) {
      keptMerges.add(rank);
      stack.push(...pair(model.merges[rank]));
    }
  }
  if (model.unk_token) keep.add(model.unk_token);
  const vocab = {};
  for (const [token, id] of Object.entries(model.vocab)) if (keep.has(token)) vocab[token] = id;
  const merges = model.merges.filter((_, rank) => keptMerges.has(rank));
  return { ...json, model: { ...model, vocab, merges } };
}

const expected = {};
for (const spec of specs) {
  const [name, dir] = spec.split("=");
  const json = readJson(path.join(dir, "tokenizer.json"));
  const config = readJson(path.join(dir, "tokenizer_config.json"));
  const whole = new Tokenizer(json, config);
  const ids = encodeAll(whole);
  const used = new Set(ids.flat().map((id) => whole.id_to_token(id)));
  const small = cut(json, used);
  const again = encodeAll(new Tokenizer(small, config));
  if (JSON.stringify(again) !== JSON.stringify(ids))
    throw new Error(`${name}: the cut tokenizer encodes differently`);
  const decoded = ids.map((x) =>
    x.length ? whole.decode(x, { clean_up_tokenization_spaces: false }) : "");
  fs.mkdirSync(path.join(outDir, name), { recursive: true });
  fs.writeFileSync(path.join(outDir, name, "tokenizer.json"), JSON.stringify(small));
  const { chat_template, added_tokens_decoder, ...rest } = config;
  fs.writeFileSync(path.join(outDir, name, "tokenizer_config.json"), JSON.stringify(rest, null, 1));
  expected[name] = { ids, decoded, vocab_entries: Object.keys(small.model.vocab).length,
                     merges: small.model.merges.length };
  console.log(`${name}: ${ids.flat().length} ids; cut to ${Object.keys(small.model.vocab).length} ` +
              `of ${Object.keys(json.model.vocab).length} entries, ${small.model.merges.length} ` +
              `of ${json.model.merges.length} merges`);
}
fs.writeFileSync(path.join(outDir, "expected.json"), JSON.stringify(expected));
