// Package schema declares the GGUF architectures dspark reads and writes, as data: for
// each architecture its keys (name, exact GGUF type, required or default, range), its
// tensors (name template, dims as expressions over the keys, the blocks they exist in,
// optional or conditional) and its cross-key rules, in the spirit of gguf-py's
// constants.py. One declaration serves every reader and writer: gguf/lint interprets it to
// check a file, convert takes key types and tensor names from it and checks its plan
// against it, and the runtime reads hyperparameters and binds tensors through it, so that
// "required" has one meaning everywhere.
//
// A key is required only where the tensor shapes cannot tell its value: a declaration may
// infer a key from a tensor's dims (the Markov rank from markov_w1) and default it
// otherwise. Values that depend on something missing are unknown, and checks that need an
// unknown value are skipped (the missing value was reported once).
//
// Adding an architecture is one declaration (a Schema passed to register) in one file;
// readers find it with For, by general.architecture and, when several schemas share an
// architecture, by the schema's Select expression (the one without a Select is the
// architecture's default: dflash files are upstream's GQA drafters unless they are MLA's).
package schema
