package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// Files is a demo pair on disk, ready to load, with the prompts the demo runs it on and
// what a report may say about it (its name and digests: never a path that Close removes).
type Files struct {
	Name                      string   // the pair, for reports ("embedded": compiled into dspark)
	Target, Draft             string   // GGUF paths, valid until Close
	TargetSHA256, DraftSHA256 string   // hex SHA-256 of the two GGUF files
	Prompts                   []string // the demo's prompts (held out from the draft's fit)
	Reps                      int      // how many times the demo should time each decode

	// English pair only.
	Cache    string    // the pair's cache directory
	Built    bool      // built by this Open (it was not in the cache)
	Rebuilt  string    // why a cached pair was not used, when it was rebuilt
	Manifest *Manifest // what the pair was built from

	dir string // removed by Close
}

// openEmbedded puts the embedded pair on disk, decompressed into a temporary directory that
// Close removes.
func openEmbedded() (*Files, error) {
	dir, err := os.MkdirTemp("", "dspark-demo-")
	if err != nil {
		return nil, err
	}
	f := &Files{Name: "embedded", Prompts: Prompts, Reps: 5, dir: dir}
	if f.Target, f.Draft, err = Extract(dir); err == nil {
		if f.TargetSHA256, err = fileSHA256(f.Target); err == nil {
			f.DraftSHA256, err = fileSHA256(f.Draft)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return f, nil
}

// Close removes what Open wrote into a temporary directory (nothing for a cached pair).
func (f *Files) Close() error {
	if f.dir == "" {
		return nil
	}
	return os.RemoveAll(f.dir)
}

func fileSHA256(path string) (string, error) {
	r, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
