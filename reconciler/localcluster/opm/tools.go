//go:build tools

// Package tools records the opm command this module builds, so that
// `go mod tidy` keeps its dependencies.
package tools

import (
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
