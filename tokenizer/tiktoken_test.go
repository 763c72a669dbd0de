package tokenizer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadTiktokenHandWritten(t *testing.T) {
	// "IQ==" = "!", "aGk=" = "hi", "IGhp" = " hi"; rank 2 is a hole; last line has no newline.
	in := "IQ== 0\naGk= 1\r\nIGhp 3"
	got, err := ReadTiktoken(strings.NewReader(in), "t.model")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("!"), []byte("hi"), nil, []byte(" hi")}
	if len(got) != len(want) {
		t.Fatalf("len %d, want %d", len(got), len(want))
	}
	for i := range want {
		if (got[i] == nil) != (want[i] == nil) || !bytes.Equal(got[i], want[i]) {
			t.Errorf("rank %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestTiktokenRoundTrip(t *testing.T) {
	ranks, err := TrainBPE([]byte(sampleText), 400)
	if err != nil {
		t.Fatal(err)
	}
	ranks = append(ranks, nil, []byte("\x00\xff tail")) // a hole and odd bytes
	var buf bytes.Buffer
	if err := WriteTiktoken(&buf, ranks); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTiktoken(iotest.OneByteReader(bytes.NewReader(buf.Bytes())), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(ranks) {
		t.Fatalf("len %d, want %d", len(back), len(ranks))
	}
	for i := range ranks {
		if (back[i] == nil) != (ranks[i] == nil) || !bytes.Equal(back[i], ranks[i]) {
			t.Fatalf("rank %d = %q, want %q", i, back[i], ranks[i])
		}
	}
}

func TestWriteTiktokenRefuses(t *testing.T) {
	for name, ranks := range map[string][][]byte{
		"empty token":     {[]byte("a"), {}},
		"duplicate bytes": {[]byte("a"), []byte("b"), []byte("a")},
	} {
		if err := WriteTiktoken(&bytes.Buffer{}, ranks); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadTiktokenErrors(t *testing.T) {
	cases := []struct {
		name, in string
		line     int
		offset   int64
		field    string
		msg      string
	}{
		{"bad base64 char", "IQ== 0\naG!k= 1\n", 2, 9, "base64 token", "alphabet"},
		{"bad padding", "IQ== 0\naGk 1\n", 2, 7, "base64 token", "invalid base64"},
		{"CR inside base64", "IQ== 0\naG\rk= 1\n", 2, 9, "base64 token", "alphabet"},
		{"empty base64", "IQ== 0\n 1\n", 2, 7, "base64 token", "empty"},
		{"negative rank", "IQ== -1\n", 1, 5, "rank", "not a non-negative"},
		{"rank with sign", "IQ== +1\n", 1, 5, "rank", "not a non-negative"},
		{"leading zero", "IQ== 01\n", 1, 5, "rank", "leading zero"},
		{"missing rank", "IQ== \n", 1, 5, "rank", "missing"},
		{"absurd rank", "IQ== 16777217\n", 1, 5, "rank", "absurd"},
		{"huge rank", "IQ== 99999999999999999999\n", 1, 5, "rank", "absurd"},
		{"sparse", "IQ== 0\naGk= 65542\nIGhp 1\n", 2, 12, "rank", "id space empty"},
		{"duplicate rank", "IQ== 0\naGk= 1\nIGhp 1\n", 3, 19, "rank", "first on line 2"},
		{"duplicate bytes", "IQ== 0\naGk= 1\naGk= 2\n", 3, 14, "base64 token", "first on line 2"},
		{"no space", "IQ==0\n", 1, 0, "line", "no space"},
		{"extra field", "IQ== 0 x\n", 1, 6, "line", "extra field"},
		{"empty line", "IQ== 0\n\naGk= 1\n", 2, 7, "line", "empty line"},
		{"long line", strings.Repeat("A", 70000) + " 0\n", 1, 0, "line", "longer than"},
	}
	for _, c := range cases {
		_, err := ReadTiktoken(strings.NewReader(c.in), "tok.model")
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want *FormatError", c.name, err)
			continue
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: not ErrFormat", c.name)
		}
		if fe.File != "tok.model" || fe.Line != c.line || fe.Offset != c.offset || fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s: got %+v, want line %d offset %d field %q msg ~%q", c.name, *fe, c.line, c.offset, c.field, c.msg)
		}
		if !strings.Contains(err.Error(), "tok.model:") {
			t.Errorf("%s: message %q does not name the file", c.name, err)
		}
	}
}

func TestReadTiktokenSparseLimit(t *testing.T) {
	// 3 tokens allow ids up to 2*3 + 65536 - 1 = 65541.
	r, err := ReadTiktoken(strings.NewReader("IQ== 0\naGk= 65541\nIGhp 1\n"), "x")
	if err != nil || len(r) != 65542 || string(r[65541]) != "hi" || r[2] != nil {
		t.Fatalf("len %d, err %v", len(r), err)
	}
}

func TestReadTiktokenReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadTiktoken(iotest.ErrReader(boom), "x")
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzReadTiktoken(f *testing.F) {
	f.Add([]byte("IQ== 0\naGk= 1\r\nIGhp 3"))
	f.Add([]byte("IQ== 0\naGk= 1\naGk= 2\n"))
	f.Add([]byte("AA== 16777216\n"))
	f.Add([]byte("AA== 65537\n"))
	f.Add([]byte("IQ== 0\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ranks, err := ReadTiktoken(bytes.NewReader(data), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not match ErrFormat", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteTiktoken(&buf, ranks); err != nil {
			t.Fatalf("write of a parsed file: %v", err)
		}
		back, err := ReadTiktoken(&buf, "again")
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if len(back) != len(ranks) {
			t.Fatalf("reparse len %d != %d", len(back), len(ranks))
		}
		for i := range ranks {
			if !bytes.Equal(back[i], ranks[i]) || (back[i] == nil) != (ranks[i] == nil) {
				t.Fatalf("rank %d changed", i)
			}
		}
	})
}
