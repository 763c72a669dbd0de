package gguf

// Option configures how a file is read.
type Option func(*options)

type options struct {
	skipMin          uint64 // arrays with at least this many elements are skipped; 0 = none
	allowUnsupported bool
	name             string
	noMmap           bool
	maxStream        int64
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// SkipArrays makes the reader not keep arrays of minLen or more elements: their type,
// count and offset are recorded, and Value.Load reads them again from the file (while it
// is open) when they are asked for. Streams (ReadHeader) cannot reload them.
func SkipArrays(minLen int) Option {
	return func(o *options) {
		if minLen < 1 {
			minLen = 1
		}
		o.skipMin = uint64(minLen)
	}
}

// AllowUnsupported makes the reader accept tensors of unknown or removed ggml types
// instead of failing with an *UnsupportedError: such tensors get Size 0 and
// Supported false, their errors are listed in File.Unsupported, and TensorData refuses
// them. Inspectors use it to show the rest of the file.
func AllowUnsupported() Option { return func(o *options) { o.allowUnsupported = true } }

// Name sets the name used in errors for NewReader and ReadHeader (default "<reader>" and
// "<stream>").
func Name(name string) Option { return func(o *options) { o.name = name } }

// DefaultMaxStreamHeader bounds the header of a stream (ReadHeader, a pipe or FIFO, a
// decompressed .zst or .gz): real headers are a few megabytes (a 256k-token vocabulary with
// its merges is about 20 MB), while a length field in a stream cannot be checked against a
// file size and a few compressed bytes can expand to gigabytes.
const DefaultMaxStreamHeader = 256 << 20

// MaxStreamHeader sets the most header bytes a stream may take (default
// DefaultMaxStreamHeader); a larger header is an *UnsupportedError.
func MaxStreamHeader(n int64) Option { return func(o *options) { o.maxStream = n } }

// NoMmap makes Open read through the file instead of mapping it.
func NoMmap() Option { return func(o *options) { o.noMmap = true } }
