package convert

import (
	"encoding/json"
	"testing"
)

// FuzzConfig feeds arbitrary bytes to the config.json parser and to both architectures'
// config readers (with an empty roster) and, when they accept it, to the rule expansion.
// Nothing may panic; accepted configs must produce range-checked metadata.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(k3Config))
	f.Add([]byte(`{"architectures":["DeepseekV3ForCausalLM"],"hidden_size":64,"intermediate_size":96,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":4,"q_lora_rank":40,"kv_lora_rank":24,"qk_nope_head_dim":16,"qk_rope_head_dim":8,
"v_head_dim":12,"vocab_size":1024,"rms_norm_eps":1e-6,"max_position_embeddings":4096,"rope_theta":50000,
"rope_scaling":{"type":"yarn","factor":32,"original_max_position_embeddings":4096,"mscale_all_dim":1},
"n_routed_experts":8,"num_experts_per_tok":2,"n_shared_experts":1,"moe_intermediate_size":32,"first_k_dense_replace":1,
"n_group":1,"topk_group":1,"scoring_func":"sigmoid","topk_method":"noaux_tc","num_nextn_predict_layers":1,
"quantization_config":{"quant_method":"fp8","weight_block_size":[128,128]}}`))
	f.Add([]byte(`{"architectures":["K3DSparkModel"],"dflash_config":{"block_size":-1,"target_layer_ids":[1e30]}}`))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":112,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":24,"vocab_size":1024,"rms_norm_eps":1e-6,
"max_position_embeddings":40960,"rope_theta":1000000,"rope_scaling":null,"tie_word_embeddings":true,
"layer_types":["full_attention","full_attention","full_attention"],"bos_token_id":960,"eos_token_id":962}`))
	f.Add([]byte(`{"architectures":["Qwen3DSparkModel"],"hidden_size":64,"intermediate_size":112,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":24,"rms_norm_eps":1e-6,"rope_theta":1000000,"rope_scaling":null,
"max_position_embeddings":40960,"layer_types":["full_attention","full_attention"],"vocab_size":1024,"num_target_layers":3,
"target_layer_ids":[0,1],"block_size":4,"mask_token_id":1021,"markov_rank":16,"markov_head_type":"vanilla",
"enable_confidence_head":true,"confidence_head_with_markov":true}`))
	f.Add([]byte(`{"architectures":["DFlashDraftModel"],"hidden_size":64,"intermediate_size":112,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":0,"head_dim":24,"rms_norm_eps":1e-6,"rope_theta":1000000,"vocab_size":1024,
"num_target_layers":3,"block_size":16,"dflash_config":{"mask_token_id":1021,"aux_hidden_state_layer_ids":[0,1]}}`))
	f.Add([]byte(`{"architectures":["Qwen3_5MoeForConditionalGeneration"],"text_config":{"hidden_size":64,"num_hidden_layers":4,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"rms_norm_eps":1e-6,"max_position_embeddings":4096,"vocab_size":1024,
"linear_conv_kernel_dim":4,"linear_key_head_dim":16,"linear_value_head_dim":16,"linear_num_key_heads":2,"linear_num_value_heads":6,
"layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],"num_experts":4,"num_experts_per_tok":2,
"moe_intermediate_size":8,"shared_expert_intermediate_size":8,"mtp_num_hidden_layers":1,
"rope_parameters":{"rope_theta":1e7,"partial_rotary_factor":0.25,"mrope_section":[11,11,10]}}}`))
	f.Add([]byte(`{"hidden_size": 1.5, "rope_parameters": null, "x": [[[]]]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("config.json", b)
		if err != nil {
			return
		}
		c.Architecture()
		ro := &roster{byName: map[string]SrcTensor{}}
		for _, a := range registry {
			kv := newKeyValues(a.Schema)
			spec, err := a.read(c, ro, Options{}, kv)
			if err != nil {
				continue
			}
			kv.kvs() // range-checked encoding; must not panic
			// Bound the expansion so a fuzzed layer count cannot exhaust memory.
			if spec.layers.count > 64 || spec.layers.experts > 64 {
				continue
			}
			if _, err := expand(a, spec.dims, spec.features, spec.layers); err != nil {
				t.Fatalf("expand: %v", err)
			}
		}
		var v any
		_ = json.Unmarshal(b, &v)
	})
}
