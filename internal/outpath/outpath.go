// Package outpath refuses an output that is one of a command's inputs: every command that
// writes (convert, synth, calibrate) asks it about each output before any work, so that
// --force can replace an old output but never the file or checkpoint being read.
//
// It compares files by identity (device and inode, os.SameFile), not by name: a symlink, a
// hard link, "./x" and "x" are all caught. It is not a lock: it does not stop another
// process from writing an input meanwhile.
package outpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ConflictError is an output that is one of the inputs.
type ConflictError struct {
	Flag   string // the output's flag, e.g. "-o"
	Output string // the output path as given
	Input  string // the input it is (a file), or that holds it (a directory)
	// InDir is the input directory's file the output is, when Input is a directory.
	InDir string
}

// Error names the output, the input and why they collide.
func (e *ConflictError) Error() string {
	if e.InDir != "" {
		return fmt.Sprintf("%s %s: it is %s, a file of the input %s; writing it would destroy the input (choose another output; --force does not change this)", e.Flag, e.Output, e.InDir, e.Input)
	}
	return fmt.Sprintf("%s %s: it is the input %s; writing it would destroy the input (choose another output; --force does not change this)", e.Flag, e.Output, e.Input)
}

// Check returns a *ConflictError if the output out (named by flag in the message) is the
// same file as one of inputs, is one of the files of an input that is a directory (a
// checkpoint: every file directly inside it but GGUF files, which no checkpoint reader
// reads, so that a re-run may replace its own earlier output there), or, when out is a
// directory, is an input directory itself or holds an input file directly. An output that does not exist
// yet is no input. Inputs that cannot be stat'ed are skipped (their own reader reports
// them).
func Check(flag, out string, inputs ...string) error {
	ost, err := os.Stat(out)
	if err != nil {
		return nil
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		ist, err := os.Stat(in)
		if err != nil {
			continue
		}
		if os.SameFile(ost, ist) {
			return &ConflictError{Flag: flag, Output: out, Input: in}
		}
		if ist.IsDir() && !ost.IsDir() {
			if f := sameInDir(ost, in); f != "" {
				return &ConflictError{Flag: flag, Output: out, Input: in, InDir: f}
			}
		}
		if ost.IsDir() && !ist.IsDir() {
			if f := sameInDir(ist, out); f != "" {
				return &ConflictError{Flag: flag, Output: out, Input: in, InDir: f}
			}
		}
	}
	return nil
}

// sameInDir returns the path of the file directly inside dir that is st, or "".
func sameInDir(st os.FileInfo, dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if strings.Contains(strings.ToLower(e.Name()), ".gguf") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if est, err := os.Stat(p); err == nil && os.SameFile(st, est) {
			return p
		}
	}
	return ""
}
