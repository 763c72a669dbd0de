package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dspark-dev/dspark/safetensors"
)

// rewriteCheckpoint rewrites dir/model.safetensors, replacing the bytes of the tensors that
// change returns new data for (same dtype and shape) and copying every other tensor as is.
func rewriteCheckpoint(dir string, change func(name string, t *safetensors.TensorInfo, data []byte) ([]byte, error)) error {
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	var srcs []safetensors.TensorSource
	for i := range f.Tensors {
		t := &f.Tensors[i]
		data, err := f.TensorData(t)
		if err != nil {
			f.Close()
			return err
		}
		nd, err := change(t.Name, t, data)
		if err != nil {
			f.Close()
			return fmt.Errorf("%s: %s: %w", path, t.Name, err)
		}
		if nd == nil {
			nd = data
		}
		if int64(len(nd)) != t.Bytes() {
			f.Close()
			return fmt.Errorf("%s: %s: new data has %d bytes, want %d", path, t.Name, len(nd), t.Bytes())
		}
		b := nd
		srcs = append(srcs, safetensors.TensorSource{Name: t.Name, Dtype: t.Dtype, Shape: t.Shape,
			Data: func(w io.Writer) error { _, err := w.Write(b); return err }})
	}
	tmp := path + ".new"
	err = safetensors.WriteFile(tmp, f.Metadata, srcs, true)
	f.Close()
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
