package convert

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"math"
	"path/filepath"
	"strings"
)

// roundedCount renders a parameter count the way llama.cpp's converter does in file names:
// scaled to K/M/B/T and printed with enough decimals for at least two significant digits
// ("2.4B", "16B", "232M", "1.0T").
func roundedCount(n uint64) string {
	x := float64(n)
	var scaled float64
	var suffix string
	switch {
	case x > 1e12:
		scaled, suffix = x*1e-12, "T"
	case x > 1e9:
		scaled, suffix = x*1e-9, "B"
	case x > 1e6:
		scaled, suffix = x*1e-6, "M"
	default:
		scaled, suffix = x*1e-3, "K"
	}
	digits := len(strings.TrimLeft(fmt.Sprint(int64(math.RoundToEven(scaled))), "0"))
	fix := 2 - digits
	if fix < 0 {
		fix = 0
	}
	return fmt.Sprintf("%.*f%s", fix, scaled, suffix)
}

// SizeLabel returns llama.cpp's size label: the rounded total for a dense model,
// "{experts}x{rounded shared + one expert}" for a mixture of experts.
func SizeLabel(total, shared, perExpert uint64, experts int64) string {
	if experts > 0 {
		return fmt.Sprintf("%dx%s", experts, roundedCount(shared+perExpert))
	}
	return roundedCount(total)
}

// DefaultOutName builds llama.cpp's default file name Name-SizeLabel-Type.gguf.
func DefaultOutName(name, sizeLabel string, t gguf.GGMLType) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "ggml-model"
	}
	name = strings.NewReplacer(" ", "-", "/", "-").Replace(name)
	s := name
	if sizeLabel != "" {
		s += "-" + sizeLabel
	}
	return s + "-" + t.String() + ".gguf"
}

// modelName picks general.name: the last component of config.json's _name_or_path when it
// has one, otherwise the checkpoint directory's name.
func modelName(c *Config, dir string) string {
	if v, ok := c.lookup("_name_or_path"); ok {
		if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
			s = strings.TrimRight(strings.TrimSpace(s), "/")
			return s[strings.LastIndex(s, "/")+1:]
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return filepath.Base(abs)
}
