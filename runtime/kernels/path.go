package kernels

import "fmt"

// path is the code that multiplies packed matrices. The paths that use float32 activations
// (all but the BF16 dot product) give identical bits; see the package documentation.
type path uint8

const (
	pathPortable path = iota // Go code (every build)
	pathAVX2                 // AVX2+FMA+F16C assembly
	pathAVX512               // AVX-512F assembly, with the AVX512_BF16 kernels when the CPU has them
)

func (p path) String() string {
	switch p {
	case pathAVX2:
		return "avx2"
	case pathAVX512:
		return "avx512"
	}
	return "portable"
}

// curPath is the path used for packed matrices; tests switch it (setPath) to run every path
// the machine has in one process.
var curPath = bestPath()

// bestPath returns the fastest path this build and CPU can run.
func bestPath() path {
	ps := cpuPaths()
	return ps[len(ps)-1]
}

// setPath selects path p for the calls that follow and returns a function that restores the
// previous one. It is a test hook: p must be one of cpuPaths(), and no call may be running.
func setPath(p path) (restore func()) {
	ok := false
	for _, q := range cpuPaths() {
		ok = ok || q == p
	}
	if !ok {
		panic(fmt.Sprintf("kernels: path %v is not available", p))
	}
	saved := curPath
	curPath = p
	return func() { curPath = saved }
}

// dotActive reports whether BF16-activation products run on the AVX512_BF16 kernels (else
// on the portable reference of that contract).
func dotActive() bool { return curPath == pathAVX512 && cpuDot }

// Path names the code that computes packed matrices' products at precision p in this
// process, for reports and logs:
//
//	F32Activations:  "avx512", "avx2" or "portable" (all give the same bits);
//	BF16Activations: "avx512bf16" (VDPBF16PS) or "portable" (the slow reference of the
//	                 same bits) for BF16 weights; other weight types use the F32 path;
//	BF16AMXActivations: "amx" (TDPBF16PS tiles) or "portable", likewise.
//
// Matrices made by NewMat and never packed always use the portable code.
func Path(p Precision) string {
	switch p {
	case BF16Activations:
		if dotActive() {
			return "avx512bf16"
		}
		return "portable"
	case BF16AMXActivations:
		if amxActive() {
			return "amx"
		}
		return "portable"
	}
	return curPath.String()
}

// Accelerated reports whether products at precision p run on hardware kernels here (for
// F32Activations: whether the path is not the portable code). A bf16 precision without them
// is computed by its portable reference, which gives the same bits but is far slower than
// the float32 path: a runtime should then keep float32 activations.
func Accelerated(p Precision) bool {
	switch p {
	case BF16Activations:
		return dotActive()
	case BF16AMXActivations:
		return amxActive()
	}
	return curPath != pathPortable
}

// Implementation names the path that multiplies packed matrices with float32 activations:
// Path(F32Activations).
func Implementation() string { return Path(F32Activations) }

// FastBF16 reports whether BF16-activation products run on hardware dot-product
// instructions here (AVX512_BF16). Without them they are computed by the portable reference,
// which gives the same bits but is far slower than the float32 path: a runtime should then
// keep float32 activations.
func FastBF16() bool { return dotActive() }

// SelectPath makes packed matrices use the named f32 path ("avx512", "avx2" or
// "portable"; all give the same bits) and, for "avx2" and "portable", the portable references
// for both bf16 precisions. It is for benchmarks and comparisons (e.g. the AVX2 path on a CPU that
// has AVX-512); it must not be called while products are running. It fails for a path this
// build or CPU lacks.
func SelectPath(name string) error {
	for _, p := range cpuPaths() {
		if p.String() == name {
			curPath = p
			return nil
		}
	}
	return fmt.Errorf("kernels: path %q is not available here (have %v)", name, cpuPaths())
}
