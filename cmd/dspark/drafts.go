package main

import (
	"fmt"

	"github.com/dspark-dev/dspark/gguf"
	"github.com/dspark-dev/dspark/gguf/schema"
	"github.com/dspark-dev/dspark/runtime"
	"github.com/dspark-dev/dspark/runtime/dflashgqa"
	"github.com/dspark-dev/dspark/runtime/dflashmla"
)

// loadedDraft is a loaded draft of any supported backbone.
type loadedDraft interface {
	runtime.Draft
	Close()
}

// draftFile is a draft GGUF read against its declaration but not loaded: what a run needs
// to know of it before loading (its cache size, for the memory bound).
type draftFile struct {
	schema            string // the declaration it is read against
	layers, blockSize int
	markovRank        int
	cacheBytes        func(ctx int) (int64, error)
	cacheDetail       string // the per-position cache size, for messages
	load              func(t runtime.Target, opt runtime.Options) (loadedDraft, error)
}

// readDraft reads a draft file's hyperparameters through its declaration: a dflash draft
// with an MLA backbone (dflashmla) or upstream's Qwen3-style GQA one (dflashgqa). Neither
// package knows the target's architecture: both load against any runtime.Target.
func readDraft(f *gguf.File) (*draftFile, error) {
	if schema.For(schema.FileSource(f)) == schema.DFlashGQA {
		c, err := dflashgqa.ReadConfig(f)
		if err != nil {
			return nil, err
		}
		return &draftFile{schema: schema.DFlashGQA.Name, layers: c.NLayer, blockSize: c.BlockSize, markovRank: c.MarkovRank,
			cacheBytes:  c.CacheBytes,
			cacheDetail: fmt.Sprintf("draft %d layers x %d values x 4 bytes per position plus one block", c.NLayer, 2*c.NHeadKV*c.HeadDim),
			load: func(t runtime.Target, opt runtime.Options) (loadedDraft, error) {
				d, err := dflashgqa.Load(f, t, opt)
				if err != nil {
					return nil, err
				}
				return d, nil
			}}, nil
	}
	c, err := dflashmla.ReadConfig(f) // also the error for a file that is no dflash draft
	if err != nil {
		return nil, err
	}
	return &draftFile{schema: schema.DFlashMLA.Name, layers: c.NLayer, blockSize: c.BlockSize, markovRank: c.MarkovRank,
		cacheBytes:  c.CacheBytes,
		cacheDetail: fmt.Sprintf("draft %d layers x %d values x 4 bytes per position plus one block", c.NLayer, c.Attn.KVLoraRank+c.Attn.DRope),
		load: func(t runtime.Target, opt runtime.Options) (loadedDraft, error) {
			d, err := dflashmla.Load(f, t, opt)
			if err != nil {
				return nil, err
			}
			return d, nil
		}}, nil
}
