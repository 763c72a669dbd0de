// Package atomicfile writes a file so that readers see either nothing or the complete file:
// data goes to a temporary file in the destination directory, which is synced and renamed
// over the destination only on Commit. Abort (or a process killed mid-write) leaves no file
// under the destination name; Abort also removes the temporary file.
//
// It is not a lock: two writers of the same destination both succeed, the last rename wins.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrExists is returned by Create when the destination exists and overwrite was not allowed.
var ErrExists = errors.New("destination exists (use --force to overwrite)")

// File is a pending atomic write. It implements io.Writer, io.WriterAt and io.Seeker through
// the embedded *os.File.
type File struct {
	*os.File
	dest string
	done bool
}

// Create starts an atomic write of dest. If overwrite is false and dest exists, it returns
// an error wrapping ErrExists. The temporary file lives beside dest (same file system, so the
// final rename is atomic) and is removed if the process receives SIGINT or SIGTERM before
// Commit or Abort.
func Create(dest string, overwrite bool) (*File, error) {
	if !overwrite {
		if _, err := os.Lstat(dest); err == nil {
			return nil, fmt.Errorf("%s: %w", dest, ErrExists)
		}
	}
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	sigOnce.Do(watchSignals)
	// Create and register under the lock the signal handler takes, so a SIGINT arriving
	// between the two still finds (and removes) the new file.
	mu.Lock()
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("create temporary file for %s: %w", dest, err)
	}
	af := &File{File: f, dest: dest}
	pending[af] = struct{}{}
	mu.Unlock()
	// CreateTemp makes the file 0600; a finished output should be readable like any other file.
	if err := f.Chmod(0o644); err != nil {
		af.Abort()
		return nil, fmt.Errorf("create temporary file for %s: %w", dest, err)
	}
	return af, nil
}

// Dest returns the destination path.
func (f *File) Dest() string { return f.dest }

// Commit syncs the temporary file, closes it and renames it to the destination.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: Commit after Commit or Abort")
	}
	if err := f.File.Sync(); err != nil {
		f.Abort()
		return fmt.Errorf("sync %s: %w", f.dest, explain(err))
	}
	if err := f.File.Close(); err != nil {
		f.Abort()
		return fmt.Errorf("close %s: %w", f.dest, explain(err))
	}
	if err := os.Rename(f.File.Name(), f.dest); err != nil {
		f.Abort()
		return fmt.Errorf("rename to %s: %w", f.dest, err)
	}
	f.done = true
	unregister(f)
	if d, err := os.Open(filepath.Dir(f.dest)); err == nil {
		_ = d.Sync() // make the rename durable; not all file systems support it
		d.Close()
	}
	return nil
}

// Abort discards the write: the temporary file is closed and removed. It is safe to call
// after Commit (it then does nothing), so `defer f.Abort()` is the usual pattern.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	unregister(f)
	f.File.Close()
	os.Remove(f.File.Name())
}

// Explain rewrites a disk-full or file-too-large error into a clear message; other errors are
// returned unchanged. Writers should pass write errors through it.
func Explain(err error) error { return explain(err) }

func explain(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("no space left on device (the output needs more free disk space): %w", err)
	case errors.Is(err, syscall.EFBIG):
		return fmt.Errorf("file too large for this file system or ulimit -f: %w", err)
	case errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("disk quota exceeded: %w", err)
	}
	return err
}

// The set of pending files, removed on SIGINT/SIGTERM.
var (
	mu      sync.Mutex
	pending = map[*File]struct{}{}
	sigOnce sync.Once
)

// watchSignals removes every pending temporary file on SIGINT or SIGTERM, then exits with
// the conventional status (130 or 143).
func watchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		mu.Lock()
		for p := range pending {
			p.File.Close()
			os.Remove(p.File.Name())
		}
		mu.Unlock()
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}

func unregister(f *File) {
	mu.Lock()
	delete(pending, f)
	mu.Unlock()
}
