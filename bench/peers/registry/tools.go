//go:build tools

// Package tools records the registry command this module builds, so that
// `go mod tidy` keeps its dependencies.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
