package session_test

import (
	"fmt"
	"log"
	"os"
	"slices"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/session"
)

// Example opens the small demo pair, resolves its verify schedule (measuring the cost
// model) and decodes a prompt with the draft, checking the greedy output against the target
// decoding alone: speculative decoding is lossless.
func Example() {
	dir, err := os.MkdirTemp("", "session-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	targetPath, draftPath, err := demo.Extract(dir)
	if err != nil {
		log.Fatal(err)
	}

	p, err := session.Open(targetPath, draftPath)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	p.DraftName = "the demo draft" // how notes name it
	prompt := p.Tokenizer.Encode("the cat")
	const n = 16
	if err := p.Load(runtime.Options{Context: len(prompt) + n, Pack: true}); err != nil {
		log.Fatal(err)
	}
	sched, err := p.Schedule(session.ScheduleOptions{
		Mode:  session.Scheduled, // the expected tokens per second of the measured cost model
		Note:  func(msg string) { fmt.Println("note:", msg) },
		Costs: &session.CostCache{Dir: dir}, // keep the passes for the next run of this pair
	})
	if err != nil {
		log.Fatal(err)
	}
	g := p.Generator(session.Settings{})
	report := sched.Apply(g, g.Params, nil)

	spec, err := g.Speculative(prompt, n)
	if err != nil {
		log.Fatal(err)
	}
	plain, err := g.Plain(prompt, n)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verify schedule:", report.Mode)
	fmt.Println("cost model passes:", report.Costs.Passes)
	fmt.Println("tokens:", len(spec.Tokens))
	fmt.Println("same as plain decoding:", slices.Equal(spec.Tokens, plain.Tokens))
	// Output:
	// note: the demo draft has no calibration: scheduling on its confidence head uncalibrated (dspark calibrate fits one)
	// verify schedule: scheduled
	// cost model passes: 3
	// tokens: 16
	// same as plain decoding: true
}
