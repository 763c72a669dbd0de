// Package atomicfile writes a file so that readers see either nothing or the complete file:
// data goes to a temporary file in the destination directory, which is synced and renamed
// over the destination only on Commit. Abort (or a process killed mid-write) leaves no file
// under the destination name; Abort also removes the temporary file.
//
// On SIGINT or SIGTERM the pending temporary files are closed and removed at once; from then
// on every write, Commit and Create fails with an *InterruptedError (errors.Is
// ErrInterrupted), so a writer reports the interruption instead of a confusing "file already
// closed", and its program can exit with 128 + the signal number. The signal handler gives
// such a program a few seconds to do so (a second signal ends it at once), then exits with
// that status itself; with no write pending it exits at once.
//
// A command that does long work besides writing (decoding, verifying an output) calls Watch:
// it gets a channel closed on the signal and is given the same grace to stop and report what
// it did. This package is the one place dspark handles SIGINT and SIGTERM.
//
// It is not a lock: two writers of the same destination both succeed, the last rename wins.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrExists is returned by Create when the destination exists and overwrite was not allowed.
var ErrExists = errors.New("destination exists (use --force to overwrite)")

// ErrInterrupted is matched (errors.Is) by every *InterruptedError.
var ErrInterrupted = errors.New("interrupted")

// InterruptedError is returned by the writes, Commit and Create after the process received
// SIGINT or SIGTERM: the temporary files were removed and nothing is left under the
// destination names.
type InterruptedError struct {
	Signal syscall.Signal
}

// Error says which signal interrupted the write and that nothing was left behind.
func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted by %s; the partial output was removed", signalName(e.Signal))
}

// Is makes errors.Is(err, ErrInterrupted) true.
func (e *InterruptedError) Is(target error) bool { return target == ErrInterrupted }

// SignalName is "SIGINT" or "SIGTERM".
func (e *InterruptedError) SignalName() string { return signalName(e.Signal) }

// ExitCode is the conventional exit status of a process ended by the signal: 128 + its
// number (130 for SIGINT, 143 for SIGTERM).
func (e *InterruptedError) ExitCode() int { return 128 + int(e.Signal) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Interrupted returns the *InterruptedError once SIGINT or SIGTERM was caught (with a
// handler installed by Create or Watch), else nil.
func Interrupted() error { return interrupted() }

// Watch installs the signal handler (if Create has not yet) and returns a channel closed
// when SIGINT or SIGTERM arrives. Until release is called the handler treats the caller as
// a pending write: it lets the program stop and exit by itself for a few seconds (a second
// signal ends it at once) instead of exiting at once.
func Watch() (interrupt <-chan struct{}, release func()) {
	sigOnce.Do(watchSignals)
	watchers.Add(1)
	var once sync.Once
	return sigDone, func() { once.Do(func() { watchers.Add(-1) }) }
}

// interrupted returns the *InterruptedError once a signal was caught, else nil.
func interrupted() error {
	if s := caught.Load(); s != 0 {
		return &InterruptedError{Signal: syscall.Signal(s)}
	}
	return nil
}

// check turns the error of an operation on the temporary file into an *InterruptedError
// when the process was interrupted (the handler closed the file under the writer).
func check(err error) error {
	if err == nil {
		return nil
	}
	if ie := interrupted(); ie != nil {
		return ie
	}
	return err
}

// File is a pending atomic write. It implements io.Writer, io.WriterAt, io.StringWriter and
// io.ReaderFrom (which report interruptions as *InterruptedError), and io.Seeker through
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
	if err := interrupted(); err != nil {
		mu.Unlock()
		return nil, err
	}
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
		return nil, check(fmt.Errorf("create temporary file for %s: %w", dest, err))
	}
	return af, nil
}

// Dest returns the destination path.
func (f *File) Dest() string { return f.dest }

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, check(err)
}

// WriteAt writes to the temporary file at off.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, check(err)
}

// WriteString writes s to the temporary file.
func (f *File) WriteString(s string) (int, error) {
	n, err := f.File.WriteString(s)
	return n, check(err)
}

// ReadFrom copies r into the temporary file (io.Copy uses it).
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	n, err := f.File.ReadFrom(r)
	return n, check(err)
}

// Commit syncs the temporary file, closes it and renames it to the destination. After an
// interruption it renames nothing and returns an *InterruptedError.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: Commit after Commit or Abort")
	}
	if err := f.File.Sync(); err != nil {
		f.Abort()
		return check(fmt.Errorf("sync %s: %w", f.dest, explain(err)))
	}
	if err := f.File.Close(); err != nil {
		f.Abort()
		return check(fmt.Errorf("close %s: %w", f.dest, explain(err)))
	}
	// Rename under the handler's lock: either the signal came first (and the file is gone)
	// or the complete file is in place before the handler runs.
	mu.Lock()
	if err := interrupted(); err != nil {
		delete(pending, f)
		mu.Unlock()
		f.done = true
		os.Remove(f.File.Name())
		return err
	}
	if err := os.Rename(f.File.Name(), f.dest); err != nil {
		mu.Unlock()
		f.Abort()
		return fmt.Errorf("rename to %s: %w", f.dest, err)
	}
	delete(pending, f)
	mu.Unlock()
	f.done = true
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
	case isAny(err, noSpaceErrs):
		return &explained{"no space left on device (the output needs more free disk space)", err}
	case isAny(err, tooLargeErrs):
		return &explained{"file too large for this file system or ulimit -f", err}
	case isAny(err, quotaErrs):
		return &explained{"disk quota exceeded", err}
	}
	return err
}

// explained is an I/O error said in plain words: its message replaces the system's (which
// would repeat it and name the temporary file, not the output); errors.Is still sees it.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// The set of pending files, removed on SIGINT/SIGTERM.
var (
	mu      sync.Mutex
	pending = map[*File]struct{}{}
	sigOnce sync.Once
	caught  atomic.Int32 // the signal caught, 0 before

	watchers atomic.Int32          // Watch callers not yet released
	sigDone  = make(chan struct{}) // closed when the signal is caught
)

// exitGrace is how long the signal handler lets a program whose writes it interrupted
// report the interruption and exit by itself.
const exitGrace = 5 * time.Second

// watchSignals removes every pending temporary file on SIGINT or SIGTERM and makes later
// writes fail with *InterruptedError. If writes were pending, their program is given
// exitGrace (or until a second signal) to exit by itself; then, or at once when nothing was
// pending, the handler exits with 128 + the signal number (130 or 143).
func watchSignals() {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		sig := syscall.SIGINT
		if s == syscall.SIGTERM {
			sig = syscall.SIGTERM
		}
		mu.Lock()
		caught.Store(int32(sig)) // before closing, so a writer that sees the close sees this
		close(sigDone)
		hadPending := len(pending) > 0 || watchers.Load() > 0
		for p := range pending {
			p.File.Close()
			os.Remove(p.File.Name())
			delete(pending, p)
		}
		mu.Unlock()
		if hadPending {
			select {
			case <-ch:
			case <-time.After(exitGrace):
			}
		}
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		os.Exit(128 + int(sig))
	}()
}

func unregister(f *File) {
	mu.Lock()
	delete(pending, f)
	mu.Unlock()
}
