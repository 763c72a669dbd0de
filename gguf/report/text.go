package report

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/dspark-dev/dspark/gguf/drafts"
	"github.com/dspark-dev/dspark/gguf/memory"
)

// TextOptions control the table rendering.
type TextOptions struct {
	StringRunes int  // strings are cut to this many runes (default 60; <0: whole)
	FullArrays  bool // show every array item (the Report must have been built with FullArrays)
	ArrayItems  int  // items shown per array otherwise (default 6)
	DataOffset  bool // tensor offsets as absolute file offsets
	Group       bool // tensors grouped by block
	NoDraft     bool // omit the draft view (inspect does when --keys or --tensors narrows the output)
}

func newTable(w io.Writer, right ...int) *tablewriter.Table {
	var align tw.Alignment
	for i := 0; i < 8; i++ {
		a := tw.AlignLeft
		for _, r := range right {
			if r == i {
				a = tw.AlignRight
			}
		}
		align = append(align, a)
	}
	return tablewriter.NewTable(w,
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithAlignment(align),
	)
}

// Commas formats n with thousands separators.
func Commas(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// HumanCount formats a count as 3.56 B, 12.3 M, 7.2 K.
func HumanCount(n uint64) string {
	f := float64(n)
	switch {
	case f >= 1e12:
		return fmt.Sprintf("%.2f T", f/1e12)
	case f >= 1e9:
		return fmt.Sprintf("%.2f B", f/1e9)
	case f >= 1e6:
		return fmt.Sprintf("%.2f M", f/1e6)
	case f >= 1e3:
		return fmt.Sprintf("%.2f K", f/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// HumanBytes formats a byte count in binary units.
func HumanBytes(n uint64) string {
	f := float64(n)
	for _, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		var div float64
		switch u {
		case "TiB":
			div = 1 << 40
		case "GiB":
			div = 1 << 30
		case "MiB":
			div = 1 << 20
		case "KiB":
			div = 1 << 10
		}
		if f >= div {
			return fmt.Sprintf("%.2f %s", f/div, u)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// WriteText renders the report as tables.
func (r *Report) WriteText(w io.Writer, opt TextOptions) error {
	if opt.StringRunes == 0 {
		opt.StringRunes = 60
	}
	if opt.ArrayItems <= 0 {
		opt.ArrayItems = 6
	}
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "%s (%s)\n", Safe(r.Path), r.Source)
	if err := r.writeHeader(ew); err != nil {
		return err
	}
	if len(r.Summary.ByType) > 0 {
		fmt.Fprintln(ew, "\nSize by type")
		t := newTable(ew, 1, 2, 3, 4)
		t.Header("TYPE", "TENSORS", "ELEMENTS", "BYTES", "SHARE")
		for _, s := range r.Summary.ByType {
			share := "-"
			if r.Summary.TensorBytes > 0 {
				share = fmt.Sprintf("%.1f %%", 100*float64(s.Bytes)/float64(r.Summary.TensorBytes))
			}
			t.Append([]string{s.Type, strconv.Itoa(s.Tensors), Commas(s.Elements), Commas(s.Bytes), share})
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if !opt.NoDraft {
		if err := r.writeDraft(ew); err != nil {
			return err
		}
	}
	fmt.Fprintf(ew, "\nMetadata (%d of %d keys)\n", len(r.Metadata), r.Summary.KVCount)
	t := newTable(ew, 0, 3)
	t.Header("#", "KEY", "TYPE", "COUNT", "VALUE")
	items := opt.ArrayItems
	if opt.FullArrays {
		items = -1
	}
	for _, e := range r.Metadata {
		typ := e.Type
		if e.ElemType != "" {
			typ = "[]" + e.ElemType
		}
		t.Append([]string{strconv.Itoa(e.Index), Safe(e.Key), typ, strconv.Itoa(e.Count), e.value.Format(items, opt.StringRunes)})
	}
	if err := t.Render(); err != nil {
		return err
	}
	if r.Tensors != nil {
		if err := r.writeTensors(ew, opt); err != nil {
			return err
		}
	}
	if len(r.InvalidUTF8) > 0 {
		fmt.Fprintf(ew, "\nInvalid UTF-8 (%d strings, kept byte-exact)\n", len(r.InvalidUTF8))
		for _, b := range r.InvalidUTF8 {
			fmt.Fprintf(ew, "  %s: bytes %s\n", b.Where, b.Hex)
		}
	}
	if len(r.Unsupported) > 0 {
		fmt.Fprintf(ew, "\nUnsupported (%d)\n", len(r.Unsupported))
		for _, u := range r.Unsupported {
			fmt.Fprintf(ew, "  %s\n", u)
		}
	}
	if r.Transfer != nil {
		fmt.Fprintf(ew, "\nFetched %s in %d HTTP range requests\n", HumanBytes(uint64(r.Transfer.Bytes)), r.Transfer.Requests)
	}
	if r.Check != nil {
		r.writeCheck(ew)
	}
	if r.Memory != nil {
		writeMemory(ew, r.Memory)
	}
	return ew.err
}

func (r *Report) writeHeader(w io.Writer) error {
	s := r.Summary
	rows := [][]string{
		{"GGUF version", strconv.FormatUint(uint64(r.Format.Version), 10)},
		{"byte order", r.Format.Endianness + "-endian"},
		{"alignment", strconv.FormatUint(r.Format.Alignment, 10)},
		{"data offset", Commas(uint64(r.Format.DataOffset))},
		{"architecture", Safe(s.Architecture)},
		{"metadata keys", strconv.Itoa(s.KVCount)},
		{"tensors", strconv.Itoa(s.TensorCount)},
		{"parameters", fmt.Sprintf("%s (%s)", Commas(s.Parameters), HumanCount(s.Parameters))},
		{"tensor data", fmt.Sprintf("%s bytes (%s)", Commas(s.TensorBytes), HumanBytes(s.TensorBytes))},
		{"bits per weight", fmt.Sprintf("%.2f", s.BitsPerWeight)},
	}
	if r.Format.Endianness == "big" {
		rows[1][1] += " (every number, tensor data included)"
	}
	if r.Format.Size != nil {
		rows = append(rows, []string{"file size", fmt.Sprintf("%s bytes (%s)", Commas(uint64(*r.Format.Size)), HumanBytes(uint64(*r.Format.Size)))})
	} else {
		rows = append(rows, []string{"file size", "unknown (read as a stream)"})
	}
	if len(r.Format.Shards) > 1 {
		rows = append(rows, []string{"shards", strconv.Itoa(len(r.Format.Shards))})
	}
	t := newTable(w)
	t.Header("FIELD", "VALUE")
	for _, row := range rows {
		t.Append(row)
	}
	return t.Render()
}

var blockName = regexp.MustCompile(`^blk\.([0-9]+)\.`)

func (r *Report) writeTensors(w io.Writer, opt TextOptions) error {
	ts := *r.Tensors
	split := len(r.Format.Shards) > 1
	offCol := "OFFSET"
	if opt.DataOffset {
		offCol = "FILE OFFSET"
	}
	type group struct {
		name string
		ts   []Tensor
	}
	var groups []*group
	if opt.Group {
		byName := map[string]*group{}
		for _, t := range ts {
			name := "(global)"
			if m := blockName.FindStringSubmatch(t.Name); m != nil {
				name = "blk." + m[1]
			}
			g, ok := byName[name]
			if !ok {
				g = &group{name: name}
				byName[name] = g
				groups = append(groups, g)
			}
			g.ts = append(g.ts, t)
		}
	} else {
		groups = []*group{{name: "", ts: ts}}
	}
	fmt.Fprintf(w, "\nTensors (%d of %d)\n", len(ts), r.Summary.TensorCount)
	for _, g := range groups {
		if g.name != "" {
			var elems, bytes uint64
			for _, t := range g.ts {
				elems += t.Elements
				bytes += t.Bytes
			}
			bpw := 0.0
			if elems > 0 {
				bpw = float64(bytes) * 8 / float64(elems)
			}
			fmt.Fprintf(w, "\n%s: %d tensors, %s parameters, %s, %.2f bits per weight\n", g.name, len(g.ts), HumanCount(elems), HumanBytes(bytes), bpw)
		}
		header := []any{"#", "NAME", "TYPE", "DIMS (GGML ORDER)", "ELEMENTS", "BYTES", offCol}
		right := []int{0, 4, 5, 6}
		if split {
			header = append(header, "SHARD")
			right = append(right, 7)
		}
		tb := newTable(w, right...)
		tb.Header(header...)
		for _, t := range g.ts {
			dims := make([]string, len(t.Dims))
			for i, d := range t.Dims {
				dims[i] = strconv.FormatUint(d, 10)
			}
			off := Commas(t.Offset)
			if opt.DataOffset {
				off = Commas(uint64(t.AbsOffset))
			}
			row := []string{strconv.Itoa(t.Index), Safe(t.Name), t.Type, "{" + strings.Join(dims, ", ") + "}", Commas(t.Elements), Commas(t.Bytes), off}
			if split {
				row = append(row, strconv.Itoa(t.Shard+1))
			}
			tb.Append(row)
		}
		if err := tb.Render(); err != nil {
			return err
		}
	}
	return nil
}

func (r *Report) writeCheck(w io.Writer) {
	c := r.Check
	against := ""
	if c.Target != "" {
		against = ", against target " + Safe(c.Target)
	}
	if c.Passed {
		fmt.Fprintf(w, "\nCheck (%s rules%s): passed\n", c.Rules, against)
	} else {
		fmt.Fprintf(w, "\nCheck (%s rules%s): %d problem(s)\n", c.Rules, against, len(c.Problems))
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "  - %s\n", p.text())
	}
	if c.Pair != nil {
		writePair(w, c.Pair)
	}
	if len(c.Warnings) > 0 {
		fmt.Fprintf(w, "Warnings (%d; they do not fail the check)\n", len(c.Warnings))
		for _, p := range c.Warnings {
			fmt.Fprintf(w, "  - %s\n", p.text())
		}
	}
	if len(c.Loaders) > 0 {
		fmt.Fprintln(w, "\nLoaders")
		t := newTable(w)
		t.Header("LOADER", "LOADS", "FIRST KEY OR TENSOR IT WOULD MISS OR REJECT / NOTE")
		for _, l := range c.Loaders {
			loads := "unknown"
			if l.Loads != nil {
				loads = map[bool]string{true: "yes", false: "no"}[*l.Loads]
			}
			t.Append([]string{l.Name, loads, Safe(l.Reason)})
		}
		_ = t.Render() // errWriter keeps the first write error
	}
}

// writeMemory renders the memory estimate.
func writeMemory(w io.Writer, e *memory.Estimate) {
	fmt.Fprintf(w, "\nMemory at --ctx %d (KV cache %s, batches of %d rows", e.Ctx, e.CacheType, e.Batch)
	if e.RollbackRows > 0 {
		fmt.Fprintf(w, ", rollback design %s for %d drafted rows", e.Rollback, e.RollbackRows)
	}
	fmt.Fprintln(w, ")")
	t := newTable(w, 2, 3)
	t.Header("MODEL", "PART", "BYTES", "SIZE", "HOW")
	for _, p := range e.Parts {
		how := p.Formula
		if len(p.ByType) > 0 {
			var ts []string
			for _, b := range p.ByType {
				ts = append(ts, fmt.Sprintf("%s %s", b.Type, HumanBytes(b.Bytes)))
			}
			how = strings.Join(ts, ", ")
		}
		t.Append([]string{p.Model, p.Part, Commas(p.Bytes), HumanBytes(p.Bytes), Safe(how)})
	}
	t.Append([]string{"", "total", Commas(e.Total), HumanBytes(e.Total), ""})
	_ = t.Render() // errWriter keeps the first write error
	for _, n := range e.Notes {
		fmt.Fprintf(w, "  note: %s\n", Safe(n))
	}
}

// writePair renders the draft's taps against the target's blocks.
func writePair(w io.Writer, p *drafts.Pair) {
	var kinds []string
	for _, k := range p.Kinds {
		kinds = append(kinds, fmt.Sprintf("%d %s", k.Blocks, k.Kind))
	}
	fmt.Fprintf(w, "\nTaps in the target (%s, %d blocks: %s; taps must lie in the first %d)\n", Safe(p.Architecture), p.Blocks, strings.Join(kinds, ", "), p.Trunk)
	fmt.Fprintf(w, "  %s\n", p.Convention)
	t := newTable(w, 0, 1, 2, 3)
	t.Header("ENTRY", "STORED", "LLAMA.CPP ID (INPUT OF)", "HF LAYER (OUTPUT OF)", "KIND", "OK")
	for _, tp := range p.Taps {
		ok := "yes"
		if !tp.OK {
			ok = "no: " + tp.Note
		}
		kind := tp.Kind
		if kind == "" {
			kind = "-"
		}
		t.Append([]string{strconv.Itoa(tp.Entry), strconv.FormatInt(tp.Stored, 10), strconv.FormatInt(tp.LlamaID, 10), strconv.FormatInt(tp.HFLayer, 10), kind, ok})
	}
	_ = t.Render() // errWriter keeps the first write error
	if p.TapReads != "" {
		fmt.Fprintf(w, "  A tap reads %s\n", p.TapReads)
	}
	for _, e := range p.Engines {
		pairs := "unknown"
		if e.Loads != nil {
			pairs = map[bool]string{true: "yes", false: "no"}[*e.Loads]
		}
		fmt.Fprintf(w, "  %s pairs a draft with this target: %s: %s\n", Safe(e.Name), pairs, Safe(e.Reason))
	}
}

// text formats a finding: "[file: ]subject (offset N): message".
func (p Problem) text() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(Safe(p.File) + ": ")
	}
	if p.Subject != "" {
		b.WriteString(Safe(p.Subject))
		if p.Offset != nil {
			fmt.Fprintf(&b, " (offset %d)", *p.Offset)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// writeDraft renders the draft view: one row per normalized field, its value and where it
// came from (or why it is unknown).
func (r *Report) writeDraft(w io.Writer) error {
	v := r.Draft
	if v == nil {
		return nil
	}
	if !v.Recognized {
		fmt.Fprintf(w, "\nDraft schema: %s\n", Safe(v.Reason))
		return nil
	}
	fmt.Fprintf(w, "\nDraft (%s: %s, %s)\n", v.Schema, v.Family, v.Kind)
	t := newTable(w)
	t.Header("FIELD", "VALUE", "FROM")
	for _, row := range v.Rows() {
		t.Append([]string{row.Name, Safe(row.Value), Safe(row.From)})
	}
	return t.Render()
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

// Write writes p unless an earlier write failed.
func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
