package convert

import (
	"fmt"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
)

// keyValues collects the planned metadata of one file by declared key. The declaration
// gives every key its exact GGUF type (a value that does not fit it is an error) and the
// order the keys are written in; the converter only supplies values.
type keyValues struct {
	s    *schema.Schema
	vals map[string]any
	errs []string
}

func newKeyValues(s *schema.Schema) *keyValues {
	return &keyValues{s: s, vals: map[string]any{}}
}

// set plans key name (a schema constant) with value x: int64 for integer keys, float64 for
// f32 keys, bool, string, []int64 for integer arrays, []string.
func (k *keyValues) set(name string, x any) {
	if _, ok := k.s.Key(name); !ok {
		k.errs = append(k.errs, fmt.Sprintf("internal: key %s is not declared by %s", name, k.s.Name))
		return
	}
	if _, dup := k.vals[name]; dup {
		k.errs = append(k.errs, fmt.Sprintf("internal: metadata key %s planned twice", k.s.FullName(name)))
		return
	}
	k.vals[name] = x
}

// kvs returns the planned keys with their declared types, in declaration order.
func (k *keyValues) kvs() ([]gguf.KV, error) {
	errs := k.errs
	var out []gguf.KV
	for _, key := range k.s.AllKeys() {
		x, ok := k.vals[key.Name]
		if !ok {
			continue
		}
		kv, err := k.s.Encode(key.Name, x)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, kv)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}
