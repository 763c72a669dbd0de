package drafts

import (
	"fmt"
	"strings"
)

// Row is one normalized field as text: its JSON name, its value ("unknown" when null) and
// where it came from (or why it is unknown).
type Row struct {
	Name, Value, From string
}

func row[T any](name string, f Field[T]) Row {
	if f.Value == nil {
		return Row{Name: name, Value: "unknown", From: f.Reason}
	}
	val := fmt.Sprint(*f.Value)
	if s, ok := any(*f.Value).([]int64); ok {
		parts := make([]string, len(s))
		for i, x := range s {
			parts[i] = fmt.Sprint(x)
		}
		val = "[" + strings.Join(parts, ", ") + "]"
	}
	return Row{Name: name, Value: val, From: f.From}
}

// Rows returns the View's fields in the order `inspect` shows them.
func (v *View) Rows() []Row {
	rows := []Row{
		row("backbone", v.Backbone),
		row("layers", v.Layers),
		row("heads", v.Heads),
		row("kv_heads", v.KVHeads),
		row("key_length", v.KeyLength),
		row("value_length", v.ValueLength),
		row("hidden", v.Hidden),
		row("embedding_length_out", v.HiddenOut),
		row("vocab", v.Vocab),
		row("block_size", v.BlockSize),
		row("sample_from_anchor", v.SampleFromAnchor),
		row("causal", v.Causal),
		row("target_layers_hf", v.TapsHF),
		row("target_layers_llama", v.TapsLlama),
		row("target_hidden", v.TargetHidden),
		row("target_layer_count", v.TargetLayerCount),
		row(v.MaskRole+"_token", v.MaskToken),
		row("markov_rank", v.MarkovRank),
		row("markov_type", v.MarkovType),
		row("confidence", v.Confidence),
		row("confidence_width", v.ConfidenceWidth),
		row("embedding", v.Embedding),
		row("output_head", v.OutputHead),
		row("sliding_window", v.SlidingWindow),
		row("sliding_window_pattern", v.SlidingPattern),
	}
	for _, h := range v.HeadTypes {
		rows = append(rows, Row{Name: "type of " + h.Role, Value: h.Type, From: h.Tensor})
	}
	return rows
}
