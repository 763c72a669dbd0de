package demo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// EnglishPrompts are the English pair's demo prompts, written for the demo; neither the
// corpus nor any fit contains them.
var EnglishPrompts = []string{
	"The HTTP server",
	"To read a file,",
	"A slice is",
	"Each goroutine",
}

const manifestName = "manifest.json"

// Manifest records what a cached English pair was built from and the digest of every file,
// so that a later run can trust it after a cheap check and a different recipe, Go corpus or
// a damaged file is never used.
type Manifest struct {
	Format       int                  `json:"format"`
	Recipe       EnglishRecipe        `json:"recipe"`                  // the English pair's (zero for another pair)
	Pair         string               `json:"pair,omitempty"`          // the pair's name ("": english)
	Qwen35       *Qwen35Recipe        `json:"qwen35_recipe,omitempty"` // the qwen35 pair's recipe
	GoVersion    string               `json:"go_version"`
	CorpusSHA256 string               `json:"corpus_sha256"`
	CorpusBytes  int                  `json:"corpus_bytes"`
	Files        map[string]entry     `json:"files"`
	Built        string               `json:"built"` // RFC 3339 time of the build (informational)
	BuildStages  []Stage              `json:"build_stages"`
	Confidence   *ConfidenceFit       `json:"confidence"`
	Calibration  []CalibrationSummary `json:"calibration"`
}

type entry struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const manifestFormat = 1

// DefaultCacheDir returns dspark under the user's cache directory (os.UserCacheDir):
// $XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS, %LocalAppData% on Windows.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (%v); give one with --cache-dir", err)
	}
	return filepath.Join(d, "dspark"), nil
}

// pairKey names a pair's cache directory: the pair's name, its recipe's version, and a
// digest of the recipe and the Go version whose documentation is the corpus.
func pairKey(name string, version int, recipe any, goVersion string) string {
	b, _ := json.Marshal(recipe)
	h := sha256.Sum256(append(b, goVersion...))
	return fmt.Sprintf("%s-v%d-%s", name, version, hex.EncodeToString(h[:6]))
}

// pairBuild is what Open needs of a built pair: its name, its recipe (kept in the manifest
// and compared with it), and its build.
type pairBuild struct {
	name    string
	recipe  any // a pointer to the recipe, for the cache key
	ver     int
	same    func(m *Manifest) bool // the manifest records this recipe
	version func(m *Manifest) int  // the version of the recipe the manifest records
	record  func(m *Manifest)      // puts the recipe into a new manifest
	build   func(ctx context.Context, dir string, c *Corpus, progress Progress) (*EnglishPair, error)
}

func (b *pairBuild) key(goVersion string) string { return pairKey(b.name, b.ver, b.recipe, goVersion) }

// manifestPair is the manifest's pair field: empty for the English pair, whose manifests
// predate the field.
func (b *pairBuild) manifestPair() string {
	if b.name == PairEnglish {
		return ""
	}
	return b.name
}

func englishBuild(r *EnglishRecipe) *pairBuild {
	return &pairBuild{name: PairEnglish, recipe: r, ver: r.Version,
		same:    func(m *Manifest) bool { return m.Recipe == *r },
		version: func(m *Manifest) int { return m.Recipe.Version },
		record:  func(m *Manifest) { m.Recipe = *r },
		build: func(ctx context.Context, dir string, c *Corpus, progress Progress) (*EnglishPair, error) {
			return BuildEnglish(ctx, dir, *r, c, progress)
		}}
}

func qwen35Build(r *Qwen35Recipe) *pairBuild {
	return &pairBuild{name: PairQwen35, recipe: r, ver: r.Version,
		same: func(m *Manifest) bool { return m.Qwen35 != nil && *m.Qwen35 == *r },
		version: func(m *Manifest) int {
			if m.Qwen35 == nil {
				return 0
			}
			return m.Qwen35.Version
		},
		record: func(m *Manifest) { q := *r; m.Qwen35 = &q },
		build: func(ctx context.Context, dir string, c *Corpus, progress Progress) (*EnglishPair, error) {
			return BuildQwen35(ctx, dir, *r, c, progress)
		}}
}

// The demo pairs built into the cache on first use (OpenOptions.Pair).
const (
	PairEnglish = "english" // a deepseek2 target and a DSpark MLA draft (the default)
	PairQwen35  = "qwen35"  // a Qwen3.5 hybrid target and a GQA DSpark draft
)

// Pairs lists the names OpenOptions.Pair takes.
var Pairs = []string{PairEnglish, PairQwen35}

// OpenOptions select the demo pair Open puts on disk.
type OpenOptions struct {
	// Quick selects the small embedded pair (no build, no cache).
	Quick bool
	// Pair names the built pair (PairEnglish when empty).
	Pair string
	// Qwen35Recipe is the qwen35 pair's recipe (nil means DefaultQwen35).
	Qwen35Recipe *Qwen35Recipe
	// CacheDir holds the English pair ("" means DefaultCacheDir()).
	CacheDir string
	// Recipe is the English pair's recipe (the zero value means DefaultEnglish).
	Recipe *EnglishRecipe
	// Progress, if set, follows a build.
	Progress Progress
	// Context, if set, cancels a build (Ctrl-C): nothing of it is left in the cache.
	Context context.Context
}

// Open puts a demo pair on disk. The quick (embedded) pair is decompressed into a temporary
// directory that Close removes. The English pair is taken from the cache after its files
// pass the manifest's size and SHA-256 check; when it is missing, damaged or of another
// recipe or Go version, it is built (a few minutes) into a fresh directory beside it and
// moved into place only when complete, so an interrupted build never leaves a pair that a
// later run would trust.
func Open(opt OpenOptions) (*Files, error) {
	if opt.Quick {
		return openEmbedded()
	}
	var b *pairBuild
	switch opt.Pair {
	case "", PairEnglish:
		r := DefaultEnglish
		if opt.Recipe != nil {
			r = *opt.Recipe
		}
		b = englishBuild(&r)
	case PairQwen35:
		r := DefaultQwen35
		if opt.Qwen35Recipe != nil {
			r = *opt.Qwen35Recipe
		}
		b = qwen35Build(&r)
	default:
		return nil, fmt.Errorf("demo: no pair %q (the pairs: %s)", opt.Pair, strings.Join(Pairs, ", "))
	}
	cache := opt.CacheDir
	if cache == "" {
		var err error
		if cache, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	root, err := GoRoot()
	if err != nil {
		return nil, err
	}
	ver, err := goVersion(root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, b.key(ver))
	f := &Files{Name: b.name, Prompts: EnglishPrompts, Reps: 2, Cache: dir}
	if m, err := checkPair(dir, b, ver); err == nil {
		f.fill(dir, m)
		return f, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		f.Rebuilt = fmt.Sprintf("the cached pair in %s was not used (%v) and was rebuilt", dir, err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, cacheError(cache, err)
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return nil, cacheError(cache, err)
	}
	defer os.RemoveAll(tmp)
	removeStale(cache)
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	m, err := buildInto(ctx, tmp, b, root, ver, opt.Progress)
	if err != nil {
		return nil, err
	}
	// Replace whatever is at dir (a damaged pair) with the complete build.
	old := dir + ".old-" + randSuffix()
	if err := os.Rename(dir, old); err == nil {
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have just put the same pair there: use it if it checks out.
		if m2, err2 := checkPair(dir, b, ver); err2 == nil {
			f.fill(dir, m2)
			return f, nil
		}
		return nil, cacheError(cache, err)
	}
	f.Built = true
	f.fill(dir, m)
	return f, nil
}

func (f *Files) fill(dir string, m *Manifest) {
	f.Target, f.Draft = filepath.Join(dir, "target.gguf"), filepath.Join(dir, "draft.gguf")
	f.TargetSHA256, f.DraftSHA256 = m.Files["target.gguf"].SHA256, m.Files["draft.gguf"].SHA256
	f.Manifest = m
}

func cacheError(dir string, err error) error {
	return fmt.Errorf("demo pair cache %s cannot be written (%v): choose another directory with --cache-dir, or run the small embedded pair with --quick", dir, err)
}

func randSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// removeStale deletes build directories that were left behind over an hour ago (a build
// that was interrupted or killed).
func removeStale(cache string) {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !(strings.HasPrefix(e.Name(), ".build-") || strings.Contains(e.Name(), ".old-")) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
}

func goVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("the demo's English corpus comes from the Go distribution at %s: %w", root, err)
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]), nil
}

// checkPair reads dir's manifest and checks it against the recipe and Go version, and every
// file's size and SHA-256 against it. A missing pair is os.ErrNotExist.
func checkPair(dir string, pb *pairBuild, goVersion string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	switch {
	case m.Format != manifestFormat:
		return nil, fmt.Errorf("manifest format %d, want %d", m.Format, manifestFormat)
	case m.Pair != pb.manifestPair():
		return nil, fmt.Errorf("the manifest is of the %q pair, not %q", m.Pair, pb.name)
	case !pb.same(&m):
		return nil, fmt.Errorf("built from another recipe (version %d)", pb.version(&m))
	case m.GoVersion != goVersion:
		return nil, fmt.Errorf("built from the documentation of %s, this Go is %s", m.GoVersion, goVersion)
	}
	for _, name := range []string{"target.gguf", "draft.gguf"} {
		e, ok := m.Files[name]
		if !ok {
			return nil, fmt.Errorf("manifest lists no %s", name)
		}
		got, err := digest(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if got != e {
			return nil, fmt.Errorf("%s is %d bytes with SHA-256 %.12s..., the manifest says %d bytes, %.12s...", name, got.Size, got.SHA256, e.Size, e.SHA256)
		}
	}
	return &m, nil
}

func digest(path string) (entry, error) {
	s, err := fileSHA256(path)
	if err != nil {
		return entry{}, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return entry{}, err
	}
	return entry{Size: info.Size(), SHA256: s}, nil
}

// buildInto builds the pair in dir, keeps only the two GGUFs and writes the manifest last.
func buildInto(ctx context.Context, dir string, pb *pairBuild, root, ver string, progress Progress) (*Manifest, error) {
	if progress != nil {
		progress("reading the Go documentation", 0)
	}
	c, err := GoCorpus(root)
	if err != nil {
		return nil, err
	}
	p, err := pb.build(ctx, dir, c, progress)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"target-hf", "draft-hf"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return nil, err
		}
	}
	m := &Manifest{Format: manifestFormat, Pair: pb.manifestPair(), GoVersion: ver, CorpusSHA256: c.Digest, CorpusBytes: c.Bytes(),
		Files: map[string]entry{}, Built: time.Now().UTC().Format(time.RFC3339), BuildStages: p.Stages, Confidence: p.Confidence, Calibration: p.Calibration}
	pb.record(m)
	for _, name := range []string{"target.gguf", "draft.gguf"} {
		e, err := digest(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m.Files[name] = e
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, manifestName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return m, os.Rename(tmp, filepath.Join(dir, manifestName))
}
