// llamacpp-report: the bookkeeping of scripts/bench-llamacpp.sh (a benchmark helper, never part
// of `make test` or CI).
//
//   node llamacpp-report.mjs prompt INSPECT.json LEN   print LEN fixed token ids for the file
//   node llamacpp-report.mjs report DIR "1 2"          medians and ratios of the runs in DIR
//   node llamacpp-report.mjs compare LABEL FILE        one line from llamacpp-compare.go output
import {readFileSync, readdirSync} from "node:fs";
import {join} from "node:path";

const [cmd, ...args] = process.argv.slice(2);

function median(xs) {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const fmt = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const span = (xs, d = 1) => {
  const s = xs.filter((x) => Number.isFinite(x));
  return s.length ? `${fmt(Math.min(...s), d)}-${fmt(Math.max(...s), d)}` : "-";
};
function firstDiff(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : Math.min(a.length, b.length);
}

if (cmd === "prompt") {
  // LEN ids spread over the vocabulary below its top 256 (where the reserved tokens live).
  const [inspect, len] = args;
  const meta = JSON.parse(readFileSync(inspect, "utf8")).metadata;
  const arch = meta.find((m) => m.key === "general.architecture")?.value;
  let V = meta.find((m) => m.key === `${arch}.vocab_size`)?.value;
  V ??= meta.find((m) => m.key === "tokenizer.ggml.tokens")?.count;
  if (!V) throw new Error(`${inspect}: no vocabulary size`);
  const range = V > 512 ? V - 256 : V;
  const ids = [];
  for (let k = 0; k < Number(len); k++) ids.push((17 + k * 7919) % range);
  process.stdout.write(ids.join(",") + "\n");
} else if (cmd === "report") {
  const [dir, threadList] = args;
  const threads = threadList.trim().split(/\s+/).map(Number);
  const files = readdirSync(dir);
  const rounds = [...new Set(files.map((f) => /^r(\d+)-/.exec(f)?.[1]).filter(Boolean).map(Number))].sort((a, b) => a - b);
  const json = (f) => JSON.parse(readFileSync(join(dir, f), "utf8"));
  // BenchmarkTargetDecode/[file/]threads=T-P  N  ns/op  (value unit)...
  const readBench = (r) => {
    const out = {};
    for (const line of readFileSync(join(dir, `r${r}-read.txt`), "utf8").split("\n")) {
      const m = /^BenchmarkTargetDecode\/(?:file\/)?threads=(\d+)(-\d+)?\s+\d+\s+(.*)$/.exec(line);
      if (!m) continue;
      const f = m[3].trim().split(/\s+/);
      const v = {};
      for (let i = 0; i + 1 < f.length; i += 2) v[f[i + 1]] = Number(f[i]);
      out[m[1]] = v;
    }
    return out;
  };
  process.stdout.write(readFileSync(join(dir, "info.txt"), "utf8"));
  const rows = [];
  const notes = [];
  let backend = null;
  for (const t of threads) {
    const s = {off: [], on: [], offEval: [], onEval: [], ds: [], read: [], benchDs: [], benchRatio: [], best: [], vsBest: [], vsRead: [], weightMB: []};
    const toks = {off: [], on: [], ds: []};
    for (const r of rounds) {
      const off = json(`r${r}-t${t}-llama-off.json`), on = json(`r${r}-t${t}-llama-on.json`), ds = json(`r${r}-t${t}-dspark.json`);
      backend ??= off.cpu_backend;
      const n = ds.tokens.length;
      // dspark's figure counts n tokens over n-1 decode steps (the first comes from the prompt
      // pass); llama-decode's counts the n-1 steps: put both on steps per second.
      const dsRate = n > 1 ? (ds.plain_tokens_per_second * (n - 1)) / n : NaN;
      const b = readBench(r)[t] ?? {};
      s.off.push(off.decode_tok_s); s.on.push(on.decode_tok_s);
      s.offEval.push(off.eval_tok_s); s.onEval.push(on.eval_tok_s);
      s.ds.push(dsRate);
      s.read.push(b["read-limit-tok/s"]); s.benchDs.push(b["tok/s"]); s.benchRatio.push(b["ratio-to-read"]);
      s.weightMB.push(b["weight-MB/tok"]);
      const best = Math.max(off.decode_tok_s, on.decode_tok_s);
      s.best.push(best);
      s.vsBest.push(dsRate / best);
      s.vsRead.push(dsRate / b["read-limit-tok/s"]);
      toks.off.push(off.tokens); toks.on.push(on.tokens); toks.ds.push(ds.tokens);
      if (off.tokens.length !== n || on.tokens.length !== n) notes.push(`round ${r}, ${t} thread(s): llama.cpp made ${off.tokens.length}/${on.tokens.length} tokens, dspark ${n}`);
    }
    for (const [k, v] of Object.entries(toks)) {
      if (v.some((x) => firstDiff(x, v[0]) >= 0)) notes.push(`${t} thread(s): ${k} tokens differ between rounds`);
    }
    rows.push({t, s, toks});
  }
  const tok = rows[0].toks;
  console.log(`llama.cpp CPU backend: ${backend}; ${rounds.length} rounds; decode tok/s = (n-1) / time from the first generated token to the last\n`);
  console.log("| threads | llama.cpp FA off | llama.cpp FA on | dspark | dspark / llama.cpp best (goal >= 1.3) | read limit | dspark / read (goal >= 0.85) |");
  console.log("|---|---|---|---|---|---|---|");
  for (const {t, s} of rows) {
    console.log(`| ${t} | ${fmt(median(s.off))} (${span(s.off)}) | ${fmt(median(s.on))} (${span(s.on)}) | ${fmt(median(s.ds))} (${span(s.ds)}) | **${fmt(median(s.vsBest), 2)}** (${span(s.vsBest, 2)}) | ${fmt(median(s.read))} (${span(s.read)}) | **${fmt(median(s.vsRead), 2)}** (${span(s.vsRead, 2)}) |`);
  }
  console.log("\nmedians (range over rounds); ratios are medians of the per-round ratios; read limit = tok/s of");
  console.log("BenchmarkTargetDecode's streaming read of the step's weight bytes (kernels.StreamRead, same run;");
  console.log("one thread on the process CPU clock, more on the wall clock)");
  console.log("\nalso measured:");
  for (const {t, s} of rows) {
    console.log(`  ${t} thread(s): llama.cpp's own eval counter (sampling excluded) FA off ${fmt(median(s.offEval))}, on ${fmt(median(s.onEval))} tok/s;` +
      ` BenchmarkTargetDecode's dspark ${fmt(median(s.benchDs))} tok/s, ${fmt(median(s.benchRatio), 2)} of the read (paired per step; ${fmt(median(s.weightMB), median(s.weightMB) < 10 ? 2 : 0)} MB/token)`);
  }
  const d = firstDiff(tok.ds[0], tok.off[0]), dOn = firstDiff(tok.on[0], tok.off[0]);
  console.log(`  greedy tokens (${tok.ds[0].length}): dspark vs llama.cpp FA off ${d < 0 ? "identical" : `first differ at ${d}`};` +
    ` llama.cpp FA on vs off ${dOn < 0 ? "identical" : `first differ at ${dOn}`}`);
  for (const n of notes) console.log(`  note: ${n}`);
} else if (cmd === "compare") {
  const [label, file] = args;
  const lines = readFileSync(file, "utf8").trim().split("\n");
  const s = JSON.parse(lines[lines.length - 1]);
  const div = s.first_divergence < 0 ? `identical for ${s.steps} tokens`
    : `first divergence at token ${s.first_divergence} (dspark ${s.dspark_token_at_divergence}, llama.cpp ${s.llama_token_at_divergence})`;
  console.log(`  ${label}: ${div}; max |d log p| ${s.max_abs_logprob_diff.toPrecision(2)} over all steps` +
    (s.first_divergence > 0 ? ` (${s.max_abs_logprob_diff_before_divergence.toPrecision(2)} before the divergence)` : "") +
    `, ${s.max_abs_logprob_diff_at_llama_token.toPrecision(2)} at llama.cpp's tokens;` +
    ` smallest dspark top-1 margin ${s.min_dspark_top1_margin.toPrecision(2)}`);
} else {
  process.stderr.write("usage: llamacpp-report.mjs prompt INSPECT.json LEN | report DIR THREADS | compare LABEL FILE\n");
  process.exit(2);
}
