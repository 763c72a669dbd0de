package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf/schema"
)

// Config is a parsed Hugging Face config.json. Values are kept as decoded JSON (numbers as
// json.Number, so integers stay exact); the typed getters below read them.
type Config struct {
	Path string
	raw  map[string]any
}

// LoadConfig reads and parses dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config.json bytes; path is used in error messages only.
func ParseConfig(path string, b []byte) (*Config, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, offsetErr(err))
	}
	if raw == nil {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return &Config{Path: path, raw: raw}, nil
}

// offsetErr adds the byte offset to a JSON syntax error.
func offsetErr(err error) error {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Errorf("byte offset %d: %w", se.Offset, err)
	}
	return err
}

// lookup returns the value at a dotted path ("dflash_config.block_size"); JSON null counts as
// absent.
func (c *Config) lookup(path string) (any, bool) {
	var cur any = c.raw
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[part]
		if !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}

// first returns the first present path among alternatives.
func (c *Config) first(paths []string) (any, string, bool) {
	for _, p := range paths {
		if v, ok := c.lookup(p); ok {
			return v, p, true
		}
	}
	return nil, "", false
}

// Has reports whether any of the dotted paths is present (and not null).
func (c *Config) Has(paths ...string) bool {
	_, _, ok := c.first(paths)
	return ok
}

// cfgReader reads typed fields and accumulates every problem, so that one error can list
// all missing or mistyped fields at once.
type cfgReader struct {
	c    *Config
	errs []string
}

// checkBlockSize bounds the config's block_size by the range the declaration s gives
// dflash.block_size, naming the config field (not the GGUF key it becomes).
func checkBlockSize(r *cfgReader, s *schema.Schema, n int64) {
	if len(r.errs) > 0 {
		return
	}
	for _, k := range s.Keys {
		if k.Name != schema.BlockSize {
			continue
		}
		hi, err := strconv.ParseInt(k.Max, 10, 64)
		if err != nil {
			hi = math.MaxInt64
		}
		if n < 1 || n > hi {
			r.fail("block_size %d is outside 1..%d (%s)", n, hi, k.Why)
		}
		return
	}
	if n < 1 {
		r.fail("block_size must be >= 1, got %d", n)
	}
}

func (r *cfgReader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func names(paths []string) string {
	return strings.Join(paths, " or ")
}

// err returns all accumulated problems as one error, or nil.
func (r *cfgReader) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d problem(s):\n  - %s", r.c.Path, len(r.errs), strings.Join(r.errs, "\n  - "))
}

func toInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Int reads a required integer from the first present path.
func (r *cfgReader) Int(paths ...string) int64 {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing integer field %s", names(paths))
		return 0
	}
	i, ok := toInt(v)
	if !ok {
		r.fail("field %s: want an integer, got %s", p, describe(v))
	}
	return i
}

// Positive reads a required integer that must be >= 1.
func (r *cfgReader) Positive(paths ...string) int64 {
	n := len(r.errs)
	i := r.Int(paths...)
	if len(r.errs) == n && i < 1 {
		_, p, _ := r.c.first(paths)
		r.fail("field %s: must be >= 1, got %d", p, i)
	}
	return i
}

// Bounded reads a required integer in 1..limit: counts that size allocations or loops
// (layers, experts, vocabulary) are capped so a corrupt config cannot exhaust memory.
func (r *cfgReader) Bounded(limit int64, paths ...string) int64 {
	n := len(r.errs)
	i := r.Positive(paths...)
	if len(r.errs) == n && i > limit {
		_, p, _ := r.c.first(paths)
		r.fail("field %s: %d is implausibly large (at most %d supported)", p, i, limit)
		return 1
	}
	return i
}

// OptInt reads an optional integer; def when absent.
func (r *cfgReader) OptInt(def int64, paths ...string) (int64, bool) {
	if _, _, ok := r.c.first(paths); !ok {
		return def, false
	}
	return r.Int(paths...), true
}

// Float reads a required number.
func (r *cfgReader) Float(paths ...string) float64 {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing number field %s", names(paths))
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		r.fail("field %s: want a number, got %s", p, describe(v))
		return 0
	}
	f, err := n.Float64()
	if err != nil {
		r.fail("field %s: %v", p, err)
	}
	return f
}

// OptFloat reads an optional number; def when absent.
func (r *cfgReader) OptFloat(def float64, paths ...string) (float64, bool) {
	if _, _, ok := r.c.first(paths); !ok {
		return def, false
	}
	return r.Float(paths...), true
}

// Str reads a required string.
func (r *cfgReader) Str(paths ...string) string {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing string field %s", names(paths))
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail("field %s: want a string, got %s", p, describe(v))
	}
	return s
}

// OptStr reads an optional string; def when absent.
func (r *cfgReader) OptStr(def string, paths ...string) string {
	if _, _, ok := r.c.first(paths); !ok {
		return def
	}
	return r.Str(paths...)
}

// Bool reads a required boolean.
func (r *cfgReader) Bool(paths ...string) bool {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing boolean field %s", names(paths))
		return false
	}
	b, ok := v.(bool)
	if !ok {
		r.fail("field %s: want true or false, got %s", p, describe(v))
	}
	return b
}

// OptBool reads an optional boolean; def when absent.
func (r *cfgReader) OptBool(def bool, paths ...string) bool {
	if _, _, ok := r.c.first(paths); !ok {
		return def
	}
	return r.Bool(paths...)
}

// Ints reads a required list of integers.
func (r *cfgReader) Ints(paths ...string) []int64 {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing integer list %s", names(paths))
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.fail("field %s: want a list of integers, got %s", p, describe(v))
		return nil
	}
	out := make([]int64, len(list))
	for i, e := range list {
		n, ok := toInt(e)
		if !ok {
			r.fail("field %s[%d]: want an integer, got %s", p, i, describe(e))
			return nil
		}
		out[i] = n
	}
	return out
}

// Strs reads a required list of strings.
func (r *cfgReader) Strs(paths ...string) []string {
	v, p, ok := r.c.first(paths)
	if !ok {
		r.fail("missing string list %s", names(paths))
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.fail("field %s: want a list of strings, got %s", p, describe(v))
		return nil
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			r.fail("field %s[%d]: want a string, got %s", p, i, describe(e))
			return nil
		}
		out[i] = s
	}
	return out
}

func describe(v any) string {
	switch x := v.(type) {
	case json.Number:
		return "the number " + x.String()
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "an object {" + strings.Join(keys, ", ") + "}"
	}
	return fmt.Sprintf("%T", v)
}

// Architecture returns architectures[0] (and model_type, which may be empty).
func (c *Config) Architecture() (arch, modelType string, err error) {
	r := &cfgReader{c: c}
	list := r.Strs("architectures")
	modelType = r.OptStr("", "model_type")
	if err := r.err(); err != nil {
		return "", "", err
	}
	if len(list) == 0 {
		return "", modelType, fmt.Errorf("%s: architectures is empty", c.Path)
	}
	return list[0], modelType, nil
}
