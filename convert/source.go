package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/safetensors"
)

// checkpoint is the converter's view of a source checkpoint: the tensor roster and
// zero-copy access to each tensor's bytes.
type checkpoint interface {
	Tensors() []SrcTensor
	Data(name string) ([]byte, error)
	// Mapped reports whether Data returns views of read-only shared file mappings.
	Mapped() bool
	Close() error
}

// stCheckpoint adapts a safetensors.Checkpoint.
type stCheckpoint struct{ c *safetensors.Checkpoint }

func openCheckpoint(dir string) (checkpoint, error) {
	c, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	return stCheckpoint{c}, nil
}

func (s stCheckpoint) Tensors() []SrcTensor {
	var out []SrcTensor
	for _, n := range s.c.Names() {
		t, _ := s.c.Tensor(n)
		out = append(out, SrcTensor{Name: t.Name, Dtype: t.Dtype, Shape: t.Shape, File: t.File})
	}
	return out
}

func (s stCheckpoint) Data(name string) ([]byte, error) {
	t, ok := s.c.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", s.c.Dir, name)
	}
	return s.c.TensorData(t)
}

func (s stCheckpoint) Mapped() bool { return true }

func (s stCheckpoint) Close() error { return s.c.Close() }
