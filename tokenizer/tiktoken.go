package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxRank is the largest rank ReadTiktoken accepts. Real vocabularies have a few hundred
// thousand ranks; anything above 1<<24 is treated as corruption rather than allocated.
const MaxRank = 1 << 24

// maxTiktokenLine bounds one line of a tiktoken.model file (base64 of one token plus its rank).
const maxTiktokenLine = 64 << 10

// ReadTiktoken parses a tiktoken.model file: one token per line, "<base64 of the token's
// bytes> <decimal rank>\n", where the rank is the token id. The result is indexed by rank;
// ranks absent from the file are nil holes. The last line may lack its newline, and "\r\n"
// line ends are accepted; nothing else is trimmed or skipped. Errors are *FormatError values
// naming name, the line and the byte offset of the bad field: bad base64, empty token, bad or
// absurd rank (> MaxRank), duplicate rank, duplicate token bytes, over-long or empty line,
// and a file so sparse that its largest rank exceeds twice its token count plus 65,536 (so
// that memory stays proportional to the file's size; real files are dense).
func ReadTiktoken(r io.Reader, name string) ([][]byte, error) {
	br := bufio.NewReaderSize(r, maxTiktokenLine)
	var (
		entries []rankedToken
		arena   []byte // token bytes are carved from 64 KiB chunks, not allocated one by one
		maxRank = -1
		maxLine int
		maxOff  int64
		seen    = make(map[string]int) // token bytes -> line where first seen
		lineOf  = make(map[int]int)    // rank -> line where defined
		off     int64
		line    int
	)
	fail := func(at int64, field, format string, args ...any) error {
		return &FormatError{File: name, Line: line, Offset: at, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	for {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line++
			return nil, fail(off, "line", "longer than %d bytes", maxTiktokenLine)
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("tokenizer: %s:%d: offset %d: read: %w", name, line+1, off, err)
		}
		if len(raw) == 0 && err == io.EOF {
			break
		}
		line++
		start := off
		off += int64(len(raw))
		text := raw
		if n := len(text); n > 0 && text[n-1] == '\n' {
			text = text[:n-1]
			if n := len(text); n > 0 && text[n-1] == '\r' {
				text = text[:n-1]
			}
		}
		if len(text) == 0 {
			return nil, fail(start, "line", "empty line")
		}
		sp := bytes.IndexByte(text, ' ')
		if sp < 0 {
			return nil, fail(start, "line", "want \"<base64> <rank>\", found no space")
		}
		b64, rankText := text[:sp], text[sp+1:]
		rankOff := start + int64(sp) + 1
		if j := bytes.IndexByte(rankText, ' '); j >= 0 {
			return nil, fail(rankOff+int64(j), "line", "extra field after the rank")
		}
		if len(b64) == 0 {
			return nil, fail(start, "base64 token", "empty")
		}
		if j := badBase64Byte(b64); j >= 0 {
			return nil, fail(start+int64(j), "base64 token", "byte %q is not in the base64 alphabet", b64[j])
		}
		need := base64.StdEncoding.DecodedLen(len(b64))
		if cap(arena)-len(arena) < need {
			arena = make([]byte, 0, max(64<<10, need))
		}
		tok := arena[len(arena) : len(arena)+need]
		n, derr := base64.StdEncoding.Strict().Decode(tok, b64)
		if derr != nil {
			at := start
			var ce base64.CorruptInputError
			if errors.As(derr, &ce) {
				at += int64(ce)
			}
			return nil, fail(at, "base64 token", "invalid base64 %q", b64)
		}
		tok = tok[:n:n]
		arena = arena[:len(arena)+n]
		if n == 0 {
			return nil, fail(start, "base64 token", "decodes to zero bytes")
		}
		rank, rerr := parseRank(rankText)
		if rerr != "" {
			return nil, fail(rankOff, "rank", "%s (%q)", rerr, rankText)
		}
		if prev, dup := lineOf[rank]; dup {
			return nil, fail(rankOff, "rank", "duplicate rank %d (first on line %d)", rank, prev)
		}
		if prev, dup := seen[string(tok)]; dup {
			return nil, fail(start, "base64 token", "duplicate token bytes %q (first on line %d)", tok, prev)
		}
		lineOf[rank] = line
		seen[string(tok)] = line
		entries = append(entries, rankedToken{rank, tok})
		if rank > maxRank {
			maxRank, maxLine, maxOff = rank, line, rankOff
		}
		if err == io.EOF {
			break
		}
	}
	if maxRank+1 > maxSparse(len(entries)) {
		line = maxLine
		return nil, fail(maxOff, "rank", "rank %d leaves most of the id space empty (only %d tokens); the file is corrupt", maxRank, len(entries))
	}
	ranks := make([][]byte, maxRank+1)
	for _, e := range entries {
		ranks[e.rank] = e.tok
	}
	return ranks, nil
}

// badBase64Byte returns the index of the first byte of b outside the standard base64
// alphabet (with '=' padding), or -1. The decoder itself would silently skip CR and LF.
func badBase64Byte(b []byte) int {
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
		default:
			return i
		}
	}
	return -1
}

// rankedToken is a token held back until the file's density is known.
type rankedToken struct {
	rank int
	tok  []byte
}

// maxSparse is the largest id space ReadTiktoken allocates for n tokens: holes are allowed,
// but a file may not claim more than twice its token count plus 65,536 ids, so memory stays
// proportional to the file's size. Real tiktoken files are dense.
func maxSparse(n int) int { return 2*n + 1<<16 }

// parseRank parses a non-negative decimal rank without sign or leading zeros; it returns a
// reason on failure.
func parseRank(b []byte) (int, string) {
	if len(b) == 0 {
		return 0, "missing rank"
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, "leading zero in rank"
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, "rank is not a non-negative decimal integer"
		}
	}
	if len(b) > 9 {
		return 0, fmt.Sprintf("absurd rank > %d", MaxRank)
	}
	v, err := strconv.Atoi(string(b))
	if err != nil {
		return 0, "rank is not a non-negative decimal integer"
	}
	if v > MaxRank {
		return 0, fmt.Sprintf("absurd rank > %d", MaxRank)
	}
	return v, ""
}

// WriteTiktoken writes ranks in tiktoken.model form, one "<base64> <rank>\n" line per
// non-nil entry in rank order (nil entries are holes and are skipped). It refuses empty
// tokens, duplicate token bytes and ranks above MaxRank, so that its output always reads back
// with ReadTiktoken.
func WriteTiktoken(w io.Writer, ranks [][]byte) error {
	if len(ranks) > MaxRank+1 {
		return fmt.Errorf("tokenizer: %d ranks exceed the maximum rank %d", len(ranks), MaxRank)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	seen := make(map[string]int, len(ranks))
	var buf []byte
	for rank, tok := range ranks {
		if tok == nil {
			continue
		}
		if len(tok) == 0 {
			return fmt.Errorf("tokenizer: rank %d is an empty token", rank)
		}
		if prev, dup := seen[string(tok)]; dup {
			return fmt.Errorf("tokenizer: ranks %d and %d hold the same bytes %q", prev, rank, tok)
		}
		seen[string(tok)] = rank
		buf = base64.StdEncoding.AppendEncode(buf[:0], tok)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(rank), 10)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
