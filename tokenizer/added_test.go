package tokenizer

import (
	"errors"
	"strings"
	"testing"
)

const kimiLikeConfig = `{
  "add_bos_token": false,
  "added_tokens_decoder": {
    "163585": {"content": "[EOS]", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true},
    "163584": {"content": "[BOS]", "special": true},
    "163586": {"content": "<|im_end|>", "special": true},
    "163601": {"content": "<|im_middle|>"},
    "163839": {"content": "[PAD]", "special": false}
  },
  "bos_token": "[BOS]"
}`

func TestParseAddedTokens(t *testing.T) {
	m, err := ParseAddedTokens([]byte(kimiLikeConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{163584: "[BOS]", 163585: "[EOS]", 163586: "<|im_end|>", 163601: "<|im_middle|>", 163839: "[PAD]"}
	if len(m) != len(want) {
		t.Fatalf("got %v", m)
	}
	for id, s := range want {
		if m[id] != s {
			t.Errorf("id %d = %q, want %q", id, m[id], s)
		}
	}
	list, err := ParseAddedTokenList([]byte(kimiLikeConfig))
	if err != nil {
		t.Fatal(err)
	}
	wantList := []AddedToken{{163584, "[BOS]", true}, {163585, "[EOS]", true}, {163586, "<|im_end|>", true}, {163601, "<|im_middle|>", false}, {163839, "[PAD]", false}}
	if len(list) != len(wantList) {
		t.Fatalf("list %v", list)
	}
	for i := range wantList {
		if list[i] != wantList[i] {
			t.Errorf("entry %d = %+v, want %+v", i, list[i], wantList[i])
		}
	}
	if m, err := ParseAddedTokens([]byte(`{"model_max_length": 10}`)); err != nil || len(m) != 0 {
		t.Errorf("no decoder: %v %v", m, err)
	}
}

func TestParseAddedTokensErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"syntax", `{"added_tokens_decoder": {"1": {"content": "a",}}}`, "offset 47: added_tokens_decoder: invalid JSON"},
		{"duplicate key", `{"added_tokens_decoder": {"1": {"content": "a"}, "1": {"content": "b"}}}`, "offset 49: added_tokens_decoder: duplicate key"},
		{"invalid UTF-8", "{\"added_tokens_decoder\": {\"1\": {\"content\": \"\xff\"}}}", "offset 44: JSON: invalid UTF-8"},
		{"not an object", `{"added_tokens_decoder": [1]}`, "added_tokens_decoder"},
		{"bad key", `{"added_tokens_decoder": {"x1": {"content": "a"}}}`, `offset 26: added_tokens_decoder["x1"]: key is not a token id`},
		{"negative key", `{"added_tokens_decoder": {"-1": {"content": "a"}}}`, `added_tokens_decoder["-1"]`},
		{"missing content", `{"added_tokens_decoder": {"5": {"special": true}}}`, `missing "content"`},
		{"empty content", `{"added_tokens_decoder": {"5": {"content": ""}}}`, `empty "content"`},
		{"content not string", `{"added_tokens_decoder": {"5": {"content": 7}}}`, `offset 43: added_tokens_decoder["5"].content: must be a string, got 7`},
		{"special not bool", `{"added_tokens_decoder": {"5": {"content": "a", "special": "yes"}}}`, `added_tokens_decoder["5"]`},
		{"duplicate content", `{"added_tokens_decoder": {"5": {"content": "a"}, "9": {"content": "a"}}}`, `offset 49: added_tokens_decoder["9"]: content "a" already used by id 5`},
	}
	for _, c := range cases {
		_, err := ParseAddedTokens([]byte(c.in))
		if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tokenizer_config.json") {
			t.Errorf("%s: err = %v, want ErrFormat mentioning %q", c.name, err, c.want)
		}
	}
}

func TestReservedSpecials(t *testing.T) {
	added := map[int]string{10: "[BOS]", 12: "<|im_end|>", 3: "odd"}
	m := ReservedSpecials(added, 10, 4)
	want := map[int]string{3: "odd", 10: "[BOS]", 11: "<|reserved_token_11|>", 12: "<|im_end|>", 13: "<|reserved_token_13|>"}
	if len(m) != len(want) {
		t.Fatalf("got %v", m)
	}
	for id, s := range want {
		if m[id] != s {
			t.Errorf("id %d = %q, want %q", id, m[id], s)
		}
	}
	if len(added) != 3 {
		t.Error("added was modified")
	}
}

func FuzzParseAddedTokens(f *testing.F) {
	f.Add([]byte(kimiLikeConfig))
	f.Add([]byte(`{"added_tokens_decoder": {"5": {"content": "a"}, "9": {"content": "a"}}}`))
	f.Add([]byte(`{"added_tokens_decoder": {"99999999999": {"content": "a"}}}`))
	f.Add([]byte(`{"added_tokens_decoder": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseAddedTokenList(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("error %v is not a located *FormatError", err)
			}
			return
		}
		seen := map[string]bool{}
		for i, tk := range list {
			if tk.ID < 0 || tk.Content == "" || seen[tk.Content] || i > 0 && list[i-1].ID >= tk.ID {
				t.Fatalf("invalid entry accepted: %+v", tk)
			}
			seen[tk.Content] = true
		}
	})
}
