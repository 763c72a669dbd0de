// Package testmodel builds tiny deepseek2 targets and dflash MLA drafts directly as GGUF
// files for the runtime's tests, and holds their independent float64 references (plain
// loops, decompressed attention, written from the specs and sharing no code with the
// runtime). Every width differs, so a transposed or mis-sliced tensor cannot pass.
package testmodel
