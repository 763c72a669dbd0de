// Package gguf reads and writes GGUF files, the container llama.cpp uses for models.
//
// The reader parses the header (metadata key/value pairs and tensor infos) of GGUF v1, v2
// and v3 files in either byte order, checks every count, length and offset against the
// bytes that actually exist before allocating, and reports malformed input as a
// *FormatError naming the file, the field and the byte offset. Large arrays (vocabularies,
// merges) are recorded where they lie and decoded only when asked for, so reading the
// metadata of a multi-gigabyte model costs about as much as reading its header bytes.
// Tensor data is never touched by the parser: Open maps the file and TensorData returns a
// zero-copy view; NewReader works over any io.ReaderAt; ReadHeader parses a stream (a
// decompressed .gguf.zst, an HTTP body) up to the end of the tensor infos, and Open reads a
// pipe or FIFO that way. Package gguf/input opens whatever a user names (files, split sets,
// pipes, compressed streams, URLs) on top of these.
//
// Errors: malformed input is a *FormatError ("gguf: FILE: offset N: FIELD: MSG", matched by
// errors.Is(err, ErrFormat)); a valid file using something this package does not handle (an
// unknown ggml type, a version above 3) an *UnsupportedError (ErrUnsupported); a shard of a
// split set that cannot be opened a *SplitError naming the set. Packages safetensors and
// tokenizer follow the same design, and safetensors names its tensor accessors as this one
// does: Tensor, TensorData, TensorReader.
//
// The writer produces exactly the layout llama.cpp's strict loader expects (tensor offsets
// are the running sum of sizes padded to the alignment, in info order, with zero padding
// after every tensor including the last), deterministically, streaming tensor data from
// callbacks so that files larger than memory can be written; WriteFile and WriteSplit write
// atomically. Split sets ("-00001-of-0000N.gguf") are read as one model and written with
// the gguf-split keys.
//
// The package knows the container, not the models: it does not interpret architecture keys
// or tensor names (see package gguf/lint for that), does not quantize or convert tensor
// data, and writes only little-endian GGUF v3.
package gguf
