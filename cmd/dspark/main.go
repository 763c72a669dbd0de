// Command dspark converts, inspects and runs speculative-decoding draft models in GGUF.
//
// Exit codes: 0 success, 1 failure (bad input, failed check, I/O error), 2 usage error
// (unknown command or flag, wrong number of arguments), 130/143 interrupted by
// SIGINT/SIGTERM (nothing left behind). See docs/cli.md.
package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/internal/atomicfile"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes shared by every subcommand.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks an error caused by how the command was invoked rather than by its input.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exactArgs is cobra.ExactArgs that reports a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// maxArgs is cobra.MaximumNArgs that reports a usage error.
func maxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes at most %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

var rootCmd = &cobra.Command{
	Use:   "dspark",
	Short: "Convert, inspect and run DSpark/DFlash speculative-decoding draft models in GGUF",
	Long: `dspark converts Hugging Face checkpoints of DSpark/DFlash draft models (MLA and Qwen3-style
GQA) and their targets (Kimi-K2/DeepSeek-V3-style and Qwen3) into GGUF, inspects and lints
GGUF files, and runs a pure-Go reference runtime that proves a draft drafts and the target
verifies it losslessly.`,
	Version:       versionString(),
	SilenceUsage:  true,
	SilenceErrors: true,
	Args:          func(cmd *cobra.Command, args []string) error { return unknownCommand(cmd, args) },
	RunE:          func(cmd *cobra.Command, args []string) error { return cmd.Help() },
}

func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

// execute runs the CLI with args and returns the process exit code.
func execute(args []string) int {
	rootCmd.SetArgs(args)
	rootCmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{plainFlagError(err)} })
	err := rootCmd.Execute()
	if err == nil {
		return exitOK
	}
	stderr := rootCmd.ErrOrStderr()
	fmt.Fprintf(stderr, "dspark: %v\n", err)
	code := exitCode(err)
	if code == exitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", rootCmd.Name())
	}
	return code
}

// strconvFlagError matches pflag's message for a value its strconv parse refused.
var strconvFlagError = regexp.MustCompile(`^invalid argument (".*") for "(.*)" flag: strconv\.Parse(Uint|Int|Float|Bool): parsing ".*": (.*)$`)

// plainFlagError says a flag value of the wrong kind in plain words, without Go's strconv
// text: `--seed "abc": not an unsigned integer (invalid syntax)`.
func plainFlagError(err error) error {
	m := strconvFlagError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	kind := map[string]string{"Uint": "an unsigned integer", "Int": "an integer", "Float": "a number", "Bool": "true or false"}[m[3]]
	flag := m[2]
	if i := strings.Index(flag, "--"); i >= 0 {
		flag = flag[i:] // "-s, --seed" -> "--seed"
	}
	return fmt.Errorf("%s %s: not %s (%s)", flag, m[1], kind, m[4])
}

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ee exitCodeError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ie *atomicfile.InterruptedError
	if errors.As(err, &ie) {
		return ie.ExitCode() // 130 for SIGINT, 143 for SIGTERM, as if the signal had ended the process
	}
	return exitFailure
}

// exitCodeError carries an explicit exit code (for example a failed --check, exit 1,
// after its findings were already printed).
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string { return e.err.Error() }
func (e exitCodeError) Unwrap() error { return e.err }
