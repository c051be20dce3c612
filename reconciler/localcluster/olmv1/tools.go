//go:build tools

// Package tools records the OLM v1 commands this module builds, so that
// `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
