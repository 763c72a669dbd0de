package demo

import "github.com/dspark-dev/dspark/runtime/speculative"

// SampledParams is the demo's sampled decoding: temperature 0.8, top-p 0.95.
var SampledParams = speculative.Params{Temperature: 0.8, TopP: 0.95}

// CalibrationPrompts and HeldOutPrompts are the prompts `dspark calibrate` decodes when it is
// given none: the temperatures are fitted on the first set and the calibration error is
// reported on the second. They were written for calibration, in the register of Go
// documentation the English pair speaks; they are neither the demo's prompts
// (EnglishPrompts) nor any text a fit of the pair saw (the confidence head's windows of
// corpus text, the probe's token sequences), though their words are, like any English, in
// the corpus the target's lexicon was counted from.
var (
	CalibrationPrompts = []string{
		"The function returns",
		"This package provides",
		"A reader that",
		"If the buffer is",
		"The default value is",
		"Close closes the",
		"When the context is",
		"An error is returned if",
		"The caller must",
		"Write writes the",
		"Each call to",
		"The result is",
		"It is safe to",
		"A nil pointer",
		"The method reports whether",
		"Only one goroutine",
		"The string is",
		"For example, the",
		"The length of",
		"Read reads up to",
		"New returns a new",
		"The zero value",
		"Callers should",
		"The returned value",
		"If the file does not exist,",
		"The timeout is",
		"This type implements",
		"The server sends",
		"A value of type",
		"The map holds",
		"After the call,",
		"The number of bytes",
	}
	HeldOutPrompts = []string{
		"The client must",
		"If the name is empty,",
		"The encoder writes",
		"A channel that",
		"The list is sorted",
		"The handler is called",
		"In this case the",
		"The key is",
		"Parse parses the",
		"The program should",
		"A lock protects",
		"The output is",
		"Use this function to",
		"The time is",
		"The first argument",
		"A copy of the",
	}
)
