package synth

import (
	"testing"
)

// FuzzParseTargetConfig: any bytes as a target config.json give a paired target or an error,
// never a panic, and an accepted target always leaves room for the draft's special ids.
func FuzzParseTargetConfig(f *testing.F) {
	f.Add([]byte(`{"vocab_size":1024,"hidden_size":64,"num_hidden_layers":3,"bos_token_id":992,"pad_token_id":1023}`))
	f.Add([]byte(`{"vocab_size":3,"hidden_size":1,"num_hidden_layers":1,"bos_token_id":0,"pad_token_id":2}`))
	f.Add([]byte(`{"vocab_size":1024,"hidden_size":64,"num_hidden_layers":3,"bos_token_id":960}`)) // Qwen3: no pad
	f.Add([]byte(`{"vocab_size":-1}`))
	f.Add([]byte(`{"vocab_size":1e300,"hidden_size":64}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseTargetConfig("config.json", b)
		if err != nil {
			return
		}
		if p.Vocab < 3 || p.Hidden <= 0 || p.Layers <= 0 || p.Bos+imEndOffset >= p.Vocab || p.Pad >= p.Vocab || p.Bos < 0 || p.Pad < 0 {
			t.Fatalf("accepted %+v", p)
		}
		if _, err := draftConfigFor(DraftOptions{Preset: Tiny}, p); err != nil && p.Layers >= 3 {
			t.Fatalf("valid target %+v rejected: %v", p, err)
		}
	})
}
