package main

// vecKernels emits the vector kernels of attention (filled in below).
func (g *gen) vecKernels() {}

// vecDecls emits their Go declarations.
func (g *gen) vecDecls() {}
