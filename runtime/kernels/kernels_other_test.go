//go:build !amd64 || purego || noasm

package kernels

// benchPaths lists the assembly paths of this build: none.
func benchPaths() []benchPath { return nil }

// amxOn is false: this build has no AMX kernels.
func amxOn() bool { return false }
