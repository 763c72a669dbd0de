package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/dspark-dev/dspark/runtime/kernels"
)

// commit is set at build time with -ldflags "-X main.commit=..." (make dist); when empty, the
// VCS revision that `go build` recorded in the binary is shown.
var commit = ""

// versionString is what `dspark --version` prints after "dspark version ": the version, the
// commit (and whether the tree was modified), the target, and the kernel path each activation
// precision runs on with this binary on this CPU.
func versionString() string {
	rev, modified := commit, false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified && commit == "" {
		rev += "+modified"
	}
	return fmt.Sprintf("%s (commit %s, %s %s/%s; kernels: f32 %s, bf16 %s, bf16-amx %s)",
		version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		kernels.Path(kernels.F32Activations).Name, kernels.Path(kernels.BF16Activations).Name, kernels.Path(kernels.BF16AMXActivations).Name)
}
