package mla

import (
	"fmt"
	"math"
)

// Config holds the hyperparameters of one MLA layer.
//
// NEmbd is the model width, NHead the number of heads, QLoraRank the query compression rank
// (0: no q-LoRA, the full Q matrix is used), KVLoraRank the latent width, DNope/DRope the
// non-rotated/rotated query-key head widths, DV the value head width, Eps the RMSNorm epsilon
// of the q_a and kv_a norms. RoPE.Dim must equal DRope (0 is taken as DRope).
type Config struct {
	NEmbd, NHead, QLoraRank, KVLoraRank, DNope, DRope, DV int
	Eps                                                   float32
	RoPE                                                  YaRNParams
}

// Weights holds the matrices of one MLA layer (GGUF deepseek2 names in brackets).
//
//   - QA [attn_q_a]: QLoraRank x NEmbd; QANorm [attn_q_a_norm]: QLoraRank values (nil: ones);
//     QB [attn_q_b]: NHead*(DNope+DRope) x QLoraRank. Used when QLoraRank > 0.
//   - Q [attn_q]: NHead*(DNope+DRope) x NEmbd. Used when QLoraRank == 0.
//   - KVA [attn_kv_a_mqa]: (KVLoraRank+DRope) x NEmbd; KVANorm [attn_kv_a_norm]: KVLoraRank
//     values (nil: ones).
//   - KB[h] [attn_k_b, head h]: KVLoraRank x DNope, i.e. W_UK[h] transposed (ggml {d_nope,
//     kv_lora, n_h}); KB[h] applied to q_nope gives the absorbed query.
//   - VB[h] [attn_v_b, head h]: DV x KVLoraRank, W_UV[h] as is (ggml {kv_lora, d_v, n_h}).
//   - O [attn_output]: NEmbd x NHead*DV.
//
// Each head's query is laid out q_nope (DNope) then q_pe (DRope); the KVA output is the latent
// (KVLoraRank) then k_pe (DRope); O's input is head 0's DV values, then head 1's, and so on.
//
// Optional fused forms of the same weights, used by Forward when set (the unfused ones must
// still be given: InjectKV, the tests' naive reference and the validation use them). They change no bit of
// the result, given Linears whose rows are computed independently (as the runtime's kernels
// do), and save passes over the weights and per-call overhead:
//
//   - KVAQ: KVA and then QA (or Q without q-LoRA) stacked into one matrix of
//     (KVLoraRank+DRope+QLoraRank) (or +NHead*(DNope+DRope)) rows x NEmbd: both projections of
//     a row in one pass, side by side.
//   - KBAll, VBAll: KB[0..NHead-1] and VB[0..NHead-1] as Grouped matrices (group h = head h):
//     the absorbed queries and the value projections of every head in one call each.
type Weights struct {
	QA, QB, Q, KVA, O Linear
	QANorm, KVANorm   []float32
	KB, VB            []Linear
	KVAQ              Linear
	KBAll, VBAll      Grouped
}

// Grouped is a set of equally shaped matrices, each applied to its own input rows in one
// call (the runtime's kernels.Mat made by kernels.Group). Rows is the total over the groups.
//
// MatMulGroups sets dst[j*dRow + g*dGroup + r] = sum_c M_g[r][c] x[j*xRow + g*xGroup + c] for
// batch rows j < n, groups g < Groups() and rows r < Rows()/Groups(); each output must be
// bit-identical to MatVec of M_g alone on that input.
type Grouped interface {
	Rows() int
	Cols() int
	Groups() int
	MatMulGroups(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup int, n int)
	// MatMulGroupsRange is MatMulGroups for groups [g0, g1) only, on the calling goroutine.
	MatMulGroupsRange(dst []float32, dRow, dGroup int, x []float32, xRow, xGroup, n, g0, g1 int)
}

// Mask selects which cache rows a new row attends to.
type Mask int

const (
	// Causal: new row i (written at cache index Len()+i) sees cache rows 0..Len()+i.
	Causal Mask = iota
	// Block: every new row sees all committed rows and all n new rows (the DSpark draft block).
	Block
)

// String returns the mask's name.
func (m Mask) String() string {
	switch m {
	case Causal:
		return "causal"
	case Block:
		return "block"
	}
	return fmt.Sprintf("Mask(%d)", int(m))
}

// validate checks the hyperparameters and fills defaults.
func (c *Config) validate() error {
	if c.NEmbd <= 0 || c.NHead <= 0 || c.KVLoraRank <= 0 || c.DNope <= 0 || c.DRope <= 0 || c.DV <= 0 || c.QLoraRank < 0 {
		return fmt.Errorf("mla: config dimensions must be positive (q_lora_rank may be 0): n_embd=%d n_head=%d q_lora=%d kv_lora=%d d_nope=%d d_rope=%d d_v=%d",
			c.NEmbd, c.NHead, c.QLoraRank, c.KVLoraRank, c.DNope, c.DRope, c.DV)
	}
	const maxDim = 1 << 24
	for _, d := range []int{c.NEmbd, c.NHead, c.QLoraRank, c.KVLoraRank, c.DNope, c.DRope, c.DV} {
		if d > maxDim {
			return fmt.Errorf("mla: config dimension %d exceeds %d", d, maxDim)
		}
	}
	if c.NHead > maxDim/(c.DNope+c.DRope) || c.NHead > maxDim/c.DV {
		return fmt.Errorf("mla: config n_head=%d x head width exceeds %d", c.NHead, maxDim)
	}
	if f := float64(c.Eps); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return fmt.Errorf("mla: rms norm epsilon %v must be finite and >= 0", c.Eps)
	}
	if c.RoPE.Dim == 0 {
		c.RoPE.Dim = c.DRope
	}
	if c.RoPE.Dim != c.DRope {
		return fmt.Errorf("mla: rope dimension %d differs from d_rope %d", c.RoPE.Dim, c.DRope)
	}
	return c.RoPE.Validate()
}

// checkLinear reports a missing matrix or one whose shape is not rows x cols.
func checkLinear(name string, l Linear, rows, cols int) error {
	if l == nil {
		return fmt.Errorf("mla: weight %s missing (want %d x %d)", name, rows, cols)
	}
	if l.Rows() != rows || l.Cols() != cols {
		return fmt.Errorf("mla: weight %s is %d x %d, want %d x %d", name, l.Rows(), l.Cols(), rows, cols)
	}
	return nil
}

func checkVector(name string, v []float32, n int) error {
	if v != nil && len(v) != n {
		return fmt.Errorf("mla: weight %s has %d values, want %d", name, len(v), n)
	}
	return nil
}

// validate checks every matrix shape against the config.
func (w *Weights) validate(c *Config) error {
	qRows := c.NHead * (c.DNope + c.DRope)
	if c.QLoraRank > 0 {
		if err := checkLinear("attn_q_a", w.QA, c.QLoraRank, c.NEmbd); err != nil {
			return err
		}
		if err := checkLinear("attn_q_b", w.QB, qRows, c.QLoraRank); err != nil {
			return err
		}
		if err := checkVector("attn_q_a_norm", w.QANorm, c.QLoraRank); err != nil {
			return err
		}
	} else if err := checkLinear("attn_q", w.Q, qRows, c.NEmbd); err != nil {
		return err
	}
	if err := checkLinear("attn_kv_a_mqa", w.KVA, c.KVLoraRank+c.DRope, c.NEmbd); err != nil {
		return err
	}
	if err := checkVector("attn_kv_a_norm", w.KVANorm, c.KVLoraRank); err != nil {
		return err
	}
	if err := checkLinear("attn_output", w.O, c.NEmbd, c.NHead*c.DV); err != nil {
		return err
	}
	if len(w.KB) != c.NHead || len(w.VB) != c.NHead {
		return fmt.Errorf("mla: attn_k_b/attn_v_b have %d/%d heads, want %d", len(w.KB), len(w.VB), c.NHead)
	}
	for h := range c.NHead {
		if err := checkLinear(fmt.Sprintf("attn_k_b[head %d]", h), w.KB[h], c.KVLoraRank, c.DNope); err != nil {
			return err
		}
		if err := checkLinear(fmt.Sprintf("attn_v_b[head %d]", h), w.VB[h], c.DV, c.KVLoraRank); err != nil {
			return err
		}
	}
	if w.KVAQ != nil {
		q := qRows
		if c.QLoraRank > 0 {
			q = c.QLoraRank
		}
		if err := checkLinear("attn_kv_a_mqa+attn_q_a (stacked)", w.KVAQ, c.KVLoraRank+c.DRope+q, c.NEmbd); err != nil {
			return err
		}
	}
	if err := checkGrouped("attn_k_b (grouped)", w.KBAll, c.NHead, c.KVLoraRank, c.DNope); err != nil {
		return err
	}
	return checkGrouped("attn_v_b (grouped)", w.VBAll, c.NHead, c.DV, c.KVLoraRank)
}

// checkGrouped reports an optional grouped matrix whose shape is not groups x (rows x cols).
func checkGrouped(name string, g Grouped, groups, rows, cols int) error {
	if g == nil {
		return nil
	}
	if g.Groups() != groups || g.Rows() != groups*rows || g.Cols() != cols {
		return fmt.Errorf("mla: weight %s is %d groups of %d x %d, want %d of %d x %d", name, g.Groups(), g.Rows()/max(1, g.Groups()), g.Cols(), groups, rows, cols)
	}
	return nil
}
