package main

import (
	"fmt"
	"io"
)

// runDemo runs the embedded demo pair.
func runDemo(w io.Writer, f *runFlags) error {
	return fmt.Errorf("no --target given and the embedded demo pair is not built into this binary yet")
}

// runDraftOnly times one draft block of a draft file on synthetic context features.
func runDraftOnly(w io.Writer, f *runFlags) error {
	return fmt.Errorf("--draft-only is not implemented yet")
}
