// Package synth writes synthetic Hugging Face checkpoints with the real schemas of the
// models dspark handles: a Kimi-K2-style DeepseekV3ForCausalLM target (config.json,
// safetensors weights, a trained byte-level BPE tiktoken.model, tokenizer_config.json,
// generation_config.json) and a K3DSparkModel draft paired with such a target (the exact
// 68-tensor roster and every config field of the Kimi-K3 DSpark checkpoint), at three sizes:
// tiny (unit tests), small (runtime benchmarks) and k3-full (the draft at its real shapes,
// streamed to disk with bounded memory). For Qwen3 checkpoints it writes the tokenizer files
// (WriteQwen3Tokenizer: tokenizer.json with Qwen3's added tokens and tokenizer_config.json).
//
// Every value is a pure function of (seed, tensor name, element index), see Generator, so
// the same seed gives byte-identical files, tensors can be produced independently and in any
// order, and memory does not grow with the model. Deliberately broken variants (Break) give
// the converter's error paths something real to reject.
//
// It is not a model: the weights are pseudo-random at realistic scales (so forward passes
// stay finite), not trained, and the text the tokenizer is trained on is generated word
// salad. It is not a reader or a validator either; read checkpoints with package safetensors.
package synth
