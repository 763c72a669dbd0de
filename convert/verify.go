package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/dspark-dev/dspark/gguf"
)

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Path     string
	Tensors  int      // tensors whose bytes matched the re-derived source bytes
	Keys     int      // keys that matched the plan
	Lint     int      // lint problems (when a lint function was given)
	LintRun  bool     // a lint function was given
	Problems []string // every mismatch
}

// OK reports whether nothing mismatched.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Verdict is the one-line summary.
func (r *VerifyReport) Verdict() string {
	if r.OK() {
		lint := "lint clean"
		if !r.LintRun {
			lint = "lint not run"
		}
		return fmt.Sprintf("verify: OK: %s: %d tensors match their sources (sha256 of bytes re-derived from the checkpoint), %d keys match the plan, %s", r.Path, r.Tensors, r.Keys, lint)
	}
	const show = 5
	list := strings.Join(r.Problems[:min(show, len(r.Problems))], "; ")
	if len(r.Problems) > show {
		list += fmt.Sprintf("; and %d more", len(r.Problems)-show)
	}
	return fmt.Sprintf("verify: FAILED: %s: %d problem(s): %s", r.Path, len(r.Problems), list)
}

// LintFunc checks an opened GGUF file and returns one line per problem.
type LintFunc func(f *gguf.File) []string

// Verify re-opens a written file (the first shard of a split set) and checks every key
// against the plan (type and value), every tensor's name, type and dims, and every tensor's
// bytes against bytes re-derived from the source (sha256 of both), then runs lint if given.
func (p *Plan) Verify(path string, lint LintFunc) (*VerifyReport, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &VerifyReport{Path: path}
	planned := map[string]bool{}
	for _, m := range p.Meta {
		planned[m.Key] = true
		v, ok := f.Lookup(m.Key)
		switch {
		case !ok:
			rep.Problems = append(rep.Problems, "key "+m.Key+" missing")
		case !gguf.Equal(v, m.Value):
			rep.Problems = append(rep.Problems, fmt.Sprintf("key %s is %s %s, planned %s %s", m.Key, v.TypeName(), v, m.Value.TypeName(), m.Value))
		default:
			rep.Keys++
		}
	}
	for _, kv := range f.KVs {
		if !planned[kv.Key] && !strings.HasPrefix(kv.Key, "split.") && kv.Key != "general.alignment" {
			rep.Problems = append(rep.Problems, "unplanned key "+kv.Key)
		}
	}
	if len(f.Tensors) != len(p.Tensors) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d tensors in the file, %d planned", len(f.Tensors), len(p.Tensors)))
	}
	type check struct {
		pt *PlanTensor
		ft *gguf.TensorInfo
	}
	var checks []check
	for i := range p.Tensors {
		pt := &p.Tensors[i]
		ft, ok := f.Tensor(pt.Name)
		switch {
		case !ok:
			rep.Problems = append(rep.Problems, "tensor "+pt.Name+" missing")
		case ft.Type != pt.Type || !slices.Equal(ft.Dims, pt.Dims):
			rep.Problems = append(rep.Problems, fmt.Sprintf("tensor %s is %s %s, planned %s %s", pt.Name, ft.Type, dimsStr(ft.Dims), pt.Type, dimsStr(pt.Dims)))
		default:
			checks = append(checks, check{pt, ft})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan check)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf chunkBuf
			rbuf := make([]byte, 4<<20)
			for c := range next {
				want := p.tensorHash(c.pt, &buf)
				var got string
				r, err := f.TensorReader(c.ft)
				if err == nil {
					got, err = readerHash(r, rbuf)
				}
				mu.Lock()
				switch {
				case err != nil:
					rep.Problems = append(rep.Problems, fmt.Sprintf("tensor %s: %v", c.pt.Name, err))
				case got != want:
					rep.Problems = append(rep.Problems, fmt.Sprintf("tensor %s: sha256 %s in the file, %s re-derived from %s", c.pt.Name, got[:16], want[:16], strings.Join(c.pt.Sources, ",")))
				default:
					rep.Tensors++
				}
				mu.Unlock()
			}
		}()
	}
	for _, c := range checks {
		next <- c
	}
	close(next)
	wg.Wait()
	if lint != nil {
		rep.LintRun = true
		probs := lint(f)
		rep.Lint = len(probs)
		for _, pr := range probs {
			rep.Problems = append(rep.Problems, "lint: "+pr)
		}
	}
	slices.Sort(rep.Problems)
	return rep, nil
}

// tensorHash re-derives a tensor's bytes from the source, chunk by chunk, and hashes them.
func (p *Plan) tensorHash(t *PlanTensor, buf *chunkBuf) string {
	h := sha256.New()
	n := t.Elements()
	for start := int64(0); start < n; start += chunkElems {
		k := min(chunkElems, n-start)
		h.Write(buf.chunk(t, start, k))
		t.prod.releaseChunk(start, k)
	}
	t.prod.releaseAll()
	return hex.EncodeToString(h.Sum(nil))
}

// TensorSHA256 returns the sha256 (hex) of the bytes the plan writes for tensor i.
func (p *Plan) TensorSHA256(i int) string {
	var buf chunkBuf
	return p.tensorHash(&p.Tensors[i], &buf)
}

func readerHash(r *io.SectionReader, buf []byte) (string, error) {
	if r == nil {
		return "", fmt.Errorf("no tensor data")
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.LimitReader(r, r.Size()), buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
