package calibrate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// Format is the "format" field of a calibration side file, Version its version.
const (
	Format  = "dspark-calibration"
	Version = 1
)

// MaxTemperature bounds a stored temperature (the fit's grid ends at 20).
const MaxTemperature = 1e4

// Sampling is the decoding setting a calibration was fitted for: the survival of a draft
// depends on it (greedy acceptance is an argmax match, sampled acceptance a coin).
type Sampling struct {
	Temperature float64 `json:"temperature"` // 0: greedy
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
}

// Params returns s as sampling parameters.
func (s Sampling) Params() speculative.Params {
	return speculative.Params{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP}
}

// SamplingOf returns the Sampling of p.
func SamplingOf(p speculative.Params) Sampling {
	return Sampling{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP}
}

// String describes s for messages.
func (s Sampling) String() string {
	if s.Temperature == 0 {
		return "greedy decoding"
	}
	out := fmt.Sprintf("temperature %g", s.Temperature)
	if s.TopK > 0 {
		out += fmt.Sprintf(", top-k %d", s.TopK)
	}
	if s.TopP > 0 && s.TopP < 1 {
		out += fmt.Sprintf(", top-p %g", s.TopP)
	}
	return out
}

// Entry is one calibration: the temperatures fitted for one sampling setting, and how well
// they did on the held-out prompts.
type Entry struct {
	Sampling     Sampling  `json:"sampling"`
	Temperatures []float64 `json:"temperatures"` // one per draft position, left to right
	// What the fit saw and achieved (informational; not needed to use the calibration).
	Rounds        int        `json:"rounds"`          // rounds of the calibration prompts
	HeldOutRounds int        `json:"held_out_rounds"` // rounds of the held-out prompts
	ECEBefore     []float64  `json:"ece_before"`      // held-out ECE per position, uncalibrated
	ECEAfter      []float64  `json:"ece_after"`       // held-out ECE per position, calibrated
	Positions     []Position `json:"positions,omitempty"`
}

// UnmarshalJSON decodes an entry strictly (unknown fields are errors) and refuses a null
// temperature, which encoding/json would otherwise read as 0.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var raw struct {
		Temperatures []*float64 `json:"temperatures"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for i, t := range raw.Temperatures {
		if t == nil {
			return fmt.Errorf("temperatures[%d] is null, want a number", i)
		}
	}
	type plain Entry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(e))
}

// File is a calibration of one draft: a JSON side file, or the dspark.calibration.* keys of a
// GGUF copy of the draft.
type File struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// DraftSHA256 is the SHA-256 of the draft file it was fitted on; CopySHA256 that of the
	// GGUF copy written with the calibration in its keys (empty if none). A side file
	// applies to a draft whose digest is either.
	DraftSHA256 string `json:"draft_sha256"`
	CopySHA256  string `json:"draft_copy_sha256,omitempty"`
	BlockSize   int    `json:"block_size"` // dflash.block_size of the draft
	Positions   int    `json:"positions"`  // draft positions per block (temperatures per entry)
	// How it was fitted (informational).
	Prompts      string  `json:"prompts,omitempty"` // where the prompts came from
	Tokens       int     `json:"tokens_per_prompt,omitempty"`
	Seed         uint64  `json:"seed,omitempty"`
	Calibrations []Entry `json:"calibrations"`

	// Source names where it was read from, for messages (not stored).
	Source string `json:"-"`
	// fromKeys: read from a GGUF's dspark.calibration.* keys, so messages name the keys.
	fromKeys bool
}

// field names field (of entry i, or of the file when i < 0) in messages: the JSON field, or
// the GGUF key it was read from.
func (f *File) field(i int, name string) string {
	switch {
	case f.fromKeys && i < 0:
		return "key " + KeyPrefix + name
	case f.fromKeys:
		return fmt.Sprintf("key %s%d.%s", KeyPrefix, i, name)
	case i < 0:
		return name
	}
	return fmt.Sprintf("calibrations[%d].%s", i, name)
}

// Validate checks f's fields: the format and version, the positions (1 .. the block), and
// every entry: a valid sampling setting seen once, exactly Positions temperatures, each
// finite and in (0, MaxTemperature].
func (f *File) Validate() error {
	where := f.Source
	if where == "" {
		where = "calibration"
	}
	switch {
	case f.Format != Format:
		return fmt.Errorf("%s: format %q, want %q (a file written by dspark calibrate)", where, f.Format, Format)
	case f.Version != Version:
		return fmt.Errorf("%s: %s %d, this dspark reads version %d", where, f.field(-1, "version"), f.Version, Version)
	case f.BlockSize < 1:
		return fmt.Errorf("%s: %s %d: must be at least 1", where, f.field(-1, "block_size"), f.BlockSize)
	case f.Positions < 1 || f.Positions > f.BlockSize:
		return fmt.Errorf("%s: %s %d: must be in [1, block_size %d]", where, f.field(-1, "positions"), f.Positions, f.BlockSize)
	case len(f.Calibrations) == 0:
		return fmt.Errorf("%s: no calibrations (%s)", where, f.field(-1, "count"))
	}
	seen := map[Sampling]bool{}
	for i, e := range f.Calibrations {
		if err := e.Sampling.Params().Validate(); err != nil {
			return fmt.Errorf("%s: %s: %v", where, f.field(i, "sampling.*"), err)
		}
		if seen[e.Sampling] {
			return fmt.Errorf("%s: %s: a second calibration for %s", where, f.field(i, "sampling.*"), e.Sampling)
		}
		seen[e.Sampling] = true
		if len(e.Temperatures) != f.Positions {
			return fmt.Errorf("%s: %s: %d temperatures, want one per draft position (%s %d)", where, f.field(i, "temperatures"), len(e.Temperatures), f.field(-1, "positions"), f.Positions)
		}
		for k, t := range e.Temperatures {
			if math.IsNaN(t) || math.IsInf(t, 0) || t <= 0 || t > MaxTemperature {
				return fmt.Errorf("%s: %s[%d] = %v: must be a finite number in (0, %g]", where, f.field(i, "temperatures"), k, t, float64(MaxTemperature))
			}
		}
	}
	return nil
}

// Parse reads a calibration side file's JSON (name names it in errors) and validates it.
// Unknown fields are refused (a file of another kind, or of a newer version).
func Parse(data []byte, name string) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// The decoder's offset is where the value began (often byte 0), not the cut.
			return nil, fmt.Errorf("%s: byte %d: the file ends in the middle of the JSON (cut short?)", name, len(data))
		}
		return nil, fmt.Errorf("%s: %s", name, jsonError(err, dec))
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: byte %d: data after the JSON object", name, dec.InputOffset())
	}
	f.Source = name
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// jsonError says where a JSON decoding error is.
func jsonError(err error, dec *json.Decoder) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		return fmt.Sprintf("byte %d: field %q: %s where %s was expected", te.Offset, te.Field, te.Value, te.Type)
	case errors.Is(err, io.EOF):
		return "empty file"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("byte %d: unexpected end of the file", dec.InputOffset())
	}
	return fmt.Sprintf("byte %d: %v", dec.InputOffset(), err)
}

// ReadFile reads and validates a calibration side file.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, "calibration "+path)
}

// Encode returns f as the indented JSON WriteFile writes, after validating it.
func Encode(f *File) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteFile writes f as indented JSON, atomically (nothing is left under path on failure).
func WriteFile(path string, f *File, overwrite bool) error {
	b, err := Encode(f)
	if err != nil {
		return err
	}
	af, err := atomicfile.Create(path, overwrite)
	if err != nil {
		return err
	}
	defer af.Abort()
	if _, err := af.Write(b); err != nil {
		return fmt.Errorf("%s: %w", path, atomicfile.Explain(err))
	}
	return af.Commit()
}

// Draft is what a calibration is checked against: the draft's file digest, its block and
// the drafts one block proposes.
type Draft struct {
	Path      string
	SHA256    string // of the file ("" when the calibration comes from the file's own keys)
	BlockSize int
	MaxDrafts int
}

// Check refuses a calibration made for another draft: a different digest (side files only),
// block size or number of positions.
func (f *File) Check(d Draft) error {
	if d.SHA256 != "" && f.DraftSHA256 != d.SHA256 && f.CopySHA256 != d.SHA256 {
		return fmt.Errorf("%s was fitted for another draft: it names SHA-256 %.16s…, but %s has SHA-256 %.16s… (run dspark calibrate for this draft)",
			f.Source, f.DraftSHA256, d.Path, d.SHA256)
	}
	if f.BlockSize != d.BlockSize {
		return fmt.Errorf("%s was fitted for a draft with block size %d, but %s has dflash.block_size %d", f.Source, f.BlockSize, d.Path, d.BlockSize)
	}
	if f.Positions != d.MaxDrafts {
		return fmt.Errorf("%s calibrates %d draft positions, but a block of %s proposes %d", f.Source, f.Positions, d.Path, d.MaxDrafts)
	}
	return nil
}

// Select returns the entry for sampling setting s: the one fitted for exactly s, else
// (exact false) the nearest one: for greedy decoding a greedy entry or the lowest
// temperature; for sampling the sampled entry of the nearest temperature (then the one with
// the same top-k and top-p), or the greedy one if there is no other.
func (f *File) Select(s Sampling) (e *Entry, exact bool) {
	best, bestD := -1, math.Inf(1)
	for i := range f.Calibrations {
		c := f.Calibrations[i].Sampling
		if c == s {
			return &f.Calibrations[i], true
		}
		d := math.Abs(c.Temperature - s.Temperature)
		if (c.Temperature == 0) != (s.Temperature == 0) {
			d += 1e6 // greedy and sampled acceptance differ in kind
		}
		if c.TopK != s.TopK || c.TopP != s.TopP {
			d += 1e-3
		}
		if d < bestD {
			best, bestD = i, d
		}
	}
	return &f.Calibrations[best], false
}

// FileSHA256 is the hex SHA-256 of the concatenated files (a split GGUF set: its shards in
// order).
func FileSHA256(paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		r, err := os.Open(p)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// KeyPrefix starts every GGUF key a calibration writes; the keys are dspark's own, no other
// program reads them.
const KeyPrefix = "dspark.calibration."

// Keys returns f as GGUF metadata: KeyPrefix + version, block_size, positions,
// source_sha256 and count, and per entry i: i.sampling.temperature, i.sampling.top_k,
// i.sampling.top_p, i.temperatures, i.rounds, i.held_out_rounds, i.ece_before, i.ece_after.
func (f *File) Keys() []gguf.KV {
	kv := func(k string, v gguf.Value) gguf.KV { return gguf.KV{Key: KeyPrefix + k, Value: v} }
	out := []gguf.KV{
		kv("version", gguf.U32(Version)),
		kv("block_size", gguf.U32(uint32(f.BlockSize))),
		kv("positions", gguf.U32(uint32(f.Positions))),
		kv("source_sha256", gguf.Str(f.DraftSHA256)),
		kv("count", gguf.U32(uint32(len(f.Calibrations)))),
	}
	for i, e := range f.Calibrations {
		p := fmt.Sprintf("%d.", i)
		out = append(out,
			kv(p+"sampling.temperature", gguf.F64(e.Sampling.Temperature)),
			kv(p+"sampling.top_k", gguf.U32(uint32(e.Sampling.TopK))),
			kv(p+"sampling.top_p", gguf.F64(e.Sampling.TopP)),
			kv(p+"temperatures", gguf.F64s(e.Temperatures)),
			kv(p+"rounds", gguf.U32(uint32(e.Rounds))),
			kv(p+"held_out_rounds", gguf.U32(uint32(e.HeldOutRounds))),
			kv(p+"ece_before", gguf.F64s(orEmpty(e.ECEBefore))),
			kv(p+"ece_after", gguf.F64s(orEmpty(e.ECEAfter))))
	}
	return out
}

func orEmpty(x []float64) []float64 {
	if x == nil {
		return []float64{}
	}
	return x
}

// FromGGUF reads the calibration stored in a draft's keys; ok is false when the file has
// none. Malformed keys are an error naming the file and the key (and, for arrays, the byte
// offset of their first element).
func FromGGUF(g *gguf.File) (f *File, ok bool, err error) {
	if _, has := g.Lookup(KeyPrefix + "version"); !has {
		for _, kv := range g.KVs {
			if strings.HasPrefix(kv.Key, KeyPrefix) {
				return nil, false, fmt.Errorf("%s: key %q without %s: not a calibration dspark wrote", g.Path, kv.Key, KeyPrefix+"version")
			}
		}
		return nil, false, nil
	}
	u32 := func(k string) int {
		if err != nil {
			return 0
		}
		var v uint32
		v, err = g.Uint32(KeyPrefix + k)
		return int(v)
	}
	f64 := func(k string) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = g.Float64(KeyPrefix + k)
		return v
	}
	f64s := func(k string) []float64 {
		if err != nil {
			return nil
		}
		var v []float64
		if v, err = g.Float64s(KeyPrefix + k); err == nil {
			v = append([]float64(nil), v...)
		}
		return v
	}
	f = &File{Format: Format, Version: u32("version"), BlockSize: u32("block_size"), Positions: u32("positions"),
		Source: "calibration keys of " + g.Path, fromKeys: true}
	if err == nil {
		f.DraftSHA256, err = g.String(KeyPrefix + "source_sha256")
	}
	n := u32("count")
	if err == nil && n > 64 {
		err = fmt.Errorf("%s: key %q is %d: at most 64 calibrations", g.Path, KeyPrefix+"count", n)
	}
	for i := 0; i < n && err == nil; i++ {
		p := fmt.Sprintf("%d.", i)
		e := Entry{Sampling: Sampling{Temperature: f64(p + "sampling.temperature"), TopK: u32(p + "sampling.top_k"), TopP: f64(p + "sampling.top_p")},
			Temperatures: f64s(p + "temperatures"), Rounds: u32(p + "rounds"), HeldOutRounds: u32(p + "held_out_rounds"),
			ECEBefore: f64s(p + "ece_before"), ECEAfter: f64s(p + "ece_after")}
		if err == nil {
			err = checkTemperatures(g, KeyPrefix+p+"temperatures", e.Temperatures)
		}
		f.Calibrations = append(f.Calibrations, e)
	}
	if err != nil {
		return nil, true, err
	}
	if err := f.Validate(); err != nil {
		return nil, true, err
	}
	return f, true, nil
}

// checkTemperatures refuses a stored temperature that is not finite and in (0,
// MaxTemperature], naming the key and the element's byte offset.
func checkTemperatures(g *gguf.File, key string, temps []float64) error {
	v, _ := g.Lookup(key)
	for k, t := range temps {
		if math.IsNaN(t) || math.IsInf(t, 0) || t <= 0 || t > MaxTemperature {
			return fmt.Errorf("%s: key %q element %d (byte %d) = %v: a temperature must be a finite number in (0, %g]",
				g.Path, key, k, v.Offset()+8*int64(k), t, float64(MaxTemperature))
		}
	}
	return nil
}

// WriteGGUF writes a copy of the draft src to dst with f in its keys: every key of src in
// order (any dspark.calibration.* key of src replaced), then f.Keys(), and every tensor
// copied byte for byte, at src's alignment. The write is atomic.
func WriteGGUF(src *gguf.File, dst string, f *File, overwrite bool) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if src.BigEndian {
		return fmt.Errorf("%s is a big-endian GGUF: dspark writes little-endian files only, so its tensors cannot be copied byte for byte", src.Path)
	}
	var kvs []gguf.KV
	for _, kv := range src.KVs {
		if !strings.HasPrefix(kv.Key, KeyPrefix) {
			kvs = append(kvs, kv)
		}
	}
	kvs = append(kvs, f.Keys()...)
	tensors := make([]gguf.TensorSpec, len(src.Tensors))
	for i := range src.Tensors {
		t := &src.Tensors[i]
		tensors[i] = gguf.TensorSpec{Name: t.Name, Type: t.Type, Dims: t.Dims, Data: func(w io.Writer) error {
			r, err := src.TensorReader(t)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, r)
			return err
		}}
	}
	return gguf.WriteFile(dst, kvs, tensors, gguf.WriteOptions{Overwrite: overwrite, Alignment: src.Alignment})
}
