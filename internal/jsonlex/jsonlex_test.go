package jsonlex

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// lexValid runs the tokenizer over one whole JSON value.
func lexValid(b []byte) error {
	j := NewReader(b)
	if err := j.Skip(); err != nil {
		return err
	}
	return j.End()
}

// agreesWithStdlib reports whether the tokenizer and encoding/json agree on b's validity.
// The one deliberate difference: lone surrogate escapes, which encoding/json accepts and
// silently replaces, are rejected here.
func agreesWithStdlib(b []byte) (bool, error) {
	err := lexValid(b)
	valid := json.Valid(b)
	if err != nil && valid && strings.Contains(err.Error(), "surrogate") {
		return true, err
	}
	return (err == nil) == valid, err
}

func TestJSONTokenizerAgreesWithStdlib(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, ` { } `, "\t[\n1 ,\r2]\n", `{"a":1}`, `{"a":[1,2,{"b":null}],"c":true,"d":false}`,
		`"x"`, `0`, `-0`, `1.5`, `-1.5e+10`, `1E-3`, `0.0e0`, `123456789012345678901234567890`,
		`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `"é漢字"`, `[[[[[]]]]]`, `{"":""}`,
		// invalid
		``, ` `, `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`, `[1 2]`,
		`01`, `1.`, `.5`, `+1`, `-`, `1e`, `1e+`, `--1`, `0x10`, `'a'`, `{'a':1}`, `{a:1}`,
		`"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\x01\"", `"abc`, `tru`, `nul`, `falsey`,
		`truex`, `[true false]`, `{"a":}`, `{"a"}`, `{1:2}`, `[1]]`, `{}}`, `{} {}`, `[1] 2`,
		`NaN`, `Infinity`, `[-]`, `"\uD800"`, `"\uDC00"`, `"\uD800\u0041"`, `"\uD800x"`,
	} {
		ok, err := agreesWithStdlib([]byte(s))
		if !ok {
			t.Errorf("%q: tokenizer says %v, encoding/json valid=%v", s, err, json.Valid([]byte(s)))
		}
	}
}

// FuzzJSON checks the tokenizer against encoding/json on arbitrary UTF-8 input.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e3,{"b":null}],"c":"\u00e9\n"}`, `[1,]`, `"\uD83D\uDE00"`, `01`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return // callers reject invalid UTF-8 before tokenizing
		}
		if ok, err := agreesWithStdlib(b); !ok {
			t.Fatalf("%q: tokenizer says %v, encoding/json valid=%v", b, err, json.Valid(b))
		}
	})
}
