// llamacpp-decode: greedy decode of a fixed token-id prompt with llama.cpp's CPU backend, through
// the prebuilt binaries of the npm package node-llama-cpp, for scripts/bench-llamacpp.sh.
// It is a benchmark helper, never part of `make test` or CI.
//
// Usage: node scripts/llamacpp-decode.mjs --model F.gguf --tokens 1,2,3 -n 64
//          [--threads 1] [--flash on|off] [--batch 512] [--ctx 0] [--kv f16|f32|bf16]
//          [--logits OUT.json]
// Env:   DSPARK_LLAMA_DIR  the directory node-llama-cpp was installed into (npm install there)
//
// Prints one JSON object on stdout:
//   tokens          the n generated ids (the first one is sampled from the prompt's logits)
//   decode_tok_s    (n-1) / wall time from the first generated token to the last: one-token
//                   decode steps (evaluate + greedy sample) only, prompt processing excluded,
//                   the same accounting as dspark's plain decoding
//   eval_tok_s      llama.cpp's own eval counter (llama_perf_context: decode calls of one
//                   token, sampling excluded), or null when it cannot be read
//   prompt_ms       wall time of the prompt's evaluation
//   cpu_backend     the ggml CPU backend library that was loaded (it picks the best variant
//                   for the CPU unless the install directory holds only one)
//   threads, flash_attention, batch_size, kv_cache   the context settings that were in force
//                   (the KV cache type is llama.cpp's default f16 unless --kv says otherwise)
// With --logits, the decode runs one controlled step at a time instead (slower; not timed) and
// the raw logits of every step are written to OUT.json as base64 little-endian float32 rows.
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import {writeFileSync} from "node:fs";

function usage(msg) {
  process.stderr.write(`llamacpp-decode: ${msg}\n`);
  process.exit(2);
}

const opt = {threads: 1, flash: "off", batch: 512, n: 64, ctx: 0, kv: "f16"};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const k = argv[i], v = argv[i + 1];
  if (v === undefined) usage(`${k} needs a value`);
  i++;
  switch (k) {
    case "--model": opt.model = v; break;
    case "--tokens": opt.tokens = v; break;
    case "-n": case "--n": opt.n = Number(v); break;
    case "--threads": opt.threads = Number(v); break;
    case "--flash": opt.flash = v; break;
    case "--batch": opt.batch = Number(v); break;
    case "--ctx": opt.ctx = Number(v); break;
    case "--kv": opt.kv = v; break;
    case "--logits": opt.logits = v; break;
    default: usage(`unknown flag ${k}`);
  }
}
if (!opt.model) usage("--model is required");
if (!opt.tokens) usage("--tokens is required");
const prompt = opt.tokens.split(",").map((s) => Number(s.trim()));
if (prompt.some((t) => !Number.isInteger(t) || t < 0)) usage(`--tokens: ${opt.tokens} is not a list of token ids`);
for (const [k, v] of [["-n", opt.n], ["--threads", opt.threads], ["--batch", opt.batch]]) {
  if (!Number.isInteger(v) || v < 1) usage(`${k} must be a positive integer`);
}
if (opt.flash !== "on" && opt.flash !== "off") usage("--flash must be on or off");
const kvTypes = {f16: "F16", f32: "F32", bf16: "BF16"};
if (!(opt.kv in kvTypes)) usage("--kv must be f16, f32 or bf16");
const dir = process.env.DSPARK_LLAMA_DIR;
if (!dir) usage("DSPARK_LLAMA_DIR is not set (scripts/bench-llamacpp.sh installs node-llama-cpp there)");

const req = createRequire(`${dir}/package.json`);
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(req.resolve("node-llama-cpp")).href);

// The logger sees every llama.cpp line; keep the ones this report needs and pass on errors.
let cpuBackend = null;
const perf = [];
let capture = false;
const llama = await getLlama({
  gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, progressLogs: false,
  maxThreads: opt.threads, logLevel: LlamaLogLevel.debug,
  logger(level, message) {
    const m = /loaded CPU backend from (\S+)/.exec(message);
    if (m) cpuBackend = m[1].split("/").pop();
    if (capture) perf.push(message);
    if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) process.stderr.write(`llama.cpp: ${message}\n`);
  },
});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0, useMmap: process.env.LLAMA_MMAP !== "0"});
const need = prompt.length + opt.n + 8;
const context = await model.createContext({
  contextSize: opt.ctx > 0 ? opt.ctx : Math.max(256, need), sequences: 1,
  threads: {ideal: opt.threads, min: opt.threads}, flashAttention: opt.flash === "on",
  batchSize: opt.batch, performanceTracking: true,
  experimentalKvCacheKeyType: kvTypes[opt.kv], experimentalKvCacheValueType: kvTypes[opt.kv],
});
const seq = context.getSequence();
const out = {model: opt.model, prompt, tokens: [], cpu_backend: cpuBackend, threads: context.currentThreads,
  flash_attention: context.flashAttention, batch_size: context.batchSize, kv_cache: opt.kv};

if (opt.logits) {
  // One controlled step at a time: the logits of every generated position, greedy choice.
  let V = 0; // the logits map of a step holds every token of the vocabulary
  const rows = [];
  const next = {generateNext: {token: true, logits: true, options: {temperature: 0}}};
  let input = [...prompt.slice(0, -1), [prompt[prompt.length - 1], next]];
  for (let i = 0; i < opt.n; i++) {
    const res = await seq.controlledEvaluate(input);
    const r = res[res.length - 1].next;
    V ||= r.logits.size;
    const row = new Float32Array(V);
    for (const [tok, l] of r.logits) row[tok] = l;
    rows.push(Buffer.from(row.buffer).toString("base64"));
    out.tokens.push(r.token);
    input = [[r.token, next]];
  }
  writeFileSync(opt.logits, JSON.stringify({prompt, tokens: out.tokens, vocab: V, logits_f32_b64: rows}));
} else {
  let t1 = 0;
  const t0 = performance.now();
  for await (const tok of seq.evaluate(prompt, {temperature: 0})) {
    if (out.tokens.length === 0) {
      out.prompt_ms = performance.now() - t0;
      capture = true;
      await context.printTimings(); // counters from here on are the decode steps'
      perf.length = 0;
      t1 = performance.now();
    }
    out.tokens.push(tok);
    if (out.tokens.length >= opt.n) break;
  }
  const t2 = performance.now();
  await context.printTimings();
  capture = false;
  out.decode_tok_s = opt.n > 1 ? (opt.n - 1) / ((t2 - t1) / 1000) : null;
  // "eval time = X ms / N runs": the one-token decode calls since the reset above.
  out.eval_tok_s = null;
  for (const line of perf) {
    const m = /\beval time\s*=\s*([\d.]+) ms \/\s*(\d+) (runs|tokens)/.exec(line);
    if (m && !/prompt eval/.test(line)) out.eval_tok_s = Number(m[2]) / (Number(m[1]) / 1000);
  }
  out.eval_runs_log = perf.filter((l) => /eval time/.test(l)).map((l) => l.trim());
}
out.cpu_backend = cpuBackend;
process.stdout.write(JSON.stringify(out) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
