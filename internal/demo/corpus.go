package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Corpus is English prose taken from the documentation comments of a Go distribution: the
// package comments and the doc comments of exported declarations of the standard library,
// one document per package directory (the unit the target's lexicon is counted over). The
// Go distribution is under a BSD-style licence (GOROOT/LICENSE); the text is read from the
// user's own installation at build time and never stored in this repository.
type Corpus struct {
	Docs      []string // one per package directory, in path order
	GoVersion string   // first line of GOROOT/VERSION
	Digest    string   // sha256 of the documents (hex), part of the demo pair's cache key
}

// Bytes returns the total size of the documents.
func (c *Corpus) Bytes() int {
	n := 0
	for _, d := range c.Docs {
		n += len(d)
	}
	return n
}

// skipDirs are GOROOT/src directories whose comments are not prose a reader would want a
// demo to echo: generated instruction tables (simd), system call numbers, internal
// packages, vendored code, test data and the toolchain (cmd).
var skipDirs = map[string]bool{"testdata": true, "vendor": true, "internal": true, "simd": true, "syscall": true}

// GoRoot returns the root of the Go installation: $GOROOT if set, else `go env GOROOT`.
func GoRoot() (string, error) {
	if r := os.Getenv("GOROOT"); r != "" {
		return r, nil
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("the demo's English corpus is read from the Go distribution, and `go env GOROOT` failed (%v): install Go or set GOROOT, or use the quick demo", err)
	}
	r := strings.TrimSpace(string(out))
	if r == "" {
		return "", errors.New("`go env GOROOT` printed nothing: set GOROOT, or use the quick demo")
	}
	return r, nil
}

var corpusMemo struct {
	sync.Mutex
	root string
	c    *Corpus
}

// GoCorpus reads the English corpus of the Go distribution at goroot. Only paragraphs of
// doc comments are kept (code blocks, headings and lists are dropped), doc-link brackets
// are removed, and a paragraph is kept only if at least 93 % of its bytes are ASCII letters,
// spaces, commas or periods (which drops tables, formulas and identifier lists).
//
// The result is memoized for the last goroot (callers must not modify it).
func GoCorpus(goroot string) (*Corpus, error) {
	corpusMemo.Lock()
	defer corpusMemo.Unlock()
	if corpusMemo.c != nil && corpusMemo.root == goroot {
		return corpusMemo.c, nil
	}
	c, err := readGoCorpus(goroot)
	if err == nil {
		corpusMemo.root, corpusMemo.c = goroot, c
	}
	return c, err
}

func readGoCorpus(goroot string) (*Corpus, error) {
	src := filepath.Join(goroot, "src")
	ver, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("Go distribution at %s: %w", goroot, err)
	}
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || p == filepath.Join(src, "cmd") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the Go sources at %s: %w", src, err)
	}
	slices.Sort(files)
	c := &Corpus{GoVersion: strings.TrimSpace(strings.SplitN(string(ver), "\n", 2)[0])}
	var doc strings.Builder
	dir := ""
	flush := func() {
		if doc.Len() > 0 {
			c.Docs = append(c.Docs, doc.String())
		}
		doc.Reset()
	}
	var p comment.Parser
	for _, f := range files {
		if d := filepath.Dir(f); d != dir {
			flush()
			dir = d
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			continue // a file of the distribution that does not parse (build-tagged oddities) adds nothing
		}
		for _, g := range docComments(af) {
			for _, blk := range p.Parse(g.Text()).Content {
				para, ok := blk.(*comment.Paragraph)
				if !ok {
					continue
				}
				if s := plainText(para.Text); len(s) > 20 && prose(s) {
					doc.WriteString(s)
					doc.WriteByte('\n')
				}
			}
		}
	}
	flush()
	if len(c.Docs) == 0 {
		return nil, fmt.Errorf("no documentation comments found under %s", src)
	}
	h := sha256.New()
	for _, d := range c.Docs {
		fmt.Fprintf(h, "%d\n%s", len(d), d)
	}
	c.Digest = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// docComments returns the package comment and the doc comments of exported declarations.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	if f.Doc != nil {
		out = append(out, f.Doc)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil && d.Name.IsExported() {
				out = append(out, d.Doc)
			}
		case *ast.GenDecl:
			if d.Doc != nil && exportsName(d) {
				out = append(out, d.Doc)
			}
		}
	}
	return out
}

func exportsName(d *ast.GenDecl) bool {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				return true
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					return true
				}
			}
		}
	}
	return false
}

var unbracket = strings.NewReplacer("[", "", "]", "")

// plainText flattens a paragraph's text to one line with single spaces.
func plainText(ts []comment.Text) string {
	var b strings.Builder
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				b.WriteString(string(t))
			case comment.Italic:
				b.WriteString(string(t))
			case *comment.Link:
				walk(t.Text)
			case *comment.DocLink:
				walk(t.Text)
			}
		}
	}
	walk(ts)
	return strings.Join(strings.Fields(unbracket.Replace(b.String())), " ")
}

// prose reports whether s reads as English prose rather than code, tables or generated text.
func prose(s string) bool {
	if strings.HasPrefix(s, "Deprecated:") {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == ',' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			n++
		}
	}
	return float64(n) >= 0.93*float64(len(s))
}
