// Package demo builds and embeds the demo pair that `dspark run` uses when it is given no
// model: a small deepseek2 target and a DSpark draft derived from it, both produced by the
// project's own synth and convert, stored zstd-compressed and embedded with go:embed.
//
// The draft is derived honestly from its target (see Build): its Markov head is a rank-64
// factorization of the target's own next-token log-probabilities, measured by running the
// target, and nothing is fitted to the demo's prompts (Prompts), which the fit never sees.
package demo

// Prompts are the demo's text prompts. The fit uses seeded random token prompts instead, so
// these are held out.
var Prompts = []string{
	"The weather in Paris is",
	"我们今天去公园散步，",
	"Numbers like 42 and 7 are",
	"Once upon a time, a small model",
}
