package main

// Blank imports that pin the project's chosen dependencies in go.mod while the packages
// that use them are being written. Removed once every dependency has a real importer.
import (
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/olekukonko/tablewriter"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/x448/float16"
	_ "golang.org/x/sys/cpu"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)
