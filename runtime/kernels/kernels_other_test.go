//go:build !amd64 || purego || noasm

package kernels

// benchPaths lists the assembly paths of this build: none.
func benchPaths() []benchPath { return nil }
