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

// KernelPath is the code that computes packed matrices' products at one activation
// precision in this process.
type KernelPath struct {
	// Name names it, for reports and logs:
	//
	//	F32Activations:  "avx512", "avx2" or "portable" (all give the same bits);
	//	BF16Activations: "avx512bf16" (VDPBF16PS) or "portable" (the slow reference of the
	//	                 same bits) for BF16 weights; other weight types use the F32 path;
	//	BF16AMXActivations: "amx" (TDPBF16PS tiles) or "portable", likewise;
	//	Q8Activations:   "avx512vnni" on the AVX-512 path of a CPU with AVX-512 BW, VBMI and
	//	                 VNNI (kernels for Q8_0, Q4_K, Q5_K and Q6_K), "avx2" on the AVX2 path
	//	                 (Q4_K, Q6_K), else "portable"; the types without kernels there run the
	//	                 portable reference (Q8Accelerated says which have them).
	Name string
	// Accelerated says whether it runs on hardware kernels (for F32Activations: whether it is
	// not the portable code). A bf16 precision without them is computed by its portable
	// reference, which gives the same bits but is far slower than the float32 path: a runtime
	// should then keep float32 activations.
	Accelerated bool
}

// String returns the path's name.
func (k KernelPath) String() string { return k.Name }

// Path says which code computes packed matrices' products at precision p here, and whether
// it is hardware-accelerated: the one question of which kernel path runs (SelectPath changes
// it, for benchmarks). Matrices made by NewMat and never packed always use the portable code.
func Path(p Precision) KernelPath {
	switch p {
	case BF16Activations:
		if dotActive() {
			return KernelPath{"avx512bf16", true}
		}
		return KernelPath{"portable", false}
	case BF16AMXActivations:
		if amxActive() {
			return KernelPath{"amx", true}
		}
		return KernelPath{"portable", false}
	case Q8Activations:
		return q8Path()
	}
	return KernelPath{curPath.String(), curPath != pathPortable}
}

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
