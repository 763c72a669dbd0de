package session

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
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/kernels"
	"github.com/dspark-dev/dspark/runtime/speculative"
)

// The verify scheduler's cost model is measured at every start (runtime.CostPasses passes)
// and, to steady it on a shared machine, pooled with the passes of earlier runs of the same
// pair on the same machine: the last CostCacheMax passes are kept, one file per pair and
// machine.
const (
	costCacheFormat = 1
	// CostCacheMax is the most passes a cost cache file keeps.
	CostCacheMax = 30
)

// CostCache is a directory of cost-model passes, one file per pair and machine.
type CostCache struct {
	// Dir is the directory ("" : no cache).
	Dir string
	// Version is the program's version and Build identifies its build ("": ExecutableID);
	// the kernels of another build run at other speeds, so its passes are kept apart.
	Version, Build string
}

// ExecutableID identifies the running executable by its contents: a hash of the file, since
// a version string stays the same across development builds and `go build` rewrites the
// file (a new modification time) even when nothing changed. "" if it cannot be read.
var ExecutableID = sync.OnceValue(func() string {
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

// costKey identifies a pair and a machine: the two files (by path, size and modification
// time, so that a rebuilt file is a new pair without hashing hundreds of megabytes), the
// CPU, the threads, the kernel path, the program's version and build, whether rows are
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

// CPUModel is the "model name" of /proc/cpuinfo, or GOARCH where there is none.
func CPUModel() string {
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

// MeasuredCosts is a cost model and where its passes came from.
type MeasuredCosts struct {
	Costs       speculative.CostModel
	Passes, New int    // passes pooled, of which measured by this run
	Cache       string // the cache file ("" if none could be used)
	CacheError  error  // why the cache could not be written (a note for the user)
}

// MeasureCosts measures the loaded pair's cost model (runtime.MeasureCostPasses) and pools it
// with the cached passes of the same pair and machine in c (nil: none); the pooled model is
// runtime.CombineCosts of them.
func (p *Pair) MeasureCosts(params speculative.Params, c *CostCache) (*MeasuredCosts, error) {
	fresh, err := runtime.MeasureCostPasses(p.Target, p.Draft, params, runtime.CostPasses)
	if err != nil {
		return nil, err
	}
	r := &MeasuredCosts{New: len(fresh)}
	all := fresh
	if c != nil && c.Dir != "" {
		if key, err := c.key(p, params, len(fresh[0].Verify)); err == nil {
			r.Cache = filepath.Join(c.Dir, key.file())
			all = append(readCostCache(r.Cache, key, len(fresh[0].Verify)), fresh...)
			if len(all) > CostCacheMax {
				all = all[len(all)-CostCacheMax:]
			}
			r.CacheError = writeCostCache(r.Cache, &costCacheFile{Format: costCacheFormat, Key: key, Passes: all})
		}
	}
	r.Passes = len(all)
	r.Costs = runtime.CombineCosts(all)
	return r, r.Costs.Validate(len(r.Costs.Verify) - 1)
}

func (c *CostCache) key(p *Pair, params speculative.Params, sizes int) (costKey, error) {
	t, err := identify(p.TargetFile.Path)
	if err != nil {
		return costKey{}, err
	}
	d, err := identify(p.DraftFile.Path)
	if err != nil {
		return costKey{}, err
	}
	build := c.Build
	if build == "" {
		build = ExecutableID()
	}
	return costKey{Target: t, Draft: d, CPU: CPUModel(), Threads: goruntime.GOMAXPROCS(0), Kernels: kernels.Path(kernels.F32Activations).Name,
		Version: c.Version, Build: build, Sampled: !params.Greedy(), Sizes: sizes}, nil
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
