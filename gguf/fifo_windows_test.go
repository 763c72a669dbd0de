package gguf

import "errors"

// mkfifo: Windows has named pipes, but not in the file system's namespace.
func mkfifo(string) error { return errors.ErrUnsupported }
