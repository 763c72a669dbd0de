// Package safetensors reads and writes Hugging Face safetensors checkpoints: single files and
// sharded directories with a model.safetensors.index.json.
//
// Reading validates every rule of the format before any tensor is used (header size cap,
// JSON shape, known dtypes, contiguous offsets with no holes, overlaps or trailing bytes,
// sizes that match shapes, string-only metadata, no duplicate names) and reports violations
// as *FormatError values ("safetensors: PATH: offset N: FIELD: MSG", matched by
// errors.Is(err, ErrFormat)) that name the file, the field and the byte offset; a dtype it
// does not know is an *UnsupportedError (ErrUnsupported). The design is package gguf's.
//
// Tensor accessors are named and behave as gguf's: Tensor(name) looks a tensor up,
// TensorData(t) returns its bytes (a zero-copy view of the mapping for a File made by Open,
// a copy for one made by NewReader), TensorReader(t) an io.SectionReader over them; after
// Close both fail with ErrClosed. A Checkpoint offers the same three over all its shards.
//
// Writing streams: each tensor's bytes come from a callback, so a checkpoint larger than
// memory can be produced, and files appear atomically (internal/atomicfile).
//
// The package does not interpret tensor values (see internal/dtype for conversions), does not
// know model architectures, and does not read the PyTorch pickle format.
package safetensors
