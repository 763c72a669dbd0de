// Package speculative holds the model-independent math of lossless speculative decoding as
// dspark runs it (spec: dspark-k3.md sections 4-6):
//
//   - Probs, Argmax: turning a logit row into the distribution actually sampled from
//     (temperature, then top-k, then top-p, renormalized; T = 0 is greedy).
//   - Drafter: the sequential part of a DSpark block drafter. Given the backbone's logit rows
//     for one block, it adds the Markov head's bias for the previously drafted token, draws the
//     drafts left to right and asks a stop rule, before each draft, whether to draft it, from
//     the confidence head's cumulative survival (calibrated by Sequential Temperature Scaling,
//     Calibrate).
//   - StopRule: Full, Threshold, and Schedule, the verify scheduler of the DSpark paper
//     (Algorithm 1): it admits positions while they raise the expected tokens per second of a
//     measured CostModel, with the early stop that keeps it non-anticipating, and skips the
//     draft block of rounds in which even one draft would not pay.
//   - Verify, VerifyGreedy: the acceptance rule (Leviathan et al. 2023; Chen et al. 2023) that
//     makes the emitted tokens follow the target's distribution exactly, whatever the draft does.
//   - Stats: acceptance counters and the figures reported per run (acceptance rate, per-position
//     acceptance, tau).
//
// It is pure arithmetic over probability vectors: it does not run any model, read any file,
// manage KV caches or decide when generation ends. A runtime computes the logits (draft backbone
// and target verify batch), calls this package to decide which tokens to commit, and does the
// bookkeeping. The tests prove losslessness by exact enumeration of every random branch, by a
// chi-square test of the seeded sampler, and by showing that broken variants fail both (the
// Appendix A retrospective scheduler of the DSpark paper among them).
package speculative
