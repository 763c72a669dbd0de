package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dspark-dev/dspark/gguf"
)

// Expressions are the small language of the declarations: integer arithmetic over key values,
// comparisons, boolean logic and a few functions of the file.
//
//	expr    = or
//	or      = and {"||" and}
//	and     = cmp {"&&" cmp}
//	cmp     = sum [("==" | "!=" | "<" | "<=" | ">" | ">=") sum]
//	sum     = prod {("+" | "-") prod}
//	prod    = unary {("*" | "/" | "%") unary}
//	unary   = ["!"] primary
//	primary = INT | STRING | "true" | "false" | NAME | FUNC "(" NAME ["," INT] ")" | "(" expr ")"
//
// NAME is a key (its short name for an architecture key, its full name for general.* and
// tokenizer.*), a derived value, or layer (the index of the block being checked; unknown
// outside blocks). Functions: has(key) (the key is in the file), len(key) (an array key's
// length), elem(key) (the block's entry of an integer or boolean array key, as an integer),
// dim(tensor, i) (dimension i of a tensor, ggml order), present(tensor) and any(tensor) (a
// tensor, or any layer's instance of a per-layer template, is in the file).
// Tensor names may hold "{i}", the layer of the tensor being checked.
//
// Values are unknown when what they depend on is missing or unusable; arithmetic and
// comparisons with an unknown operand are unknown, "false && x" is false and "true || x"
// true. Dimensions are never negative: a negative difference is unknown, as is a division
// by zero.

// kind is the type of an expression value.
type kind int

const (
	kInt kind = iota
	kBool
	kStr
	kAny // parseExpr: accept any kind
)

func (k kind) String() string { return [...]string{"integer", "boolean", "string", "any"}[k] }

// val is an evaluated expression.
type val struct {
	k     kind
	i     int64 // kInt, and kBool (0 or 1)
	s     string
	known bool
}

func intVal(i int64) val    { return val{k: kInt, i: i, known: true} }
func boolVal(b bool) val    { v := val{k: kBool, known: true}; v.setBool(b); return v }
func strVal(s string) val   { return val{k: kStr, s: s, known: true} }
func unknownVal(k kind) val { return val{k: k} }
func (v *val) setBool(b bool) {
	v.i = 0
	if b {
		v.i = 1
	}
}
func (v val) truth() bool { return v.known && v.i != 0 }

// String renders a known value ("?" when unknown).
func (v val) String() string {
	switch {
	case !v.known:
		return "?"
	case v.k == kStr:
		return strconv.Quote(v.s)
	case v.k == kBool:
		return strconv.FormatBool(v.i != 0)
	}
	return strconv.FormatInt(v.i, 10)
}

// node is a parsed expression.
type node interface {
	eval(e *env) val
	kind() kind
	text() string // source text, for messages
}

// env is what an expression is evaluated against.
type env struct {
	v     *Values
	layer int // the layer of {i} (-1 outside per-layer tensors)
}

type (
	litNode  struct{ v val }
	nameNode struct {
		name string
		k    kind
		ref  *ref
	}
	notNode struct{ x node }
	binNode struct {
		op   string
		l, r node
	}
	funcNode struct {
		fn   string
		arg  string // key or tensor name
		idx  int    // dim index
		k    kind
		ref  *ref // the key of has/len
		name string
	}
)

// layerNode is the name layer: the block being checked.
type layerNode struct{}

func (layerNode) eval(e *env) val {
	if e.layer < 0 {
		return unknownVal(kInt)
	}
	return intVal(int64(e.layer))
}
func (layerNode) kind() kind   { return kInt }
func (layerNode) text() string { return "layer" }

func (n litNode) eval(*env) val { return n.v }
func (n litNode) kind() kind    { return n.v.k }
func (n litNode) text() string  { return n.v.String() }

func (n nameNode) eval(e *env) val { return e.v.lookup(n.ref) }
func (n nameNode) kind() kind      { return n.k }
func (n nameNode) text() string    { return n.name }

func (n notNode) eval(e *env) val {
	x := n.x.eval(e)
	if !x.known {
		return unknownVal(kBool)
	}
	return boolVal(x.i == 0)
}
func (n notNode) kind() kind   { return kBool }
func (n notNode) text() string { return "!" + n.x.text() }

func (n binNode) kind() kind {
	switch n.op {
	case "+", "-", "*", "/", "%":
		return kInt
	}
	return kBool
}

func (n binNode) text() string { return n.l.text() + " " + n.op + " " + n.r.text() }

func (n binNode) eval(e *env) val {
	switch n.op {
	case "&&", "||":
		l := n.l.eval(e)
		if l.known && (l.i != 0) == (n.op == "||") {
			return boolVal(n.op == "||")
		}
		r := n.r.eval(e)
		if r.known && (r.i != 0) == (n.op == "||") {
			return boolVal(n.op == "||")
		}
		if !l.known || !r.known {
			return unknownVal(kBool)
		}
		return boolVal(n.op == "&&")
	}
	l, r := n.l.eval(e), n.r.eval(e)
	if !l.known || !r.known {
		return unknownVal(n.kind())
	}
	switch n.op {
	case "==":
		return boolVal(l.i == r.i && l.s == r.s)
	case "!=":
		return boolVal(l.i != r.i || l.s != r.s)
	case "<":
		return boolVal(l.i < r.i)
	case "<=":
		return boolVal(l.i <= r.i)
	case ">":
		return boolVal(l.i > r.i)
	case ">=":
		return boolVal(l.i >= r.i)
	case "+":
		return intVal(l.i + r.i)
	case "-":
		if l.i < r.i {
			return unknownVal(kInt)
		}
		return intVal(l.i - r.i)
	case "*":
		return intVal(l.i * r.i)
	case "/", "%":
		if r.i == 0 {
			return unknownVal(kInt)
		}
		if n.op == "/" {
			return intVal(l.i / r.i)
		}
		return intVal(l.i % r.i)
	}
	panic("schema: unknown operator " + n.op)
}

func (n funcNode) kind() kind { return n.k }

func (n funcNode) text() string {
	if n.fn == "dim" {
		return fmt.Sprintf("dim(%s, %d)", n.arg, n.idx)
	}
	return n.fn + "(" + n.arg + ")"
}

func (n funcNode) eval(e *env) val {
	switch n.fn {
	case "has":
		_, ok := e.v.raw(n.ref)
		return boolVal(ok)
	case "len":
		return e.v.length(n.ref)
	case "elem":
		return e.v.elem(n.ref, e.layer)
	case "dim":
		dims, ok := e.v.src.TensorDims(layerName(n.arg, e.layer))
		if !ok || n.idx >= len(dims) {
			return unknownVal(kInt)
		}
		return intVal(int64(dims[n.idx]))
	case "present":
		_, ok := e.v.src.TensorDims(layerName(n.arg, e.layer))
		return boolVal(ok)
	case "any":
		return boolVal(e.v.anyLayer(n.arg))
	}
	panic("schema: unknown function " + n.fn)
}

// layerName substitutes the layer into a tensor name template.
func layerName(template string, layer int) string {
	if layer < 0 || !strings.Contains(template, "{i}") {
		return template
	}
	return strings.ReplaceAll(template, "{i}", strconv.Itoa(layer))
}

// parser turns expression text into nodes, resolving names against a schema.
type parser struct {
	src  string
	toks []token
	pos  int
	s    *Schema
	err  error
}

type token struct {
	t   string // "int", "str", "name", "op", "eof"
	s   string
	num int64
}

func tokenize(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && src[j] >= '0' && src[j] <= '9' {
				j++
			}
			n, err := strconv.ParseInt(src[i:j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad number %q", src[i:j])
			}
			out = append(out, token{t: "int", num: n, s: src[i:j]})
			i = j
		case c == '"':
			j := strings.IndexByte(src[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated string")
			}
			out = append(out, token{t: "str", s: src[i+1 : i+1+j]})
			i += j + 2
		case isNameStart(c):
			j := i
			for j < len(src) && isNameChar(src[j]) {
				j++
			}
			out = append(out, token{t: "name", s: src[i:j]})
			i = j
		default:
			op := string(c)
			if i+1 < len(src) {
				two := src[i : i+2]
				switch two {
				case "==", "!=", "<=", ">=", "&&", "||":
					op = two
				}
			}
			if len(op) == 1 && !strings.Contains("+-*/%()<>!,", op) {
				return nil, fmt.Errorf("unexpected character %q", c)
			}
			out = append(out, token{t: "op", s: op})
			i += len(op)
		}
	}
	return append(out, token{t: "eof"}), nil
}

func isNameStart(c byte) bool {
	return c == '_' || c == '{' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameChar(c byte) bool { return isNameStart(c) || c == '.' || c == '}' || c >= '0' && c <= '9' }

// parseExpr parses src against s. want is the kind the context needs.
func (s *Schema) parseExpr(src string, want kind) (node, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, err)
	}
	p := &parser{src: src, toks: toks, s: s}
	n := p.or()
	if p.err == nil && p.peek().t != "eof" {
		p.fail("unexpected %q", p.peek().s)
	}
	if p.err == nil && want != kAny && n.kind() != want {
		p.fail("is %s, want %s", n.kind(), want)
	}
	if p.err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, p.err)
	}
	return n, nil
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.t != "eof" {
		p.pos++
	}
	return t
}

func (p *parser) accept(op string) bool {
	if t := p.peek(); t.t == "op" && t.s == op {
		p.pos++
		return true
	}
	return false
}

func (p *parser) bin(op string, l, r node, operand kind) node {
	if l.kind() != operand || r.kind() != operand {
		p.fail("%s needs %s operands: %s %s %s", op, operand, l.text(), op, r.text())
	}
	return binNode{op: op, l: l, r: r}
}

func (p *parser) or() node {
	n := p.and()
	for p.err == nil && p.accept("||") {
		n = p.bin("||", n, p.and(), kBool)
	}
	return n
}

func (p *parser) and() node {
	n := p.cmp()
	for p.err == nil && p.accept("&&") {
		n = p.bin("&&", n, p.cmp(), kBool)
	}
	return n
}

func (p *parser) cmp() node {
	n := p.sum()
	for _, op := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if p.err == nil && p.accept(op) {
			r := p.sum()
			if op == "==" || op == "!=" {
				if n.kind() != r.kind() {
					p.fail("%s compares a %s with a %s", op, n.kind(), r.kind())
				}
				return binNode{op: op, l: n, r: r}
			}
			return p.bin(op, n, r, kInt)
		}
	}
	return n
}

func (p *parser) sum() node {
	n := p.prod()
	for p.err == nil {
		switch {
		case p.accept("+"):
			n = p.bin("+", n, p.prod(), kInt)
		case p.accept("-"):
			n = p.bin("-", n, p.prod(), kInt)
		default:
			return n
		}
	}
	return n
}

func (p *parser) prod() node {
	n := p.unary()
	for p.err == nil {
		switch {
		case p.accept("*"):
			n = p.bin("*", n, p.unary(), kInt)
		case p.accept("/"):
			n = p.bin("/", n, p.unary(), kInt)
		case p.accept("%"):
			n = p.bin("%", n, p.unary(), kInt)
		default:
			return n
		}
	}
	return n
}

func (p *parser) unary() node {
	if p.accept("!") {
		x := p.unary()
		if x.kind() != kBool {
			p.fail("! needs a boolean: %s", x.text())
		}
		return notNode{x}
	}
	return p.primary()
}

func (p *parser) primary() node {
	t := p.next()
	switch t.t {
	case "int":
		return litNode{intVal(t.num)}
	case "str":
		return litNode{strVal(t.s)}
	case "op":
		if t.s == "(" {
			n := p.or()
			if !p.accept(")") {
				p.fail("missing )")
			}
			return n
		}
	case "name":
		switch t.s {
		case "true", "false":
			return litNode{boolVal(t.s == "true")}
		case "has", "len", "elem", "dim", "present", "any":
			if p.accept("(") {
				return p.call(t.s)
			}
		case "layer":
			return layerNode{}
		}
		r := p.s.refOf(t.s)
		if r == nil {
			p.fail("unknown name %q", t.s)
			return litNode{unknownVal(kInt)}
		}
		k, ok := r.kind()
		if !ok {
			p.fail("%s is not an integer, boolean or string key (use len() or has())", t.s)
		}
		return nameNode{name: t.s, k: k, ref: r}
	}
	p.fail("unexpected %q", t.s)
	return litNode{unknownVal(kInt)}
}

func (p *parser) call(fn string) node {
	a := p.next()
	if a.t != "name" {
		p.fail("%s needs a name", fn)
		return litNode{unknownVal(kInt)}
	}
	n := funcNode{fn: fn, arg: a.s, k: kBool}
	switch fn {
	case "has", "len", "elem":
		n.ref = p.s.refOf(a.s)
		if n.ref == nil || n.ref.key == nil {
			p.fail("%s(%s): not a key", fn, a.s)
		} else if fn != "has" {
			n.k = kInt
			if n.ref.key.Type != gguf.ValueArray {
				p.fail("%s(%s): not an array key", fn, a.s)
			}
		}
	case "dim":
		n.k = kInt
		if !p.accept(",") {
			p.fail("dim needs a dimension index")
		}
		i := p.next()
		if i.t != "int" {
			p.fail("dim needs a dimension index")
		}
		n.idx = int(i.num)
		p.s.noteTensorRef(a.s, &p.err)
	case "present", "any":
		p.s.noteTensorRef(a.s, &p.err)
	}
	if !p.accept(")") {
		p.fail("missing )")
	}
	return n
}

// depsOf adds the keys an expression reads (through derived values too) to out.
func depsOf(n node, out map[string]bool) {
	switch x := n.(type) {
	case nameNode:
		if x.ref.key != nil {
			out[x.ref.key.Name] = true
		} else {
			depsOf(x.ref.der.n, out)
		}
	case funcNode:
		if x.ref != nil && x.ref.key != nil {
			out[x.ref.key.Name] = true
		}
	case binNode:
		depsOf(x.l, out)
		depsOf(x.r, out)
	case notNode:
		depsOf(x.x, out)
	}
}
