// Package conformance holds the test that the GGUF declarations (gguf/schema), the
// converter and the runtime agree: every key and tensor a declaration lists is written by
// convert for some checkpoint or marked as never written (with the reason), and read or
// bound by the runtime or marked as never read or run. It has no code of its own.
package conformance
