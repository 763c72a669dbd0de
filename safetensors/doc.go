// Package safetensors reads and writes Hugging Face safetensors checkpoints: single files and
// sharded directories with a model.safetensors.index.json.
//
// Reading validates every rule of the format before any tensor is used (header size cap,
// JSON shape, known dtypes, contiguous offsets with no holes, overlaps or trailing bytes,
// sizes that match shapes, string-only metadata, no duplicate names) and reports violations
// as *FormatError values that name the file, the field and the byte offset. Tensor bytes are
// never read up front: Open maps the file and hands out zero-copy views (File.Data), and
// every file also offers io.SectionReader views that work on any io.ReaderAt.
//
// Writing streams: each tensor's bytes come from a callback, so a checkpoint larger than
// memory can be produced, and files appear atomically (internal/atomicfile).
//
// The package does not interpret tensor values (see internal/dtype for conversions), does not
// know model architectures, and does not read the PyTorch pickle format.
package safetensors
