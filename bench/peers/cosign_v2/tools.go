//go:build tools

// Package tools pins cosign for `go build`.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
