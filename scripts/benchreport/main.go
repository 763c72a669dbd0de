// Command benchreport measures the headline figures of docs/benchmarks.md on this machine, in
// one run, and prints them as that document's markdown table (the same columns), headed by
// the commit, the CPU and the date: paste its output into docs/benchmarks.md to add or update
// a machine class (as llama-bench's output is pasted).
//
// Run it through `make bench-report` (which builds bin/dspark first). Every figure is a ratio
// to a limit measured in the same run. Rows whose prerequisites are missing are printed with
// the reason instead of a figure:
//
//   - decode vs llama.cpp needs node and npm (scripts/bench-llamacpp.sh installs the npm
//     package node-llama-cpp outside the repository on first use; DSPARK_BENCH_LLAMACPP=0
//     skips it);
//   - convert vs cp and the k3-full block write a 7.1 GB synthetic checkpoint and its 4.8 GB
//     GGUF (about 17 GB free disk, several minutes): they run only with DSPARK_BENCH_FULL=1.
//
// The demo pair is built into the user cache on first use (about a minute here).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dspark-dev/dspark/internal/demo"
)

// row is one line of the table: what is measured, its figure at one / all threads, the goal,
// whether the figure meets it, and the command that reproduces it.
type row struct {
	what, figure, goal, met, command string
}

func main() {
	bin := flag.String("bin", "bin/dspark", "the dspark binary to measure")
	flag.Parse()
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v (run `make bench-report`, which builds it)\n", err)
		os.Exit(2)
	}
	bf16 := cpuHas("avx512_bf16")
	act := "f32"
	if bf16 {
		act = "bf16"
	}
	var rows []row

	fmt.Fprintln(os.Stderr, "benchreport: opening the demo pair (built into the user cache on first use, about a minute)")
	pair, err := demo.Open(demo.OpenOptions{CacheDir: os.Getenv("DSPARK_DEMO_CACHE")})
	if err != nil {
		fail("demo pair: %v", err)
	}
	rows = append(rows, decodeRows(pair.Target, act, bf16)...)
	rows = append(rows, llamaRow(*bin))
	rows = append(rows, demoRows(*bin)...)
	rows = append(rows, fullRows(*bin, act)...)

	commit := strings.TrimSpace(output("git", "rev-parse", "--short", "HEAD"))
	if commit == "" {
		commit = "unknown"
	}
	fmt.Printf("### %s, %d threads\n\n", cpuModel(), goruntime.GOMAXPROCS(0))
	fmt.Printf("`make bench-report` at commit %s, %s; CPU flags: %s.\n\n", commit, time.Now().UTC().Format("2006-01-02 15:04 UTC"), simdFlags())
	fmt.Println("| figure | one / two threads | goal | met | command |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		c := []string{r.what, r.figure, r.goal, r.met, r.command}
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`) // a bar inside a cell ends it in markdown
		}
		fmt.Printf("| %s |\n", strings.Join(c, " | "))
	}
}

// decodeRows runs the deepseek2 decode and 8-row verify benchmarks on the demo target.
func decodeRows(target, act string, bf16 bool) []row {
	env := append(os.Environ(), "DSPARK_BENCH_TARGET="+target, "DSPARK_BENCH_ACTIVATIONS="+act)
	cmdline := fmt.Sprintf("`DSPARK_BENCH_ACTIVATIONS=%s DSPARK_BENCH_TARGET=<demo target> go test -run '^$' -bench 'TargetDecode|Verify8' -benchtime 100x ./runtime/deepseek2`", act)
	fmt.Fprintln(os.Stderr, "benchreport: decode / read and 8-row verify / 1-row step on the demo target")
	out, err := run(env, "go", "test", "-run", "^$", "-bench", "TargetDecode|Verify8", "-benchtime", "100x", "-count", "1", "./runtime/deepseek2")
	if err != nil {
		msg := "failed: " + firstLine(out)
		return []row{{"decode / read (demo target, " + act + ")", msg, ">= 0.85", "-", cmdline}, {"8-row verify / 1-row step", msg, "<= 1.3", "-", cmdline}}
	}
	dec := metric(out, "BenchmarkTargetDecode", "ratio-to-read")
	ver := metric(out, "BenchmarkVerify8", "cost-vs-1-row")
	verGoal := 1.3
	if !bf16 {
		verGoal = 1.9 // AVX2-only and AVX-512F-only CPUs: the f32 contract's FMA floor is higher
	}
	return []row{
		{"decode / read (demo target, " + act + ")", join(dec, 2), ">= 0.85", met(dec, func(v float64) bool { return v >= 0.85 }), cmdline},
		{"8-row verify / 1-row step (demo target, " + act + ")", join(ver, 3), fmt.Sprintf("<= %.1f", verGoal), met(ver, func(v float64) bool { return v <= verGoal }), "same"},
	}
}

// llamaRow runs scripts/bench-llamacpp.sh --dense when node and npm are installed.
func llamaRow(bin string) row {
	r := row{what: "decode vs llama.cpp's CPU backend (`small --dense`)", goal: ">= 1.3x", command: "`make bench-llamacpp ARGS=--dense`"}
	if os.Getenv("DSPARK_BENCH_LLAMACPP") == "0" {
		r.figure, r.met = "skipped: DSPARK_BENCH_LLAMACPP=0", "-"
		return r
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			r.figure, r.met = "skipped: no "+tool+" in PATH", "-"
			return r
		}
	}
	fmt.Fprintln(os.Stderr, "benchreport: decode side by side with llama.cpp (scripts/bench-llamacpp.sh --dense)")
	out, err := run(append(os.Environ(), "DSPARK_BIN="+bin), "./scripts/bench-llamacpp.sh", "--dense")
	if err != nil {
		r.figure, r.met = "failed: "+firstLine(out), "-"
		return r
	}
	// The script's table: | threads | FA off | FA on | dspark | **dspark / best** (range) | ...
	re := regexp.MustCompile(`(?m)^\| (\d+) \|[^|]*\|[^|]*\|[^|]*\| \*\*([0-9.]+)\*\*`)
	var v []float64
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		f, _ := strconv.ParseFloat(m[2], 64)
		v = append(v, f)
	}
	r.figure = join(v, 2) + "x"
	r.met = met(v, func(x float64) bool { return x >= 1.3 })
	return r
}

// demoRows runs the demo (`dspark run --json`) and reports its greedy and sampled speedups.
func demoRows(bin string) []row {
	fmt.Fprintln(os.Stderr, "benchreport: the demo (dspark run --json)")
	args := []string{"run", "--json"}
	if d := os.Getenv("DSPARK_DEMO_CACHE"); d != "" {
		args = append(args, "--cache-dir", d)
	}
	out, err := run(nil, bin, args...)
	cmd := "`make demo`"
	if err != nil {
		return []row{{"demo speedup, greedy / sampled", "failed: " + firstLine(out), ">= 1.3x", "-", cmd}}
	}
	var rep struct {
		Threads int `json:"threads"`
		Modes   []struct {
			Mode    string  `json:"mode"`
			Speedup float64 `json:"speedup"`
			Tau     float64 `json:"tau"`
		} `json:"modes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return []row{{"demo speedup, greedy / sampled", "failed: " + err.Error(), ">= 1.3x", "-", cmd}}
	}
	var rows []row
	for _, m := range rep.Modes {
		ok := "yes"
		if m.Speedup < 1.3 {
			ok = "no"
		}
		rows = append(rows, row{fmt.Sprintf("demo speedup, %s (%d threads; tau %.2f)", m.Mode, rep.Threads, m.Tau), fmt.Sprintf("%.2fx", m.Speedup), ">= 1.3x", ok, cmd})
	}
	return rows
}

// fullRows runs the full-size K3 checks (convert vs cp, the k3-full block) with DSPARK_BENCH_FULL=1.
func fullRows(bin, act string) []row {
	conv := row{what: "convert k3-full draft / cp of the same bytes", goal: "<= 1.15x", command: "`make bench-convert`"}
	k3 := row{what: "k3-full draft block / one read of its weights (" + act + ", all threads)", goal: "<= 1.3x", command: "`ACTIVATIONS=" + act + " make k3-full`"}
	if os.Getenv("DSPARK_BENCH_FULL") != "1" {
		conv.figure, conv.met = "skipped: DSPARK_BENCH_FULL=1 runs it (~17 GB of disk, minutes)", "-"
		k3.figure, k3.met = "skipped: DSPARK_BENCH_FULL=1 runs it (~12 GB of disk, minutes)", "-"
		return []row{conv, k3}
	}
	fmt.Fprintln(os.Stderr, "benchreport: convert vs cp (scripts/bench-convert.sh)")
	if out, err := run(nil, "./scripts/bench-convert.sh", bin); err != nil {
		conv.figure, conv.met = "failed: "+firstLine(out), "-"
	} else if v := find(out, `convert / cp time\s+([0-9.]+) x`); v > 0 {
		conv.figure, conv.met = fmt.Sprintf("%.2fx", v), yes(v <= 1.15)
	}
	fmt.Fprintln(os.Stderr, "benchreport: the k3-full block (scripts/k3-full.sh)")
	if out, err := run(append(os.Environ(), "ACTIVATIONS="+act), "./scripts/k3-full.sh", bin); err != nil {
		k3.figure, k3.met = "failed: "+firstLine(out), "-"
	} else if v := find(out, `block / stream, median of the \d+ pairs: ([0-9.]+)x`); v > 0 {
		k3.figure, k3.met = fmt.Sprintf("%.2fx", v), yes(v <= 1.3)
	}
	return []row{conv, k3}
}

// metric returns, in order of appearance, the values of unit on the result lines of bench.
func metric(out, bench, unit string) []float64 {
	var v []float64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], bench+"/") {
			continue
		}
		for i := 1; i < len(f); i++ {
			if f[i] == unit {
				if x, err := strconv.ParseFloat(f[i-1], 64); err == nil {
					v = append(v, x)
				}
			}
		}
	}
	return v
}

func join(v []float64, prec int) string {
	if len(v) == 0 {
		return "no result"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(s, " / ")
}

func met(v []float64, ok func(float64) bool) string {
	if len(v) == 0 {
		return "-"
	}
	n := 0
	for _, x := range v {
		if ok(x) {
			n++
		}
	}
	switch n {
	case len(v):
		return "yes"
	case 0:
		return "no"
	}
	return "in part"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func find(out, pattern string) float64 {
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// run runs a command (stderr passed through, so progress shows) and returns its stdout.
func run(env []string, name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	c.Env = env
	var out bytes.Buffer
	c.Stdout = &out
	c.Stderr = os.Stderr
	err := c.Run()
	return out.String(), err
}

func output(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "see the messages above"
	}
	return s
}

func cpuinfo() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return string(b)
}

func cpuModel() string {
	for _, l := range strings.Split(cpuinfo(), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return goruntime.GOARCH + " CPU (model unknown)"
}

func cpuHas(flag string) bool {
	for _, l := range strings.Split(cpuinfo(), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				if f == flag {
					return true
				}
			}
			return false
		}
	}
	return false
}

// simdFlags names the CPU features the kernels choose paths by.
func simdFlags() string {
	var have []string
	for _, f := range []string{"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_bf16"} {
		if cpuHas(f) {
			have = append(have, f)
		}
	}
	if len(have) == 0 {
		return "none of avx2/avx512/amx"
	}
	return strings.Join(have, " ")
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "benchreport: "+format+"\n", a...)
	os.Exit(1)
}
