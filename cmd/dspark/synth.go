package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dspark-dev/dspark/internal/outpath"
	"github.com/dspark-dev/dspark/synth"
)

// synthFlags are the flags of `dspark synth`.
type synthFlags struct {
	kind, arch, preset, out, target, brk          string
	shardSize, backbone, tapIDs                   string
	seed                                          uint64
	noQLoRA, tied, dense, fp8, groupRouting       bool
	dflashNames, withTokenizer, quiet             bool
	force, causal, moe, wrapper, perExpert, mxfp4 bool
	layers, heads, taps, block, markovRank        int
	mtp                                           int
	taps2                                         []int // --tap-ids, parsed
}

func newSynthCmd() *cobra.Command {
	var f synthFlags
	cmd := &cobra.Command{
		Use:   "synth --kind target|dspark|dflash [--arch deepseek2|qwen3|qwen35|kimi-k3|kimi-linear] [--backbone mla|gqa] --preset tiny|demo|small|qwen3-8b|k3-full|real-slice --out DIR",
		Short: "Write a synthetic Hugging Face checkpoint with the real schema (for tests and benchmarks)",
		Long: `synth writes a complete, deterministic (per --seed) Hugging Face checkpoint directory:

  --kind target   a Kimi-K2-style DeepseekV3ForCausalLM: config.json, model.safetensors (or
                  shards + index), tiktoken.model (byte-level BPE trained on built-in text),
                  tokenizer_config.json, generation_config.json.
                  With --arch qwen3: a dense Qwen3ForCausalLM (presets tiny and small) with a
                  Qwen-style tokenizer.json and tokenizer_config.json.
                  With --arch qwen35: a Qwen3.5 hybrid (Gated DeltaNet + gated attention)
                  Qwen3_5ForCausalLM, or Qwen3_5MoeForCausalLM with --moe (presets tiny and
                  small); --mtp N adds the mtp.* block, --wrapper writes the released
                  multimodal layout (Qwen3_5*ForConditionalGeneration, text_config,
                  model.language_model.* and a small vision tower).
                  With --arch kimi-k3: a KimiK3ForConditionalGeneration (hybrid KDA + MLA,
                  attention residuals, latent MoE; text_config, language_model. prefix, a tiny
                  vision tower; --mxfp4 for compressed-tensors MXFP4 routed experts); with
                  --arch kimi-linear a KimiLinearForCausalLM. Presets tiny, small, real-slice
                  (the real widths, 4 layers, 4 experts).
  --kind dspark   a K3DSparkModel draft (68 tensors for 5 layers) paired with --target DIR
                  (hidden size, vocab, layer ids, embed_tokens copied byte for byte). Without
                  --target it pairs with the target synth would write for the same preset and
                  seed; k3-full is the real Kimi-K3 DSpark shape (7,124,633,450 bytes).
                  --backbone gqa writes a Qwen3-style GQA DSpark (Qwen3DSparkModel: Markov
                  and confidence heads, frozen embed_tokens / lm_head copies); its
                  qwen3-8b preset is DeepSpec's Qwen3-8B DSpark, k3-full the GQA Kimi-K3
                  DSpark (62 tensors).
  --kind dflash   a head-less GQA DFlash draft (DFlashDraftModel: no heads, mask-position
                  blocks); qwen3-8b is z-lab's Qwen3-8B DFlash (block 16).

--break NAME writes a deliberately broken variant for converter error tests: ` + strings.Join(synth.Breaks, ", ") + `.
See docs/synth.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error { return runSynth(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "kind", "", "what to write: target, dspark or dflash (required)")
	fl.StringVar(&f.arch, "arch", "deepseek2", "target: the architecture, deepseek2 (Kimi-K2 style), qwen3 (dense Qwen3), qwen35 (Qwen3.5 hybrid), kimi-k3 or kimi-linear")
	fl.BoolVar(&f.moe, "moe", false, "target --arch qwen35: the MoE variant (Qwen3_5MoeForCausalLM)")
	fl.BoolVar(&f.wrapper, "wrapper", false, "target --arch qwen35: the multimodal wrapper layout of the released checkpoints")
	fl.BoolVar(&f.perExpert, "per-expert", false, "target --arch qwen35 --moe: one matrix per expert instead of the fused 3-D experts")
	fl.IntVar(&f.mtp, "mtp", 0, "target --arch qwen35: multi-token-prediction layers (mtp.* tensors), 0..4")
	fl.StringVar(&f.backbone, "backbone", "", "dspark/dflash: the draft backbone, "+strings.Join(synth.Backbones, " or ")+" (default: mla for dspark, gqa for dflash)")
	fl.StringVar(&f.preset, "preset", synth.Tiny, "size: "+strings.Join(synth.Presets, ", "))
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the pseudo-random weights")
	fl.StringVar(&f.out, "out", "", "output directory (required)")
	fl.StringVar(&f.target, "target", "", "dspark: the target checkpoint directory to pair with")
	fl.StringVar(&f.brk, "break", "", "write a broken variant: "+strings.Join(synth.Breaks, ", "))
	fl.StringVar(&f.shardSize, "shard-size", "0", "maximum bytes per shard (suffixes K, M, G = 2^10, 2^20, 2^30); 0 writes one model.safetensors")
	fl.BoolVar(&f.noQLoRA, "no-q-lora", false, "target: q_proj instead of q-LoRA")
	fl.BoolVar(&f.tied, "tied", false, "target: tie_word_embeddings (no lm_head)")
	fl.BoolVar(&f.dense, "dense", false, "target: every layer dense (no MoE)")
	fl.BoolVar(&f.fp8, "fp8", false, "target: FP8 (e4m3) block-quantized weights with weight_scale_inv")
	fl.BoolVar(&f.mxfp4, "mxfp4", false, "target: kimi-k3 routed experts as compressed-tensors MXFP4")
	fl.BoolVar(&f.groupRouting, "group-routing", false, "target: n_group > 1 group-limited routing")
	fl.BoolVar(&f.dflashNames, "dflash-names", false, "dspark: DFlash tensor names (fc, hidden_norm, norm, model. prefix) and dflash_config")
	fl.BoolVar(&f.withTokenizer, "with-tokenizer", false, "dspark: also write the target's tiktoken.model and tokenizer_config.json (trained if there is no --target; ~30 s for k3-full)")
	fl.BoolVar(&f.causal, "causal", false, "dspark: causal block attention (is_causal: true): each block row sees the rows up to itself")
	fl.IntVar(&f.layers, "layers", 0, "dspark: draft layers (default: the preset's)")
	fl.IntVar(&f.heads, "heads", 0, "dspark: attention heads (default: the preset's; head dims stay the preset's)")
	fl.IntVar(&f.taps, "taps", 0, "dspark: tapped target layers (default: the preset's)")
	fl.StringVar(&f.tapIDs, "tap-ids", "", "dspark/dflash --backbone gqa: the tapped target layers, comma-separated HF ids (any layer but the last, DeltaNet layers of a qwen35 target included)")
	fl.IntVar(&f.block, "block", 0, "dspark: block size (default: the preset's)")
	fl.IntVar(&f.markovRank, "markov-rank", 0, "dspark: Markov head rank (default: the preset's)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar and no summary")
	fl.BoolVar(&f.force, "force", false, "overwrite an existing checkpoint in --out")
	return cmd
}

func init() { rootCmd.AddCommand(newSynthCmd()) }

// parseSize parses a byte count with an optional K, M or G (binary) suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	t := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

// validate checks flag combinations; every error is a usage error.
func (f *synthFlags) validate(cmd *cobra.Command) error {
	if f.kind != "target" && f.kind != "dspark" && f.kind != "dflash" {
		return usagef("--kind must be target, dspark or dflash, got %q", f.kind)
	}
	if f.backbone == "" {
		f.backbone = synth.BackboneMLA
		if f.kind == "dflash" {
			f.backbone = synth.BackboneGQA
		}
	}
	if !slices.Contains(synth.Backbones, f.backbone) {
		return usagef("--backbone must be %s, got %q", strings.Join(synth.Backbones, " or "), f.backbone)
	}
	if f.kind == "dflash" && f.backbone != synth.BackboneGQA {
		return usagef("--backbone %s: head-less DFlash drafts (--kind dflash) have a GQA backbone", f.backbone)
	}
	kimi := f.kind == "target" && (f.arch == synth.ArchKimiK3 || f.arch == synth.ArchKimiLinear)
	if !slices.Contains(synth.Presets, f.preset) && !(kimi && slices.Contains(synth.KimiPresets, f.preset)) {
		return usagef("--preset must be one of %s, got %q", strings.Join(synth.Presets, ", "), f.preset)
	}
	if f.out == "" {
		return usagef("--out DIR is required")
	}
	if f.brk != "" && !slices.Contains(synth.Breaks, f.brk) {
		return usagef("--break must be one of %s, got %q", strings.Join(synth.Breaks, ", "), f.brk)
	}
	targetOnly := []string{"arch", "no-q-lora", "tied", "dense", "fp8", "group-routing", "moe", "wrapper", "mtp", "per-expert", "mxfp4"}
	draftOnly := []string{"target", "dflash-names", "with-tokenizer", "causal", "layers", "heads", "taps", "block", "markov-rank", "backbone", "tap-ids"}
	wrong := targetOnly
	if f.kind == "target" {
		wrong = draftOnly
	} else if f.kind == "dflash" {
		wrong = append(slices.Clone(targetOnly), "markov-rank")
	}
	for _, name := range wrong {
		if cmd.Flags().Changed(name) {
			return usagef("--%s does not apply to --kind %s", name, f.kind)
		}
	}
	gqaPresets := []string{synth.Tiny, synth.Small, synth.Qwen3_8B, synth.K3Full}
	switch {
	case f.kind != "target" && f.backbone == synth.BackboneGQA && !slices.Contains(gqaPresets, f.preset):
		return usagef("--preset %s has no GQA draft (GQA presets: %s)", f.preset, strings.Join(gqaPresets, ", "))
	case f.kind != "target" && f.backbone == synth.BackboneMLA && f.preset == synth.Qwen3_8B:
		return usagef("--preset %s is a GQA draft preset: add --backbone gqa", f.preset)
	case f.kind == "dflash" && f.preset == synth.K3Full:
		return usagef("--preset %s has no head-less DFlash draft (the GQA K3 draft is a DSpark: --kind dspark --backbone gqa)", f.preset)
	case f.kind == "target" && f.preset == synth.Qwen3_8B:
		return usagef("--preset %s is draft-only: use --kind dspark --backbone gqa or --kind dflash", f.preset)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"layers", f.layers}, {"heads", f.heads}, {"taps", f.taps}, {"block", f.block}, {"markov-rank", f.markovRank}} {
		if cmd.Flags().Changed(n.name) && (n.v < 1 || n.v > 1<<16) {
			return usagef("--%s must be in 1..65536, got %d", n.name, n.v)
		}
	}
	if f.tapIDs != "" {
		if f.backbone != synth.BackboneGQA {
			return usagef("--tap-ids applies to GQA drafts (--backbone gqa or --kind dflash)")
		}
		if cmd.Flags().Changed("taps") {
			return usagef("--tap-ids and --taps are exclusive")
		}
		for _, s := range strings.Split(f.tapIDs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 || n > 1<<12 {
				return usagef("--tap-ids: %q is not a layer id (want comma-separated integers in 0..4096)", s)
			}
			f.taps2 = append(f.taps2, n)
		}
	}
	if f.kind == "target" && f.preset == synth.K3Full {
		return usagef("--preset %s is draft-only: use --kind dspark", synth.K3Full)
	}
	if f.kind == "target" {
		switch f.arch {
		case "deepseek2":
			if f.mxfp4 {
				return usagef("--mxfp4 applies to --arch kimi-k3 only")
			}
		case synth.ArchKimiK3, synth.ArchKimiLinear:
			if !slices.Contains(synth.KimiPresets, f.preset) {
				return usagef("--preset %s has no %s target (presets: %s)", f.preset, f.arch, strings.Join(synth.KimiPresets, ", "))
			}
			for _, name := range []string{"no-q-lora", "tied", "dense", "fp8", "group-routing", "break"} {
				if cmd.Flags().Changed(name) {
					return usagef("--%s does not apply to --arch %s", name, f.arch)
				}
			}
			if f.mxfp4 && f.arch != synth.ArchKimiK3 {
				return usagef("--mxfp4 applies to --arch kimi-k3 only")
			}
		case "qwen3":
			if f.mxfp4 {
				return usagef("--mxfp4 applies to --arch kimi-k3 only")
			}
			if !slices.Contains(synth.Qwen3Presets, f.preset) {
				return usagef("--preset %s has no qwen3 target (qwen3 presets: %s)", f.preset, strings.Join(synth.Qwen3Presets, ", "))
			}
			for _, name := range []string{"no-q-lora", "dense", "fp8", "group-routing", "break"} {
				if cmd.Flags().Changed(name) {
					return usagef("--%s does not apply to --arch qwen3", name)
				}
			}
		case "qwen35":
			if f.mxfp4 {
				return usagef("--mxfp4 applies to --arch kimi-k3 only")
			}
			if !slices.Contains(synth.Qwen35Presets, f.preset) {
				return usagef("--preset %s has no qwen35 target (qwen35 presets: %s)", f.preset, strings.Join(synth.Qwen35Presets, ", "))
			}
			for _, name := range []string{"no-q-lora", "dense", "fp8", "group-routing", "break"} {
				if cmd.Flags().Changed(name) {
					return usagef("--%s does not apply to --arch qwen35", name)
				}
			}
			if f.perExpert && !f.moe {
				return usagef("--per-expert applies to --moe targets")
			}
			if f.mtp < 0 || f.mtp > 4 {
				return usagef("--mtp must be in 0..4, got %d", f.mtp)
			}
		default:
			return usagef("--arch must be deepseek2, qwen3, qwen35, kimi-k3 or kimi-linear, got %q", f.arch)
		}
		if f.arch != "qwen35" {
			for _, name := range []string{"moe", "wrapper", "mtp", "per-expert"} {
				if cmd.Flags().Changed(name) {
					return usagef("--%s applies to --arch qwen35 only", name)
				}
			}
		}
	}
	return nil
}

func runSynth(cmd *cobra.Command, f synthFlags) error {
	if err := f.validate(cmd); err != nil {
		return err
	}
	shard, err := parseSize(f.shardSize)
	if err != nil {
		return usagef("--shard-size: %v", err)
	}
	if err := outpath.Check("--out", f.out, f.target); err != nil {
		return usageError{err}
	}
	wo := synth.WriteOptions{ShardSize: shard, Break: f.brk, Overwrite: f.force}
	topts := synth.TargetOptions{Preset: f.preset, Seed: f.seed, NoQLoRA: f.noQLoRA, Tied: f.tied,
		Dense: f.dense, FP8: f.fp8, GroupRouting: f.groupRouting}
	dopts := synth.DraftOptions{Preset: f.preset, Seed: f.seed, TargetDir: f.target, DFlashNames: f.dflashNames,
		WithTokenizer: f.withTokenizer, Causal: f.causal, Layers: f.layers, Heads: f.heads, Taps: f.taps,
		BlockSize: f.block, MarkovRank: f.markovRank, Backbone: f.backbone, NoHeads: f.kind == "dflash", TapIDs: f.taps2}

	qopts := synth.Qwen3Options{Preset: f.preset, Seed: f.seed, Tied: f.tied}
	qwen3 := f.kind == "target" && f.arch == "qwen3"
	q35opts := synth.Qwen35Options{Preset: f.preset, Seed: f.seed, Tied: f.tied, MoE: f.moe, MTP: f.mtp, Wrapper: f.wrapper, PerExpert: f.perExpert}
	qwen35 := f.kind == "target" && f.arch == "qwen35"
	kopts := synth.KimiOptions{Arch: f.arch, Preset: f.preset, Seed: f.seed, MXFP4: f.mxfp4}
	kimi := f.kind == "target" && (f.arch == synth.ArchKimiK3 || f.arch == synth.ArchKimiLinear)

	var total int64
	switch {
	case qwen3:
		p, err := synth.PlanQwen3(qopts, f.brk)
		if err != nil {
			return err
		}
		total = p.Roster.Bytes()
	case qwen35:
		p, err := synth.PlanQwen35(q35opts, f.brk)
		if err != nil {
			return err
		}
		total = p.Roster.Bytes()
	case kimi:
		p, err := synth.PlanKimi(kopts)
		if err != nil {
			return err
		}
		total = p.Roster.Bytes()
	case f.kind == "target":
		p, err := synth.PlanTarget(topts, f.brk)
		if err != nil {
			return err
		}
		total = p.Roster.Bytes()
	default:
		p, err := synth.PlanDraft(dopts, f.brk)
		if err != nil {
			return err
		}
		total = p.Roster.Bytes()
	}
	var bar *progressbar.ProgressBar
	if !f.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(fmt.Sprintf("synth %s %s", f.preset, f.kind)),
			progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionClearOnFinish())
		wo.Progress = func(n int64) { _ = bar.Add64(n) }
	}
	// A directory this run creates is removed again if the run fails (a full disk included):
	// nothing is left behind, not even an empty directory.
	_, statErr := os.Stat(f.out)
	created := errors.Is(statErr, fs.ErrNotExist)
	start := time.Now()
	var res *synth.Result
	switch {
	case qwen3:
		res, err = synth.Qwen3Target(f.out, qopts, wo)
	case qwen35:
		res, err = synth.Qwen35Target(f.out, q35opts, wo)
	case kimi:
		res, err = synth.KimiTarget(f.out, kopts, wo)
	case f.kind == "target":
		res, err = synth.Target(f.out, topts, wo)
	default:
		res, err = synth.Draft(f.out, dopts, wo)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		if created {
			os.RemoveAll(f.out)
		}
		return err
	}
	if !f.quiet {
		printSynthSummary(cmd.OutOrStdout(), f, res, time.Since(start))
	}
	return nil
}

func printSynthSummary(w io.Writer, f synthFlags, res *synth.Result, d time.Duration) {
	what := f.preset + " " + f.kind
	if f.kind == "target" && f.arch != "deepseek2" {
		what += " (" + f.arch + ")"
	}
	if f.brk != "" {
		what += " (broken: " + f.brk + ")"
	}
	fmt.Fprintf(w, "wrote %s to %s: %d tensors, %d parameters, %d bytes of tensor data, %d files in %.2fs (%.0f MB/s)\n",
		what, f.out, res.Tensors, res.Params, res.Bytes, len(res.Files), d.Seconds(),
		float64(res.Bytes)/1e6/max(d.Seconds(), 1e-9))
}
