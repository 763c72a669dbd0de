package synth

// Qwen35DraftRelease is a published DFlash / DSpark draft for a Qwen3.5-family target
// (target-qwen35.md section 4): a plain Qwen3 GQA backbone tapping the target's residual
// stream at TapIDs (HF: the output of each layer), DeltaNet layers included.
type Qwen35DraftRelease struct {
	Name   string
	Target string // the Qwen35Releases entry with the target's geometry
	TapIDs []int
	// Layers, Hidden, Heads, KVHeads, HeadDim are the draft's config (0: not published).
	Layers, Hidden, Heads, KVHeads, HeadDim int
	Block, Mask                             int
	DSpark                                  bool // Markov and confidence heads (else DFlash)
}

// Qwen35DraftReleases are the drafts section 4 lists with their taps. Qwen3.6-27B and
// Qwen3.8-27B share Qwen3.5-27B's geometry.
var Qwen35DraftReleases = []Qwen35DraftRelease{
	{Name: "Qwen3.5-27B DFlash (SpecForge)", Target: "Qwen3.5-27B", TapIDs: []int{3, 15, 31, 47, 59},
		Layers: 5, Hidden: 5120, Heads: 24, KVHeads: 4, HeadDim: 256, Block: 16, Mask: 248070},
	{Name: "Qwen3.5-35B-A3B DFlash (SpecForge)", Target: "Qwen3.5-35B-A3B", TapIDs: []int{3, 11, 19, 27, 35},
		Layers: 5, Hidden: 2048, Heads: 16, KVHeads: 2, HeadDim: 256, Block: 16, Mask: 248070},
	{Name: "Qwen3.5-4B DSpark (SpecForge)", Target: "Qwen3.5-4B", TapIDs: []int{1, 8, 15, 22, 29},
		Layers: 5, Hidden: 2560, Heads: 32, KVHeads: 8, HeadDim: 128, Block: 16, Mask: 248070, DSpark: true},
	{Name: "Qwen3.6-27B DSpark (SpecForge)", Target: "Qwen3.5-27B", TapIDs: []int{2, 17, 32, 47, 62},
		Layers: 5, Hidden: 5120, Heads: 32, KVHeads: 8, HeadDim: 128, Block: 16, Mask: 248070, DSpark: true},
	{Name: "z-lab Qwen3.8-27B-DFlash2", Target: "Qwen3.5-27B", TapIDs: []int{5, 19, 33, 47, 61}},
}
