package main

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"
)

// execFresh runs cmd (a freshly built command, so flag values do not leak between runs) with
// args, as main would, and returns its stdout+stderr and error.
func execFresh(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	err := cmd.Execute()
	return out.String(), err
}
