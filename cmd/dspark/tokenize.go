package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/input"
	"github.com/dspark-dev/dspark/runtime"
)

func init() { rootCmd.AddCommand(newTokenizeCmd()) }

// maxTokenizeText bounds the text read from standard input.
const maxTokenizeText = 64 << 20

func newTokenizeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tokenize FILE.gguf TEXT|-",
		Short: "Tokenize text with a GGUF's tokenizer and print the ids and pieces",
		Long: `tokenize builds the byte-level BPE tokenizer a GGUF holds (tokenizer.ggml.model "gpt2",
with the pre-tokenizer tokenizer.ggml.pre names) from its header alone, encodes TEXT (or
standard input, with -) and prints each token's id and the bytes it stands for, so a
vocabulary can be checked against another tool (llama.cpp's llama-tokenize, Hugging Face
tokenizers). Control and user-defined tokens written literally in the text are matched.
No BOS or EOS is added. FILE may be anything inspect reads (a .gguf.zst, a split set).`,
		Example: `  dspark tokenize model.gguf "Hello, world!"
  echo "Hello" | dspark tokenize --json model.gguf -`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, text := args[0], args[1]
			if name == "-" {
				return usagef("tokenize: FILE cannot be standard input (-); give TEXT as - to read the text from it")
			}
			if text == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxTokenizeText+1))
				if err != nil {
					return fmt.Errorf("tokenize: reading standard input: %w", err)
				}
				if len(b) > maxTokenizeText {
					return fmt.Errorf("tokenize: standard input is over %d bytes", maxTokenizeText)
				}
				text = string(b)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			in, err := input.Open(ctx, name, input.Options{Read: []gguf.Option{gguf.AllowUnsupported()}})
			if err != nil {
				return err
			}
			defer in.Close()
			b, err := runtime.LoadTokenizer(in.File)
			if err != nil {
				return err
			}
			ids := b.Encode(text)
			if asJSON {
				return writeTokensJSON(cmd.OutOrStdout(), name, b.Pre(), ids, b)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "#\tid\t piece\t\n")
			for k, id := range ids {
				fmt.Fprintf(w, "%d\t%d\t %s\t\n", k, id, strconv.Quote(string(b.TokenBytes(id))))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d tokens, %d bytes, pre-tokenizer %q\n", len(ids), len(text), b.Pre())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: file, pre, ids and per token id, piece and bytes (hex)")
	return cmd
}

// tokenJSON is one token of tokenize --json.
type tokenJSON struct {
	ID    int    `json:"id"`
	Piece string `json:"piece"` // the bytes as a string (invalid UTF-8 becomes U+FFFD)
	Bytes string `json:"bytes"` // the exact bytes, hex
}

func writeTokensJSON(w io.Writer, file, pre string, ids []int, b interface{ TokenBytes(int) []byte }) error {
	out := struct {
		File   string      `json:"file"`
		Pre    string      `json:"pre"`
		IDs    []int       `json:"ids"`
		Tokens []tokenJSON `json:"tokens"`
	}{File: file, Pre: pre, IDs: ids, Tokens: make([]tokenJSON, len(ids))}
	if out.IDs == nil {
		out.IDs = []int{}
	}
	for k, id := range ids {
		p := b.TokenBytes(id)
		out.Tokens[k] = tokenJSON{ID: id, Piece: string(p), Bytes: hex.EncodeToString(p)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
