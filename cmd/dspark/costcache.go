package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/dspark-dev/dspark/internal/atomicfile"
	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// The verify scheduler's cost model is measured at every start (runtime.CostPasses passes)
// and, to steady it on a shared machine, pooled with the passes of earlier runs of the same
// pair on the same machine: the last costCacheMax passes are kept in the user cache, one file
// per pair and machine.
const (
	costCacheFormat = 1
	costCacheMax    = 30
)

// costCacheDir is where the cost files live ("" : no cache); a variable for tests.
var costCacheDir = func() string {
	d, err := demo.DefaultCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "costs")
}

// costKey identifies a pair and a machine: the two files (by path, size and modification
// time, so that a rebuilt file is a new pair without hashing hundreds of megabytes), the
// CPU, the threads, the kernel path, dspark's version and build (the kernels of another
// build run at other speeds: its passes must not steady this one's), whether rows are
// sampled (the post-processing of a verify row differs), and the verify sizes timed (a
// context shorter than a block times fewer).
type costKey struct {
	Target, Draft fileID
	CPU           string
	Threads       int
	Kernels       string
	Version       string
	Build         string
	Sampled       bool
	Sizes         int
}

// buildID identifies the running executable by its contents: a hash of the file, since
// the version string stays the same across development builds and `go build` rewrites the
// file (a new modification time) even when nothing changed. "" if it cannot be read.
var buildID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
})

type fileID struct {
	Path    string
	Size    int64
	ModTime int64 // Unix nanoseconds
}

func identify(path string) (fileID, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fileID{}, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return fileID{}, err
	}
	return fileID{abs, info.Size(), info.ModTime().UnixNano()}, nil
}

// cpuModel is the "model name" of /proc/cpuinfo, or GOARCH where there is none.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return goruntime.GOARCH
}

type costCacheFile struct {
	Format int                     `json:"format"`
	Key    costKey                 `json:"key"`
	Passes []speculative.CostModel `json:"passes"`
}

// measuredCosts is a cost model and where its passes came from.
type measuredCosts struct {
	costs        speculative.CostModel
	passes, new  int    // passes pooled, of which measured by this run
	cache        string // the cache file ("" if none could be used)
	measureError error  // why the cache could not be written (reported as a note)
}

// measureCosts measures the run's cost model (runtime.MeasureCostPasses) and pools it with the
// cached passes of the same pair and machine; the pooled model is CombineCosts of them.
func measureCosts(m *models, params speculative.Params) (*measuredCosts, error) {
	fresh, err := runtime.MeasureCostPasses(m.target, m.draft, params, runtime.CostPasses)
	if err != nil {
		return nil, err
	}
	r := &measuredCosts{new: len(fresh)}
	all := fresh
	if dir := costCacheDir(); dir != "" {
		if key, err := pairKey(m, params, len(fresh[0].Verify)); err == nil {
			r.cache = filepath.Join(dir, key.file())
			all = append(readCostCache(r.cache, key, len(fresh[0].Verify)), fresh...)
			if len(all) > costCacheMax {
				all = all[len(all)-costCacheMax:]
			}
			r.measureError = writeCostCache(r.cache, &costCacheFile{Format: costCacheFormat, Key: key, Passes: all})
		}
	}
	r.passes = len(all)
	r.costs = runtime.CombineCosts(all)
	return r, r.costs.Validate(len(r.costs.Verify) - 1)
}

func pairKey(m *models, params speculative.Params, sizes int) (costKey, error) {
	t, err := identify(m.tf.Path)
	if err != nil {
		return costKey{}, err
	}
	d, err := identify(m.df.Path)
	if err != nil {
		return costKey{}, err
	}
	return costKey{Target: t, Draft: d, CPU: cpuModel(), Threads: goruntime.GOMAXPROCS(0), Kernels: kernels.Implementation(),
		Version: version, Build: buildID(), Sampled: !params.Greedy(), Sizes: sizes}, nil
}

func (k costKey) file() string {
	b, _ := json.Marshal(k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8]) + ".json"
}

// readCostCache returns the cached passes of key with sizes verify sizes; a missing, damaged
// or foreign file gives none (the cache is only an aid).
func readCostCache(path string, key costKey, sizes int) []speculative.CostModel {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var f costCacheFile
	if json.Unmarshal(b, &f) != nil || f.Format != costCacheFormat || f.Key != key {
		return nil
	}
	var out []speculative.CostModel
	for _, p := range f.Passes {
		if len(p.Verify) == sizes && p.Validate(sizes-1) == nil && !math.IsNaN(p.DraftToken) {
			out = append(out, p)
		}
	}
	return out
}

func writeCostCache(path string, f *costCacheFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	af, err := atomicfile.Create(path, true)
	if err != nil {
		return err
	}
	defer af.Abort()
	if _, err := af.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return af.Commit()
}
