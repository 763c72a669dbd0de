// Package convert turns Hugging Face safetensors checkpoints into GGUF files: the DSpark
// draft (K3DSparkModel, DSpark or DFlash tensor names) as llama.cpp's `dflash` architecture
// with an MLA backbone, and Kimi-K2 / DeepSeek-V2/V3 targets as llama.cpp's `deepseek2`.
//
// Each architecture is declared as data: a table of rules mapping a source tensor name
// pattern to a GGUF name, a transform (copy, kv_b split, expert stacking) and a symbolic
// shape, plus a table of metadata keys with their exact GGUF types. One generic engine
// validates the checkpoint against those tables (listing every problem at once), builds a
// Plan (printable for --dry-run), and streams the tensors in bounded chunks, in parallel,
// into an atomically committed file.
//
// It is not a general-purpose converter: architectures outside the registry are rejected
// with the list of supported ones, and it does not quantize below Q8_0.
package convert
