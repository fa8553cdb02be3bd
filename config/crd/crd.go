// Package crd embeds wrapup's generated CustomResourceDefinitions, so that
// tools validate objects offline exactly as the API server validates them.
package crd

import _ "embed"

// CompletionRules is the CompletionRule CRD, as make manifests generates it.
//
//go:embed bases/wrapup.dev_completionrules.yaml
var CompletionRules []byte
