package safetensors

import "strconv"

// MaxHeaderLen is the largest header (JSON) length accepted, as in the reference
// implementation: a larger length field is treated as corruption, not as a reason to
// allocate.
const MaxHeaderLen = 100_000_000

// where names the item an error is about, e.g. `tensor "w" shape`. The text is built only
// when an error is reported: the happy path must not pay for quoting every name.
type where struct {
	kind  string // "header", "tensor", "__metadata__", "weight_map", ...
	name  string // quoted after kind when named
	sub   string // appended last, e.g. "dtype"
	named bool
}

func plain(kind string) where { return where{kind: kind} }

func tensorField(name, sub string) where {
	return where{kind: "tensor", name: name, sub: sub, named: true}
}

func (w where) String() string {
	s := w.kind
	if w.named {
		s += " " + strconv.Quote(w.name)
	}
	if w.sub != "" {
		s += " " + w.sub
	}
	return s
}
