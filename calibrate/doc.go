// Package calibrate fits and stores the calibration of a DSpark draft's confidence head, so
// that the verify scheduler (speculative.Schedule) can trust its survival estimates.
//
// The head predicts, per draft position k, the chance c_k that draft k survives verification
// given that drafts 1..k-1 did; the survival of prefix k is predicted as s_k = c_1·…·c_k. A
// head trained on soft acceptance is rarely calibrated for the decoding it is used with.
// Sequential Temperature Scaling (the DSpark paper, 3.2.1) fixes that with one temperature
// per position, c_k -> sigmoid(logit(c_k) / T_k), fitted left to right by grid search so
// that the expected calibration error (ECE) of s_k against the observed survival of prefix k
// is smallest (Fit).
//
//   - Collect runs speculative decoding with full blocks on a set of prompts and records,
//     per round, the head's raw confidences and how many drafts were accepted (Samples).
//   - Fit fits the temperatures; Evaluate reports ECE and reliability tables before and after,
//     on the calibration set or a held-out one.
//   - File is a calibration: a JSON side file (ReadFile, WriteFile) naming the draft's SHA-256
//     and block size, or dspark.calibration.* keys in a copy of the draft GGUF whose tensors
//     are copied byte for byte (WriteGGUF, FromGGUF). Check refuses one made for another draft.
//   - WriteSVG and WritePNG draw a reliability diagram.
//
// A calibration is fitted for one sampling setting (greedy acceptance is an argmax match,
// sampled acceptance a coin flip, so their survival differs); a File may hold several, and
// Select picks the one for a run.
package calibrate
