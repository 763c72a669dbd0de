package calibrate

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// Diagram is a reliability diagram: for each section (a calibration), one panel per draft
// position and one for all positions together, each plotting the observed survival of a bin
// against its mean prediction, before calibration (red) and after (blue), on the diagonal of
// perfect calibration.
type Diagram struct {
	Title    string
	Sections []Section
}

// Section is one calibration's panels: the positions' evaluation, under a heading.
type Section struct {
	Title     string
	Positions []Position
}

// panel is one square of the diagram; heading, when set, starts a section on its row.
type panel struct {
	heading       string
	title, sub    string
	before, after []Bin
}

// panels lays the sections out: every section starts a new row.
func (d *Diagram) panels() (ps []panel, cols int) {
	cols = 1
	for _, s := range d.Sections {
		cols = max(cols, min(4, len(s.Positions)+1))
	}
	for _, s := range d.Sections {
		for len(ps)%cols != 0 {
			ps = append(ps, panel{}) // an empty cell: the section starts a row
		}
		first := len(ps)
		for _, p := range s.Positions {
			ps = append(ps, panel{title: fmt.Sprintf("position %d (n=%d)", p.Position, p.Samples), sub: fmt.Sprintf("ECE %.3f -> %.3f", p.ECEBefore, p.ECEAfter), before: p.BinsBefore, after: p.BinsAfter})
		}
		b, a, eb, ea := Pooled(s.Positions)
		ps = append(ps, panel{title: "all positions", sub: fmt.Sprintf("ECE %.3f -> %.3f", eb, ea), before: b, after: a})
		ps[first].heading = s.Title
	}
	return ps, cols
}

var (
	colBefore = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	colAfter  = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colAxis   = color.RGBA{0x33, 0x33, 0x33, 0xff}
	colGrid   = color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	colText   = color.RGBA{0x11, 0x11, 0x11, 0xff}
)

// canvas is what the diagram is drawn on: an SVG document or a PNG image.
type canvas interface {
	line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool)
	dot(x, y, r float64, c color.RGBA)
	// text draws s with its baseline at y, starting at x (anchor "start"), centred on it
	// ("middle") or ending at it ("end"); size is the height of a capital letter.
	text(x, y float64, s string, size float64, anchor string)
}

// Layout of the diagram, in pixels.
const (
	plotSide  = 210.0 // a panel's square plot area
	panelPadL = 46.0
	panelPadT = 40.0
	panelW    = plotSide + panelPadL + 16
	panelH    = plotSide + panelPadT + 40
	headerH   = 72.0
	headingH  = 22.0 // a section heading above its first row
)

// rowTops returns the top of every row of panels and the diagram's size.
func (d *Diagram) layout() (ps []panel, cols int, tops []float64, w, h float64) {
	ps, cols = d.panels()
	y := headerH
	for i := 0; i < len(ps); i += cols {
		if ps[i].heading != "" {
			y += headingH
		}
		tops = append(tops, y)
		y += panelH
	}
	return ps, cols, tops, float64(cols) * panelW, y
}

func (d *Diagram) size() (w, h float64) {
	_, _, _, w, h = d.layout()
	return w, h
}

func (d *Diagram) draw(c canvas) {
	ps, cols, tops, w, _ := d.layout()
	c.text(w/2, 22, d.Title, 9, "middle")
	c.line(w/2-230, 42, w/2-210, 42, colBefore, 2.5, false)
	c.dot(w/2-220, 42, 3.5, colBefore)
	c.text(w/2-204, 46, "before calibration", 7, "start")
	c.text(w/2, 64, "each panel: observed survival (y) against mean predicted survival (x) per bin; dot area ~ bin count; dashed: perfect calibration", 6, "middle")
	c.line(w/2+20, 42, w/2+40, 42, colAfter, 2.5, false)
	c.dot(w/2+30, 42, 3.5, colAfter)
	c.text(w/2+46, 46, "after calibration", 7, "start")
	for i, p := range ps {
		if p.heading != "" {
			c.text(8, tops[i/cols]-8, p.heading, 7, "start")
		}
		if p.title == "" {
			continue
		}
		x0 := float64(i%cols)*panelW + panelPadL
		y0 := tops[i/cols] + panelPadT
		px := func(v float64) float64 { return x0 + v*plotSide }
		py := func(v float64) float64 { return y0 + (1-v)*plotSide }
		c.text(x0+plotSide/2, y0-24, p.title, 6, "middle")
		c.text(x0+plotSide/2, y0-10, p.sub, 6, "middle")
		for t := 0; t <= 10; t += 2 {
			v := float64(t) / 10
			c.line(px(v), py(0), px(v), py(1), colGrid, 0.7, false)
			c.line(px(0), py(v), px(1), py(v), colGrid, 0.7, false)
			label := fmt.Sprintf("%.1f", v)
			c.text(px(v), py(0)+14, label, 6, "middle")
			c.text(px(0)-5, py(v)+3, label, 6, "end")
		}
		c.line(px(0), py(0), px(1), py(1), colAxis, 1, true)
		c.line(px(0), py(0), px(1), py(0), colAxis, 1.2, false)
		c.line(px(0), py(0), px(0), py(1), colAxis, 1.2, false)
		c.text(px(0.5), py(0)+30, "predicted", 6, "middle")
		for _, series := range []struct {
			bins []Bin
			col  color.RGBA
		}{{p.before, colBefore}, {p.after, colAfter}} {
			total := 0
			for _, b := range series.bins {
				total += b.Count
			}
			var lx, ly float64
			have := false
			for _, b := range series.bins {
				if b.Count == 0 {
					continue
				}
				x, y := px(b.Predicted), py(b.Observed)
				if have {
					c.line(lx, ly, x, y, series.col, 1.8, false)
				}
				lx, ly, have = x, y, true
			}
			for _, b := range series.bins {
				if b.Count == 0 {
					continue
				}
				r := 2 + 6*math.Sqrt(float64(b.Count)/float64(max(total, 1)))
				c.dot(px(b.Predicted), py(b.Observed), r, series.col)
			}
		}
	}
}

// WriteSVG writes the diagram as an SVG document.
func (d *Diagram) WriteSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	width, height := d.size()
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	d.draw(&svgCanvas{w: bw})
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

type svgCanvas struct{ w io.Writer }

func rgb(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func (s *svgCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(s.w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, rgb(c), width, dash)
}

func (s *svgCanvas) dot(x, y, r float64, c color.RGBA) {
	fmt.Fprintf(s.w, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" fill-opacity="0.8"/>`+"\n", x, y, r, rgb(c))
}

func (s *svgCanvas) text(x, y float64, str string, size float64, anchor string) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	fmt.Fprintf(s.w, `<text x="%.1f" y="%.1f" font-size="%.1f" text-anchor="%s" fill="%s">%s</text>`+"\n", x, y, size*1.45, anchor, rgb(colText), r.Replace(str))
}

// WritePNG writes the diagram as a PNG image (text in a built-in 5x7 pixel font).
func (d *Diagram) WritePNG(w io.Writer) error {
	width, height := d.size()
	img := image.NewRGBA(image.Rect(0, 0, int(width), int(height)))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	d.draw(&pngCanvas{img: img})
	return png.Encode(w, img)
}

type pngCanvas struct{ img *image.RGBA }

// blend paints pixel (x, y) with c at opacity a.
func (p *pngCanvas) blend(x, y int, c color.RGBA, a float64) {
	if !image.Pt(x, y).In(p.img.Rect) || a <= 0 {
		return
	}
	a = min(a, 1)
	i := p.img.PixOffset(x, y)
	px := p.img.Pix[i : i+3 : i+3]
	for k, v := range [3]uint8{c.R, c.G, c.B} {
		px[k] = uint8(math.Round(float64(px[k])*(1-a) + float64(v)*a))
	}
}

func (p *pngCanvas) line(x1, y1, x2, y2 float64, c color.RGBA, width float64, dashed bool) {
	n := int(math.Max(math.Abs(x2-x1), math.Abs(y2-y1))*2) + 1
	half := width / 2
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		if dashed && int(t*math.Hypot(x2-x1, y2-y1)/3.5)%2 == 1 {
			continue
		}
		x, y := x1+(x2-x1)*t, y1+(y2-y1)*t
		for yy := int(math.Floor(y - half - 1)); yy <= int(math.Ceil(y+half+1)); yy++ {
			for xx := int(math.Floor(x - half - 1)); xx <= int(math.Ceil(x+half+1)); xx++ {
				d := math.Hypot(float64(xx)+0.5-x, float64(yy)+0.5-y)
				if cov := half + 0.5 - d; cov > 0 {
					p.blendMax(xx, yy, c, cov)
				}
			}
		}
	}
}

// blendMax paints with the coverage cov, once per pixel per stroke in effect: repeated
// stamps of the same line do not darken a pixel beyond its coverage.
func (p *pngCanvas) blendMax(x, y int, c color.RGBA, cov float64) {
	if !image.Pt(x, y).In(p.img.Rect) {
		return
	}
	i := p.img.PixOffset(x, y)
	px := p.img.Pix[i : i+3 : i+3]
	a := min(cov, 1)
	for k, v := range [3]uint8{c.R, c.G, c.B} {
		want := float64(0xff)*(1-a) + float64(v)*a
		// Keep whichever is closer to the stroke colour: the pixel as it is, or the stroke at
		// this coverage over white.
		if math.Abs(want-float64(v)) < math.Abs(float64(px[k])-float64(v)) {
			px[k] = uint8(math.Round(want))
		}
	}
}

func (p *pngCanvas) dot(x, y, r float64, c color.RGBA) {
	for yy := int(y - r - 1); yy <= int(y+r+1); yy++ {
		for xx := int(x - r - 1); xx <= int(x+r+1); xx++ {
			d := math.Hypot(float64(xx)+0.5-x, float64(yy)+0.5-y)
			p.blend(xx, yy, c, (r+0.5-d)*0.85)
		}
	}
}

func (p *pngCanvas) text(x, y float64, s string, size float64, anchor string) {
	scale := max(1, int(math.Round(size/7)))
	adv := 6 * scale
	w := float64(len(s)*adv - scale)
	switch anchor {
	case "middle":
		x -= w / 2
	case "end":
		x -= w
	}
	top := int(y) - 7*scale
	for i, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range strings.Split(g, "/") {
			for col, b := range bits {
				if b != '1' {
					continue
				}
				for dy := range scale {
					for dx := range scale {
						p.blend(int(x)+i*adv+col*scale+dx, top+row*scale+dy, colText, 1)
					}
				}
			}
		}
	}
}

// glyphs is a 5x7 pixel font: rows top to bottom, '1' set.
var glyphs = map[rune]string{
	' ':  "00000/00000/00000/00000/00000/00000/00000",
	'0':  "01110/10001/10011/10101/11001/10001/01110",
	'1':  "00100/01100/00100/00100/00100/00100/01110",
	'2':  "01110/10001/00001/00010/00100/01000/11111",
	'3':  "11111/00010/00100/00010/00001/10001/01110",
	'4':  "00010/00110/01010/10010/11111/00010/00010",
	'5':  "11111/10000/11110/00001/00001/10001/01110",
	'6':  "00110/01000/10000/11110/10001/10001/01110",
	'7':  "11111/00001/00010/00100/01000/01000/01000",
	'8':  "01110/10001/10001/01110/10001/10001/01110",
	'9':  "01110/10001/10001/01111/00001/00010/01100",
	'A':  "01110/10001/10001/11111/10001/10001/10001",
	'B':  "11110/10001/10001/11110/10001/10001/11110",
	'C':  "01110/10001/10000/10000/10000/10001/01110",
	'D':  "11100/10010/10001/10001/10001/10010/11100",
	'E':  "11111/10000/10000/11110/10000/10000/11111",
	'F':  "11111/10000/10000/11110/10000/10000/10000",
	'G':  "01110/10001/10000/10111/10001/10001/01111",
	'H':  "10001/10001/10001/11111/10001/10001/10001",
	'I':  "01110/00100/00100/00100/00100/00100/01110",
	'J':  "00111/00010/00010/00010/00010/10010/01100",
	'K':  "10001/10010/10100/11000/10100/10010/10001",
	'L':  "10000/10000/10000/10000/10000/10000/11111",
	'M':  "10001/11011/10101/10101/10001/10001/10001",
	'N':  "10001/10001/11001/10101/10011/10001/10001",
	'O':  "01110/10001/10001/10001/10001/10001/01110",
	'P':  "11110/10001/10001/11110/10000/10000/10000",
	'Q':  "01110/10001/10001/10001/10101/10010/01101",
	'R':  "11110/10001/10001/11110/10100/10010/10001",
	'S':  "01111/10000/10000/01110/00001/00001/11110",
	'T':  "11111/00100/00100/00100/00100/00100/00100",
	'U':  "10001/10001/10001/10001/10001/10001/01110",
	'V':  "10001/10001/10001/10001/10001/01010/00100",
	'W':  "10001/10001/10001/10101/10101/10101/01010",
	'X':  "10001/10001/01010/00100/01010/10001/10001",
	'Y':  "10001/10001/10001/01010/00100/00100/00100",
	'Z':  "11111/00001/00010/00100/01000/10000/11111",
	'.':  "00000/00000/00000/00000/00000/01100/01100",
	',':  "00000/00000/00000/00000/01100/00100/01000",
	':':  "00000/01100/01100/00000/01100/01100/00000",
	';':  "00000/01100/01100/00000/01100/00100/01000",
	'~':  "00000/00000/01000/10101/00010/00000/00000",
	'\'': "00100/00100/01000/00000/00000/00000/00000",
	'"':  "01010/01010/00000/00000/00000/00000/00000",
	'!':  "00100/00100/00100/00100/00100/00000/00100",
	'[':  "01110/01000/01000/01000/01000/01000/01110",
	']':  "01110/00010/00010/00010/00010/00010/01110",
	'#':  "01010/01010/11111/01010/11111/01010/01010",
	'-':  "00000/00000/00000/11111/00000/00000/00000",
	'_':  "00000/00000/00000/00000/00000/00000/11111",
	'>':  "01000/00100/00010/00001/00010/00100/01000",
	'<':  "00010/00100/01000/10000/01000/00100/00010",
	'=':  "00000/00000/11111/00000/11111/00000/00000",
	'(':  "00010/00100/01000/01000/01000/00100/00010",
	')':  "01000/00100/00010/00010/00010/00100/01000",
	'/':  "00000/00001/00010/00100/01000/10000/00000",
	'%':  "11000/11001/00010/00100/01000/10011/00011",
	'+':  "00000/00100/00100/11111/00100/00100/00000",
	'*':  "00000/00100/10101/01110/10101/00100/00000",
	'?':  "01110/10001/00001/00010/00100/00000/00100",
	'…':  "00000/00000/00000/00000/00000/00000/10101",
	'·':  "00000/00000/00000/00100/00000/00000/00000",
}
