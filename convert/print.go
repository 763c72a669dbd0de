package convert

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the plan for --dry-run: a summary, every source tensor -> GGUF name with
// dtype -> type, shape -> dims and bytes, the dropped tensors, every metadata key with its
// type and value, and the notes.
func (p *Plan) Print(w io.Writer, outPath string) error {
	fmt.Fprintf(w, "plan: %s (%s, %s tensor names) -> %s\n", p.Dir, p.HFArch, p.Family, p.Arch)
	fmt.Fprintf(w, "output: %s, type %s, %d tensors, %s parameters, %s data bytes (%s source bytes read), size label %s\n",
		outPath, p.OutType, len(p.Tensors), commas(int64(p.Params)), commas(p.DataBytes()), commas(int64(p.SrcBytes)), p.Size)
	fmt.Fprintln(w, "\ntensors:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tsource\t\tGGUF name\tdtype -> type\tshape -> dims\tbytes\ttransform")
	for i := range p.Tensors {
		t := &p.Tensors[i]
		src := t.Sources[0]
		if len(t.Sources) > 1 {
			src = fmt.Sprintf("%s (+%d more)", src, len(t.Sources)-1)
		}
		shape := shapeStr(t.SrcShape)
		if t.Xform.perExpert() {
			shape = fmt.Sprintf("%d x %s", len(t.Sources), shape)
		}
		fmt.Fprintf(tw, "  %d\t%s\t->\t%s\t%s -> %s\t%s -> %s\t%s\t%s\n", i, src, t.Name, t.SrcDtype, t.Type, shape, dimsStr(t.Dims), commas(t.Bytes), t.Xform)
	}
	tw.Flush()
	if len(p.Dropped) > 0 {
		fmt.Fprintln(w, "\nnot written:")
		for _, d := range p.Dropped {
			fmt.Fprintln(w, "  "+d)
		}
	}
	fmt.Fprintf(w, "\nmetadata (%d keys):\n", len(p.Meta))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range p.Meta {
		fmt.Fprintf(tw, "  %s\t%s\t= %s\n", m.Key, m.Value.TypeName(), m.Value)
	}
	tw.Flush()
	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range p.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// PrintRoundTrips writes the round-trip error table of the last Write (RoundTrips): per
// tensor the stored type, the source dtype, the elements, the RMSE and the largest absolute
// error of the stored values against the source values, and the RMSE relative to the
// source's RMS; then the worst relative error. It writes nothing when no tensor was stored
// lossily.
func (p *Plan) PrintRoundTrips(w io.Writer) error {
	if len(p.RoundTrips) == 0 {
		return nil
	}
	fmt.Fprintf(w, "round-trip error of the %d tensor(s) not stored exactly (stored bytes decoded, against the source values):\n", len(p.RoundTrips))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tensor\ttype\tfrom\telements\tRMSE\tmax |error|\tRMSE / RMS(source)")
	worst := 0
	for i, r := range p.RoundTrips {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%.4g\t%.4g\t%.3f %%\n", r.Tensor, r.Type, r.Source, commas(r.Elements), r.RMSE, r.MaxAbs, 100*r.Relative())
		if r.Relative() > p.RoundTrips[worst].Relative() {
			worst = i
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r := p.RoundTrips[worst]
	_, err := fmt.Fprintf(w, "worst: %s, RMSE %.3f %% of its RMS, max |error| %.4g\n", r.Tensor, 100*r.Relative(), r.MaxAbs)
	return err
}
