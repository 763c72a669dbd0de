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
	Recipe       EnglishRecipe        `json:"recipe"`
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

// pairKey names a pair's cache directory: a digest of the recipe and the Go version whose
// documentation is the corpus.
func pairKey(r *EnglishRecipe, goVersion string) string {
	b, _ := json.Marshal(r)
	h := sha256.Sum256(append(b, goVersion...))
	return fmt.Sprintf("english-v%d-%s", r.Version, hex.EncodeToString(h[:6]))
}

// OpenOptions select the demo pair Open puts on disk.
type OpenOptions struct {
	// Quick selects the small embedded pair (no build, no cache).
	Quick bool
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
	r := DefaultEnglish
	if opt.Recipe != nil {
		r = *opt.Recipe
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
	dir := filepath.Join(cache, pairKey(&r, ver))
	f := &Files{Name: "english", Prompts: EnglishPrompts, Reps: 2, Cache: dir}
	if m, err := checkPair(dir, &r, ver); err == nil {
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
	m, err := buildInto(ctx, tmp, &r, root, ver, opt.Progress)
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
		if m2, err2 := checkPair(dir, &r, ver); err2 == nil {
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
func checkPair(dir string, r *EnglishRecipe, goVersion string) (*Manifest, error) {
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
	case m.Recipe != *r:
		return nil, fmt.Errorf("built from another recipe (version %d)", m.Recipe.Version)
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
func buildInto(ctx context.Context, dir string, r *EnglishRecipe, root, ver string, progress Progress) (*Manifest, error) {
	if progress != nil {
		progress("reading the Go documentation", 0)
	}
	c, err := GoCorpus(root)
	if err != nil {
		return nil, err
	}
	p, err := BuildEnglish(ctx, dir, *r, c, progress)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"target-hf", "draft-hf"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return nil, err
		}
	}
	m := &Manifest{Format: manifestFormat, Recipe: *r, GoVersion: ver, CorpusSHA256: c.Digest, CorpusBytes: c.Bytes(),
		Files: map[string]entry{}, Built: time.Now().UTC().Format(time.RFC3339), BuildStages: p.Stages, Confidence: p.Confidence, Calibration: p.Calibration}
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
