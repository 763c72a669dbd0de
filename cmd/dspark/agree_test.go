package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dspark-dev/dspark/gguf"
)

// TestLintAndRuntimeAgree: a draft or target whose metadata the runtime refuses also fails
// inspect --check (the dspark loader verdict says no), and run refuses it as a file error
// (exit 1 naming the key), not a usage error.
func TestLintAndRuntimeAgree(t *testing.T) {
	target, draft := convertedPair(t)
	dir := t.TempDir()
	cases := []struct {
		name     string
		onTarget bool
		key      string
		v        gguf.Value
	}{
		{"block size 2^32-1", false, "dflash.block_size", gguf.U32(math.MaxUint32)},
		{"block size 65", false, "dflash.block_size", gguf.U32(65)},
		{"NaN epsilon", false, "dflash.attention.layer_norm_rms_epsilon", gguf.F32(float32(math.NaN()))},
		{"negative epsilon", true, "deepseek2.attention.layer_norm_rms_epsilon", gguf.F32(-1)},
		{"bos outside the vocabulary", true, "tokenizer.ggml.bos_token_id", gguf.U32(5000)},
		{"eos 2^32-1", true, "tokenizer.ggml.eos_token_id", gguf.U32(math.MaxUint32)},
	}
	for _, c := range cases {
		src := draft
		if c.onTarget {
			src = target
		}
		bad := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".gguf")
		rewriteGGUF(t, src, bad, func(kvs *[]gguf.KV) { setKV(kvs, c.key, c.v) })
		out, code := runCLI(t, "inspect", "--check", bad)
		if code != 1 || !strings.Contains(out, c.key) {
			t.Errorf("%s: inspect --check: exit %d\n%s", c.name, code, out)
		}
		if !c.onTarget && !strings.Contains(out, "dspark") {
			t.Errorf("%s: no dspark verdict\n%s", c.name, out)
		}
		tg, dr := target, draft
		if c.onTarget {
			tg = bad
		} else {
			dr = bad
		}
		out, code = runCLI(t, "run", "--target", tg, "--draft", dr, "--tokens", "5,6", "-n", "4")
		if code != 1 || !strings.Contains(out, c.key) || strings.Contains(out, "-n") {
			t.Errorf("%s: run: exit %d\n%s", c.name, code, out)
		}
	}
}

// TestLlamaCppExpertAsserts: inspect --check lints the expert assertions llama.cpp's loader
// aborts on (the English demo target once declared one expert in one group), and a target
// convert writes without group-limited routing carries no group keys.
func TestLlamaCppExpertAsserts(t *testing.T) {
	target, _ := convertedPair(t)
	f, err := gguf.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	_, hasGroups := f.Lookup("deepseek2.expert_group_count")
	count, _ := f.Lookup("deepseek2.expert_count")
	f.Close()
	if hasGroups {
		t.Error("convert wrote expert_group_count for a model without group-limited routing")
	}
	n, _ := count.Any().(uint32)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		kvs  map[string]gguf.Value
		want string
	}{
		{"one group of all experts", map[string]gguf.Value{"deepseek2.expert_group_count": gguf.U32(n), "deepseek2.expert_group_used_count": gguf.U32(1)}, "GGML_ASSERT(n_expert_groups < n_expert)"},
		{"every group used", map[string]gguf.Value{"deepseek2.expert_group_count": gguf.U32(2), "deepseek2.expert_group_used_count": gguf.U32(2)}, "0 < n_group_used < n_expert_groups"},
		{"too many experts", map[string]gguf.Value{"deepseek2.expert_count": gguf.U32(2048)}, "LLAMA_MAX_EXPERTS"},
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".gguf")
		rewriteGGUF(t, target, bad, func(kvs *[]gguf.KV) {
			for k, v := range c.kvs {
				setKV(kvs, k, v)
			}
		})
		out, code := runCLI(t, "inspect", "--check", bad)
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d\n%s", c.name, code, out)
		}
	}
}

// TestUnreasonableSizesAreFileErrors: a latent width whose cache could not fit one position,
// consistent with every key rule, is a file error (exit 1) naming the file and the tensor it
// contradicts, never a usage error blaming -n. (Sizes that no tensor bounds are capped by the
// declaration, block_size by TestLintAndRuntimeAgree; run's memory check also calls a cache
// that cannot hold one position a file error, as a last line.)
func TestUnreasonableSizesAreFileErrors(t *testing.T) {
	target, _ := convertedPair(t)
	bad := filepath.Join(t.TempDir(), "huge.gguf")
	const r = 1 << 28 // latent width: every rule holds (key/value lengths follow it), the cache does not fit
	rewriteGGUF(t, target, bad, func(kvs *[]gguf.KV) {
		setKV(kvs, "deepseek2.attention.kv_lora_rank", gguf.U32(r))
		setKV(kvs, "deepseek2.attention.key_length", gguf.U32(r+8))
		setKV(kvs, "deepseek2.attention.value_length", gguf.U32(r))
	})
	out, code := runCLI(t, "run", "--target", bad, "--tokens", "5", "-n", "2")
	if code != 1 || !strings.Contains(out, "huge.gguf: tensor blk.0.attn_kv_a_mqa.weight") || strings.Contains(out, "-n") || strings.Contains(out, "Run 'dspark --help'") {
		t.Errorf("exit %d\n%s", code, out)
	}
}
