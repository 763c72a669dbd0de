package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/safetensors"
	"github.com/dspark-dev/dspark/tokenizer"
)

// WriteOptions control how a checkpoint is written.
type WriteOptions struct {
	// ShardSize is the maximum data bytes per shard; 0 writes one model.safetensors. The
	// shard breaks force at least two shards.
	ShardSize int64
	// Break names a broken variant (see Breaks); "" writes a correct checkpoint.
	Break string
	// Overwrite allows replacing an existing checkpoint in the directory (its stale shards
	// and index are removed first).
	Overwrite bool
	// Progress, if set, is called with the byte count of every write of tensor data.
	Progress func(n int64)
	// Tensors, if set, gives the bytes of the named tensors (exactly their dtype and shape;
	// safetensors checks the count) in place of the seeded synthetic values: a caller that
	// plants weights (the demo pair) writes each file once.
	Tensors map[string]func(w io.Writer) error
}

// Result describes a written checkpoint.
type Result struct {
	Files   []string // every file written (a deleted shard of index-missing-shard excluded)
	Tensors int
	Params  int64
	Bytes   int64 // tensor data bytes (before any truncation)
}

// TargetMetadata returns the __metadata__ of a target checkpoint (what transformers writes).
func TargetMetadata() map[string]string { return map[string]string{"format": "pt"} }

// DraftMetadata returns the __metadata__ of a draft checkpoint (the real K3 DSpark's).
func DraftMetadata() map[string]string { return map[string]string{"torchspec_version": "0.1.0"} }

// Target writes the synthetic target opts describes into dir (created if needed).
func Target(dir string, opts TargetOptions, wo WriteOptions) (*Result, error) {
	p, err := PlanTarget(opts, wo.Break)
	if err != nil {
		return nil, err
	}
	names := []string{"config.json", "generation_config.json", "tokenizer_config.json", "tiktoken.model"}
	if err := prepareDir(dir, names, wo.Overwrite); err != nil {
		return nil, err
	}
	g := Generator{Seed: opts.Seed}
	res, err := writeWeights(dir, p.Roster, TargetMetadata(), g, wo.Tensors, wo)
	if err != nil {
		return nil, err
	}
	tokFiles, err := writeTokenizer(dir, p.Config, p.Specials, opts.Ranks, wo.Overwrite)
	if err != nil {
		return nil, err
	}
	gc, err := generationConfigJSON(p.Config)
	if err != nil {
		return nil, err
	}
	cj, err := marshal(p.Config, "  ")
	if err != nil {
		return nil, err
	}
	// config.json last: its presence means the checkpoint is complete.
	for _, f := range []struct {
		name string
		b    []byte
	}{{"generation_config.json", gc}, {"config.json", cj}} {
		if err := writeJSON(filepath.Join(dir, f.name), f.b, wo.Overwrite); err != nil {
			return nil, err
		}
	}
	res.Files = append(res.Files, tokFiles...)
	res.Files = append(res.Files, filepath.Join(dir, "generation_config.json"), filepath.Join(dir, "config.json"))
	return res, nil
}

// writeTokenizer writes tiktoken.model (cfg.Ranks() trained ranks) and
// tokenizer_config.json (specials) into dir and returns their paths.
func writeTokenizer(dir string, cfg *TargetConfig, specials map[int]string, ranks [][]byte, overwrite bool) ([]string, error) {
	if ranks == nil {
		var err error
		if ranks, err = TrainTokenizer(cfg.Ranks()); err != nil {
			return nil, fmt.Errorf("synth: train tokenizer: %w", err)
		}
	} else if len(ranks) != cfg.Ranks() {
		return nil, fmt.Errorf("synth: the given tokenizer has %d ranks, the config needs %d (vocab %d minus reserved ids)", len(ranks), cfg.Ranks(), cfg.VocabSize)
	}
	tk := filepath.Join(dir, "tiktoken.model")
	if err := writeAtomic(tk, overwrite, func(w io.Writer) error { return tokenizer.WriteTiktoken(w, ranks) }); err != nil {
		return nil, err
	}
	tc, err := tokenizerConfigJSON(specials, cfg, cfg.MaxPositionEmbeddings)
	if err != nil {
		return nil, err
	}
	tcPath := filepath.Join(dir, "tokenizer_config.json")
	if err := writeJSON(tcPath, tc, overwrite); err != nil {
		return nil, err
	}
	return []string{tk, tcPath}, nil
}

// tokenizerFiles are the tokenizer files of a target directory.
var tokenizerFiles = []string{"tiktoken.model", "tokenizer_config.json"}

// draftTokenizer writes the paired target's tokenizer files into a draft directory: copied
// from opts.TargetDir (tiktoken.model and tokenizer_config.json, or tokenizer.json and
// tokenizer_config.json for a Qwen3 target), or else trained exactly as the target of the same preset would have
// them (for k3-full: 163,584 ranks and 256 reserved ids, about 30 s of training).
func draftTokenizer(dir string, opts DraftOptions, overwrite bool) ([]string, error) {
	if opts.TargetDir != "" {
		var out []string
		files := tokenizerFiles
		if _, err := os.Stat(filepath.Join(opts.TargetDir, "tokenizer.json")); err == nil {
			files = qwen3TokenizerFiles // a Hugging Face tokenizer (a Qwen3 target)
		}
		for _, name := range files {
			b, err := os.ReadFile(filepath.Join(opts.TargetDir, name))
			if err != nil {
				return nil, fmt.Errorf("synth: target tokenizer: %w", err)
			}
			p := filepath.Join(dir, name)
			if err := writeAtomic(p, overwrite, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	var cfg *TargetConfig
	if opts.Preset == Qwen3_8B {
		return nil, fmt.Errorf("synth: preset %s has no tokenizer of its own to write: give the target with TargetDir", Qwen3_8B)
	}
	if opts.Preset == K3Full {
		t := k3Target
		cfg = &TargetConfig{VocabSize: t.Vocab, BosTokenID: t.Bos, EosTokenID: t.Bos + eosOffset,
			PadTokenID: t.Pad, MaxPositionEmbeddings: 1048576, reserved: t.Vocab - t.Bos}
	} else {
		var err error
		if cfg, err = TargetConfigFor(TargetOptions{Preset: opts.Preset}); err != nil {
			return nil, err
		}
	}
	return writeTokenizer(dir, cfg, SpecialTokens(cfg.Ranks(), cfg.VocabSize), nil, overwrite)
}

// Draft writes the synthetic draft opts describes into dir (created if needed).
func Draft(dir string, opts DraftOptions, wo WriteOptions) (*Result, error) {
	p, err := PlanDraft(opts, wo.Break)
	if err != nil {
		return nil, err
	}
	names := []string{"config.json"}
	if opts.WithTokenizer {
		names = append(names, tokenizerFiles...)
		names = append(names, qwen3TokenizerFiles...)
	}
	if err := prepareDir(dir, names, wo.Overwrite); err != nil {
		return nil, err
	}
	var copies map[string]func(io.Writer) error
	if p.TargetDir != "" {
		ck, err := safetensors.OpenCheckpoint(p.TargetDir)
		if err != nil {
			return nil, fmt.Errorf("synth: target: %w", err)
		}
		defer ck.Close()
		copies = map[string]func(io.Writer) error{}
		for i := range p.Roster {
			t := &p.Roster[i]
			var src func(io.Writer) error
			switch {
			case strings.HasSuffix(t.Name, "embed_tokens.weight"):
				src, err = embeddingSource(ck, p.TargetDir, t)
			case t.Name == "lm_head.weight":
				src, err = headSource(ck, p.TargetDir, t)
			default:
				continue
			}
			if err != nil {
				return nil, err
			}
			t.Init = Init{Encoding: Copy, Store: t.Dtype}
			copies[t.Name] = src
		}
	}
	for name, data := range wo.Tensors {
		if copies == nil {
			copies = map[string]func(io.Writer) error{}
		}
		copies[name] = data
	}
	g := Generator{Seed: opts.Seed}
	res, err := writeWeights(dir, p.Roster, DraftMetadata(), g, copies, wo)
	if err != nil {
		return nil, err
	}
	cj, err := p.ConfigJSON()
	if err != nil {
		return nil, err
	}
	if opts.WithTokenizer {
		files, err := draftTokenizer(dir, opts, wo.Overwrite)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, files...)
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := writeJSON(cfgPath, cj, wo.Overwrite); err != nil {
		return nil, err
	}
	res.Files = append(res.Files, cfgPath)
	return res, nil
}

// embeddingSource returns a Data function copying the target's model.embed_tokens.weight,
// after checking that it has the draft embedding's dtype and shape.
func embeddingSource(ck *safetensors.Checkpoint, dir string, want *Tensor) (func(io.Writer) error, error) {
	return copySource(ck, dir, targetEmbedding(ck), want)
}

// targetEmbedding names a target's embedding: model.embed_tokens.weight, or the wrapped
// language model's in a multimodal release (model.language_model.* in Qwen3.5's,
// language_model.model.* in Kimi-K3's).
func targetEmbedding(ck *safetensors.Checkpoint) string {
	for _, wrapped := range []string{"model.language_model.embed_tokens.weight", "language_model.model.embed_tokens.weight"} {
		if _, ok := ck.Tensor(wrapped); ok {
			return wrapped
		}
	}
	return "model.embed_tokens.weight"
}

// headSource returns a Data function copying the target's output head: its lm_head.weight,
// or its embedding when it is tied (it has no lm_head).
func headSource(ck *safetensors.Checkpoint, dir string, want *Tensor) (func(io.Writer) error, error) {
	for _, name := range []string{"lm_head.weight", "language_model.lm_head.weight"} {
		if _, ok := ck.Tensor(name); ok {
			return copySource(ck, dir, name, want)
		}
	}
	return copySource(ck, dir, targetEmbedding(ck), want)
}

// copySource returns a Data function copying the target's tensor name, after checking that
// it has the dtype and shape of want.
func copySource(ck *safetensors.Checkpoint, dir, name string, want *Tensor) (func(io.Writer) error, error) {
	ti, ok := ck.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("synth: target %s has no %s", dir, name)
	}
	if ti.Dtype != want.Dtype || !slices.Equal(ti.Shape, want.Shape) {
		return nil, fmt.Errorf("synth: target %s: %s is %s %v, the draft needs %s %v (vocab_size x hidden_size of its config.json)",
			dir, name, ti.Dtype, ti.Shape, want.Dtype, want.Shape)
	}
	return func(w io.Writer) error {
		sr, err := ck.TensorReader(ti)
		if err != nil {
			return err
		}
		bp := getChunk()
		defer chunkPool.Put(bp)
		_, err = io.CopyBuffer(w, sr, *bp)
		return err
	}, nil
}

// writeWeights writes the roster as model.safetensors or shards, then applies a file break.
func writeWeights(dir string, r Roster, meta map[string]string, g Generator,
	copies map[string]func(io.Writer) error, wo WriteOptions) (*Result, error) {
	res := &Result{Tensors: len(r), Params: r.Params(), Bytes: r.Bytes()}
	r = r.FileOrder()
	for name := range copies {
		if r.Find(name) < 0 {
			return nil, fmt.Errorf("synth: data given for tensor %s, which the checkpoint does not have", name)
		}
	}
	src := make([]safetensors.TensorSource, len(r))
	for i := range r {
		t := &r[i]
		data := copies[t.Name]
		if data == nil {
			if t.Init.Encoding == Copy {
				return nil, fmt.Errorf("synth: tensor %s has no copy source", t.Name)
			}
			data = func(w io.Writer) error { return g.write(t, w) }
		}
		if wo.Progress != nil {
			inner := data
			data = func(w io.Writer) error { return inner(progressWriter{w, wo.Progress}) }
		}
		src[i] = safetensors.TensorSource{Name: t.Name, Dtype: t.Dtype,
			Shape: slices.Clone(t.Shape), Data: data}
	}
	limit := wo.ShardSize
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if shardBreak(wo.Break) && limit >= res.Bytes {
		limit = res.Bytes/3 + 1
	}
	paths, err := safetensors.WriteSharded(dir, meta, src, limit, wo.Overwrite)
	if err != nil {
		return nil, err
	}
	res.Files = paths
	if !shardBreak(wo.Break) {
		return res, nil
	}
	if len(paths) < 3 { // shards then the index
		return nil, fmt.Errorf("synth: break %s needs several shards; --shard-size %d gave one", wo.Break, wo.ShardSize)
	}
	last := paths[len(paths)-2]
	if wo.Break == BreakIndexMissingShard {
		res.Files = slices.Delete(res.Files, len(paths)-2, len(paths)-1)
		return res, os.Remove(last)
	}
	return res, truncateData(last)
}

// truncateData cuts a safetensors file to its header plus half of its tensor data.
func truncateData(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return fmt.Errorf("synth: truncate %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	start := 8 + int64(binary.LittleEndian.Uint64(n[:]))
	return f.Truncate(start + (st.Size()-start)/2)
}

// progressWriter reports every write's size.
type progressWriter struct {
	w  io.Writer
	fn func(int64)
}

// Write writes b to the underlying writer and reports the bytes written.
func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.fn(int64(n))
	return n, err
}

// prepareDir creates dir. Unless overwrite is set it refuses a directory that already holds
// a checkpoint (any of names, model.safetensors, the index or a shard); with overwrite it
// removes the weights files so that no stale shard survives.
func prepareDir(dir string, names []string, overwrite bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	shards, err := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if err != nil {
		return err
	}
	weights := append(shards, filepath.Join(dir, safetensors.SingleName), filepath.Join(dir, safetensors.IndexName))
	for _, p := range append(weights, joinAll(dir, names)...) {
		if _, err := os.Lstat(p); err == nil {
			if !overwrite {
				return fmt.Errorf("synth: %s: %w", p, atomicfile.ErrExists)
			}
		}
	}
	if overwrite {
		for _, p := range weights {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("synth: %w", err)
			}
		}
	}
	return nil
}

func joinAll(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

// writeJSON writes b plus a final newline atomically.
func writeJSON(path string, b []byte, overwrite bool) error {
	return writeAtomic(path, overwrite, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// writeAtomic writes path through internal/atomicfile.
func writeAtomic(path string, overwrite bool, fill func(io.Writer) error) error {
	af, err := atomicfile.Create(path, overwrite)
	if err != nil {
		return err
	}
	defer af.Abort()
	if err := fill(af); err != nil {
		return fmt.Errorf("%s: %w", path, atomicfile.Explain(err))
	}
	return af.Commit()
}
