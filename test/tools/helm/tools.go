//go:build tools

// Package helm pins the Helm CLI that test/controlplane/build.sh builds
// for the chart's tests (charts/wrapup), in a module of its own: Helm's
// Kubernetes libraries are newer than the project's.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
