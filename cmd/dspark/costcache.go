package main

import (
	"path/filepath"

	"github.com/dspark-dev/dspark/internal/demo"
	"github.com/dspark-dev/dspark/runtime/session"
)

// costCacheDir is where the cost files of the verify scheduler live ("" : no cache): costs
// in the user cache directory (session.CostCache); a variable for tests.
var costCacheDir = func() string {
	d, err := demo.DefaultCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "costs")
}

// buildID identifies this build of dspark in the cost cache's keys; a variable for tests.
var buildID = session.ExecutableID
